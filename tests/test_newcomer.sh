#!/bin/sh
# shellcheck disable=SC2015,SC2317 # A && ok || bad: ok never fails; cleanup runs from trap
# tests/test_newcomer.sh — what a new user meets first (issue 30): a multi-rank job without
# --algo warns that its workers train independently and its result line does not call their
# average a trained "averaged model"; --model lenet5 on flat data names the input it takes;
# `hearsay train --help-models` documents every model and the seq: grammar.
bin=${HS_BIN:-./hearsay}
# shellcheck source=tests/shlib.sh
. "$(dirname "$0")/shlib.sh"
hs_scratch newcomer
trap 'rm -rf "$tmp"' EXIT
small="--max-iters 2 --data gauss:dim=10,train=200,test=50 --model mlp:10-8-10 --progress 0"

# shellcheck disable=SC2086
"$bin" run -n 2 -- hearsay train $small >"$tmp/out" 2>"$tmp/err" || bad "2 ranks without --algo failed: $(cat "$tmp/err")"
grep -q "warning: no --algo: the 2 workers train independently (--algo local" "$tmp/err" &&
    ok "2 ranks without --algo: warned that the workers train independently" ||
    bad "no warning for 2 ranks without --algo: $(cat "$tmp/err")"
[ "$(grep -c "warning: no --algo" "$tmp/err")" = 1 ] && ok "warned once (rank 0)" || bad "warned $(grep -c "warning: no --algo" "$tmp/err") times"
grep "done:.*on 2 ranks" "$tmp/out" | grep -q "average of the independently trained workers' models (--algo local)" &&
    ok "the result line says the average is of independently trained models" ||
    bad "result line: $(grep "done:" "$tmp/out")"
grep "done:.*on 2 ranks" "$tmp/out" | grep -q "averaged model" && bad "still calls it the averaged model" || true
# shellcheck disable=SC2086
"$bin" sim -n 3 $small >"$tmp/out" 2>"$tmp/err" || bad "sim -n 3 without --algo failed"
grep -q "warning: no --algo: the 3 workers" "$tmp/err" && ok "hearsay sim warns too" || bad "hearsay sim did not warn"
# shellcheck disable=SC2086
"$bin" run -n 2 -- hearsay train --algo local $small >"$tmp/out" 2>"$tmp/err"
grep -q "warning: no --algo" "$tmp/err" && bad "warned although --algo local was given" || ok "--algo local given: no warning"
# shellcheck disable=SC2086
"$bin" train $small >"$tmp/out" 2>"$tmp/err"
grep -q "warning: no --algo" "$tmp/err" && bad "one worker warned" || ok "one worker: no warning"
# shellcheck disable=SC2086
"$bin" run -n 2 -- hearsay train --algo sgp $small >"$tmp/out" 2>"$tmp/err"
grep -q "done:.*averaged model test loss" "$tmp/out" && ok "--algo sgp: the averaged model" || bad "sgp result line: $(grep done: "$tmp/out")"

# hearsay report on such a run says so too
if /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
    # shellcheck disable=SC2086
    "$bin" sim -n 2 $small --out "$tmp/local" >/dev/null 2>&1 || bad "sim --out failed"
    "$bin" report "$tmp/local" >/dev/null 2>"$tmp/err" || bad "hearsay report failed: $(cat "$tmp/err")"
    grep -q "Note: --algo local: the 2 workers trained independently" "$tmp/local/report.md" &&
        ok "hearsay report on a local job says its workers trained independently" ||
        bad "report.md of a local job: $(head -n 8 "$tmp/local/report.md")"
    # report polish (issue 30 item 5): no Python None, accuracy as a percentage as everywhere
    # else, virtual seconds said so
    grep -q "None" "$tmp/local/report.md" && bad "report.md shows a None: $(grep None "$tmp/local/report.md")"
    grep -q "transport: intra_host: sim$" "$tmp/local/report.md" && ok "report.md: transport without an empty inter_host" ||
        bad "transport line: $(grep transport: "$tmp/local/report.md")"
    grep -q "^| final_test_acc | [0-9.]* % |$" "$tmp/local/report.md" && ok "report.md: accuracy as a percentage" ||
        bad "accuracy: $(grep final_test_acc "$tmp/local/report.md")"
    grep -q "^| wall_s (virtual s) |" "$tmp/local/report.md" && ok "report.md: virtual seconds said so" ||
        bad "wall_s: $(grep wall_s "$tmp/local/report.md")"
