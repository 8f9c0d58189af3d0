#!/bin/sh
# tests/test_models_lr.sh — every built-in model trains without diverging at the learning rates
# a PyTorch user would use for it (issue 14), on scikit-learn's digits (8x8 native, 28x28 for
# lenet5; small and fast): after a few epochs the test accuracy is far above chance (10 %) and
# the loss finite. Exits 77 (skipped), saying why, when the digits file is missing
# (apt-get install python3-sklearn).
bin=${HS_BIN:-./hearsay}
# skip only when the digits file is missing (the message names the package); fail otherwise
if ! msg=$("$bin" train --data digits --model logreg:784-10 --max-iters 1 --quiet 2>&1); then
    case $msg in
    *python3-sklearn*)
        echo "test_models_lr: skipped: the digits are not installed (apt-get install python3-sklearn)"
        exit 77 ;;
    *)
        echo "test_models_lr: FAIL: hearsay train on the digits failed: $msg"
        exit 1 ;;
    esac
fi
out=$(mktemp -d "${TMPDIR:-/tmp}/hs_models_lr_XXXXXX") || exit 1
trap 'rm -rf "$out"' EXIT
fail=0
# model | data | lr and friends | epochs | minimum test accuracy
while IFS='|' read -r model data opts epochs min; do
    [ -n "$model" ] || continue
    dir="$out/$(echo "$model" | tr ':-' '__')"
    # shellcheck disable=SC2086
    if ! "$bin" train --model "$model" --data "$data" $opts --epochs "$epochs" --threads 1 \
        --quiet --eval-every 0 --out "$dir" >"$dir.log" 2>&1; then
        echo "FAIL: $model: hearsay train failed:"; cat "$dir.log"; fail=1; continue
    fi
    acc=$(sed -n 's/.*"final_test_acc": *\([0-9.eE+-]*\).*/\1/p' "$dir/summary.json" | head -1)
    if awk -v a="$acc" -v m="$min" 'BEGIN { exit !(a >= m) }'; then
        echo "ok: $model on $data with $opts: test accuracy $acc (>= $min)"
    else
        echo "FAIL: $model on $data with $opts: test accuracy '$acc' < $min (diverged?)"; fail=1
    fi
done <<'LIST'
logreg:64-10|digits:size=8|--lr 0.1 --momentum 0.9 --batch 64|5|0.85
mlp:64-128-128-10|digits:size=8|--lr 0.1 --momentum 0.9 --weight-decay 5e-4 --batch 64|5|0.85
lenet5|digits|--lr 0.05 --momentum 0.9 --weight-decay 5e-4 --batch 64|3|0.80
resnet20|digits:size=8|--lr 0.1 --momentum 0.9 --weight-decay 1e-4 --batch 64|3|0.80
resnet20-fixup|digits:size=8|--lr 0.1 --momentum 0.9 --weight-decay 1e-4 --batch 64|3|0.80
LIST
exit $fail
