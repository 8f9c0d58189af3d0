#!/bin/sh
# tests/test_readme_figures.sh — the README's quoted results agree with what
# experiments/readme_figures.sh prints (issue 30): its cheap, deterministic part (--only
# gauss,digits-one: the Gaussian mixture's Bayes accuracy, and one worker on the digits under
# each OpenBLAS kernel this CPU runs, about 7 runs of 2 s) is measured and compared with the
# README within the script's tolerances (0.05 points; 0.3 points, one test image being 0.28);
# the wall-clock figures (8 processes on shared cores, the simulator's benchmark) are checked
# for presence and format only (median inside its own range): measuring them takes minutes.
# Exits 77 (skipped), saying why, without bash, /usr/bin/python3 with numpy, or the digits
# file (python3-sklearn), and in the sanitizer build. About 25 s of CPU.
. "$(dirname "$0")/shlib.sh"
src=${HS_SRCDIR:-$(dirname "$0")/..}
bin=${HS_BIN:-./hearsay}
py=/usr/bin/python3
if ! command -v bash >/dev/null || [ ! -x "$py" ] || ! "$py" -c "import numpy" 2>/dev/null; then
    echo "test_readme_figures: skipped: needs bash and /usr/bin/python3 with numpy"
    exit 77
fi
case "${ASAN_OPTIONS:-}" in
*log_path=*)
    # the sanitizer build (scripts/test.sh --sanitize): figures are the plain build's to check
    echo "test_readme_figures: skipped: a sanitizer build (the plain build's make check checks them)"
    exit 77
    ;;
esac
if ! msg=$("$bin" train --data digits --model logreg:784-10 --max-iters 1 --quiet 2>&1); then
    case $msg in
    *python3-sklearn*)
        echo "test_readme_figures: skipped: the digits are not installed (apt-get install python3-sklearn)"
        exit 77 ;;
    *)
        echo "test_readme_figures: FAIL: hearsay train on the digits failed: $msg"
        exit 1 ;;
    esac
fi
hs_scratch readme_figures
trap 'rm -rf "$tmp"' EXIT
if HEARSAY=$bin bash "$src/experiments/readme_figures.sh" --only gauss,digits-one \
    --out "$tmp/out" --check "$src/README.md" >"$tmp/log" 2>&1; then
    ok "README.md's figures agree with experiments/readme_figures.sh"
else
    bad "README.md's figures and experiments/readme_figures.sh disagree"
fi
cat "$tmp/log"
# a README whose quote is off is caught (the check is not vacuous)
sed 's/known Bayes accuracy, [0-9.]* %/known Bayes accuracy, 90.0 %/' "$src/README.md" \
    >"$tmp/README.md"
if HEARSAY=$bin bash "$src/experiments/readme_figures.sh" --only gauss --out "$tmp/out2" \
    --check "$tmp/README.md" >"$tmp/log2" 2>&1; then
    bad "--check accepted a README quoting a Bayes accuracy of 90.0 %"
    cat "$tmp/log2"
elif grep -q 'FAIL: gauss.bayes_acc: README 90' "$tmp/log2"; then
    ok "--check rejects a wrong quote"
else
    bad "--check failed, but not on the wrong quote:"
    cat "$tmp/log2"
fi
exit $fail