else
    echo "skipped: hearsay report (no matplotlib for /usr/bin/python3)"
fi

# a study prints run k of K, the time elapsed and an estimate of the rest
src=${HS_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
if /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
    HEARSAY=$bin bash "$src/experiments/stragglers.sh" --sim --sim-compute fixed:1 \
        --algos "allreduce sgp" --slowdowns "1 4" --epochs 1 --model mlp:8-8-10 \
        --data gauss:dim=8,classes=10,train=2000,test=200 --batch 32 --out "$tmp/study" \
        >"$tmp/study.log" 2>&1 || bad "stragglers.sh failed: $(tail -n 5 "$tmp/study.log")"
    grep -q "^== run 1 of 4: allreduce, x1, seed 1 (elapsed [0-9]*s)$" "$tmp/study.log" &&
        grep -q "^== run 4 of 4: sgp, x4, seed 1 (elapsed [0-9]*s, about [0-9]*s left)$" "$tmp/study.log" &&
        grep -q "^== 4 of 4 runs in [0-9]*s$" "$tmp/study.log" &&
        ok "stragglers.sh prints run k of K, elapsed and the time left" ||
        bad "stragglers.sh progress: $(grep '^==' "$tmp/study.log")"
fi

# a model that does not fit: the input it takes
"$bin" train --model lenet5 --data gauss >"$tmp/out" 2>"$tmp/err" && bad "lenet5 on gauss accepted"
grep -q "model 'lenet5' takes 1x28x28 (mnist, digits) or 3x32x32 (cifar10) images" "$tmp/err" &&
    grep -q "flat vectors (1x1x784" "$tmp/err" && ok "lenet5 on gauss names the input it takes" ||
    bad "lenet5 on gauss: $(cat "$tmp/err")"
grep -q "window larger" "$tmp/err" && bad "still talks of a window: $(cat "$tmp/err")" || true

# --device cuda without a usable GPU: refused at once, with the driver's reason (or the build's)
if ! nvidia-smi -L >/dev/null 2>&1; then
    t0=$(date +%s)
    # shellcheck disable=SC2086
    "$bin" run -n 2 -- hearsay train --device cuda $small >"$tmp/out" 2>"$tmp/err"
    rc=$?
    el=$(($(date +%s) - t0))
    if [ $rc = 2 ] && [ $el -lt 20 ] && grep -q "hearsay train: --device cuda: .*\(CUDA device\|built without CUDA\)" "$tmp/err" &&
        ! grep -q "^\[0\] epoch" "$tmp/out"; then
        ok "--device cuda without a GPU: exit 2 in ${el}s, '$(grep -m1 -- '--device cuda' "$tmp/err" | cut -c1-120)...'"
    else
        bad "--device cuda without a GPU: exit $rc after ${el}s: $(cat "$tmp/err")"
    fi
fi

# --help-models: every model, every seq: layer, examples
"$bin" train --help-models >"$tmp/models" 2>&1 || bad "--help-models failed"
missing=
for w in logreg: mlp: lenet5 resnet20 resnet20-fixup seq: fcN convK maxpoolN relu tanh flatten gap \
    bn resK blockK Examples: 1x28x28 3x32x32; do
    grep -q -- "$w" "$tmp/models" || missing="$missing $w"
done
[ -z "$missing" ] && ok "--help-models documents every model and seq: layer, with examples" ||
    bad "--help-models lacks:$missing"
"$bin" train --help | grep -q -- "--help-models" && ok "--help points to --help-models" || bad "--help does not mention --help-models"
"$bin" sim --help-models | grep -q "^  seq:L-L" && ok "hearsay sim --help-models too" ||
    bad "hearsay sim --help-models fails"
# an option several algorithms take with different defaults says each (it said "default: 1"
# for --tau, which osgp takes as 2)
"$bin" train --help | tr -s ' \n' ' ' | grep -q -- "(default: osgp 2, easgd 1, eamsgd 1, lsgd 1;" &&
    ok "--help gives --tau's default per algorithm" || bad "--help: --tau's defaults per algorithm"
"$bin" sim --help | grep -q -- "--sim-payload MODEL" && ok "hearsay sim --help has --sim-payload" ||
    bad "hearsay sim --help lacks --sim-payload"
exit $fail
