#!/usr/bin/env bash
# Install what is missing, build, and run the whole test suite (make check), check the
# formatting, and fuzz every parser and decoder briefly (scripts/fuzz.sh). docs/testing.md.
#
#   scripts/test.sh             the README's test command, CI's first step
#   scripts/test.sh --sanitize  make check in a second build (${HS_ASAN_BUILD:-_build-asan})
#                               with AddressSanitizer, LeakSanitizer and UndefinedBehaviorSanitizer,
#                               CI's second step
#
# HS_CHECK_JOBS: make check -j (default 2). HS_FUZZ_SECONDS: seconds per fuzz harness
# (default 10; 0 skips fuzzing). HS_TESTS="tests/test_a tests/b.sh": only those suites.
# make check prints each suite's result as "[k/K elapsed] PASS: ..."; a failed make check does
# not stop the formatting check and the fuzzing: the script ends with all three results.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$(pwd)
sanitize=0
case "${1:-}" in
"") ;;
--sanitize) sanitize=1 ;;
*)
    echo "usage: scripts/test.sh [--sanitize]" >&2
    exit 2
    ;;
esac
bash scripts/deps.sh
if [ "$sanitize" = 1 ]; then
    # A build of its own: -O1 keeps the stacks readable; no CUDA (nothing to sanitize on the
    # host side that the CPU build does not cover) and no fuzz harnesses (the first step runs
    # them). A report ends the process with status 1, which fails its test: UBSan halts at the
    # first error, LeakSanitizer reports at exit with tests/lsan.supp (third-party leaks only).
    export HS_BUILD=${HS_ASAN_BUILD:-_build-asan}
    export CFLAGS="-g -O1 -fsanitize=address,undefined -fno-omit-frame-pointer"
    export LDFLAGS="-fsanitize=address,undefined"
    export HS_CONFIGURE_FLAGS="--without-cuda --disable-fuzz ${HS_CONFIGURE_FLAGS:-}"
    # AddressSanitizer and LeakSanitizer reports go to files of their own in $reports
    # (log_path), so that a process whose exit status no test looks at (a rank ended by its
    # launcher, a command expected to fail) cannot hide one. (gcc's runtime prints UBSan's reports
    # on stderr whatever log_path says; they end the process with status 1.)
    # fast_unwind_on_malloc=0: full allocation stacks, so that Open MPI's leaks (from components
    # it has unloaded by the time of the report) still match tests/lsan.supp.
    reports=$src/$HS_BUILD/sanitizer-reports
    rm -rf "$reports"
    mkdir -p "$reports"
    export ASAN_OPTIONS="detect_leaks=1:fast_unwind_on_malloc=0:log_path=$reports/asan:${ASAN_OPTIONS:-}"
    export LSAN_OPTIONS="suppressions=$src/tests/lsan.supp:print_suppressions=0:${LSAN_OPTIONS:-}"
    export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:${UBSAN_OPTIONS:-}"
    # The sanitizers slow a test 2-4x: Check's per-case timeouts (tcase_set_timeout,
    # CK_DEFAULT_TIMEOUT) stretch by this factor; the jobs' own bounded waits are unchanged.
    export CK_TIMEOUT_MULTIPLIER=${CK_TIMEOUT_MULTIPLIER:-3}
fi
bash scripts/build.sh
cd "${HS_BUILD:-_build}"
# make check's lines "PASS: tests/x" become "[k/K 1m05s] PASS: tests/x" (suites done of all,
# time since the start); its exit status is kept (pipefail).
if [ -n "${HS_TESTS:-}" ]; then
    total=$(wc -w <<<"$HS_TESTS")
    set -- TESTS="$HS_TESTS"
else
    total=$(make -s print-tests | wc -w)
    set --
fi
t0=$(date +%s)
count_suites() {
    awk -v total="$total" -v t0="$t0" '
        /^(PASS|FAIL|SKIP|XFAIL|XPASS|ERROR): / {
            k++
            el = systime() - t0
            printf "[%d/%d %dm%02ds] %s\n", k, total, el / 60, el % 60, $0
            fflush()
            next
        }
        { print; fflush() }'
}
check=passed
if ! make check -j"${HS_CHECK_JOBS:-2}" "$@" 2>&1 | count_suites; then
    check=FAILED
    # Show the logs of the failing suites before going on.
    for f in tests/*.log; do
        if grep -qE '^:test-result: (FAIL|ERROR)' "${f%.log}.trs" 2>/dev/null; then echo "==== $f"; tail -n 60 "$f"; fi
    done
fi
cd "$src"
if [ "$sanitize" = 1 ]; then
    ok=1
    [ "$check" = passed ] || ok=0
    for f in "$reports"/*; do
        [ -e "$f" ] || continue
        ok=0
        echo "==== sanitizer report $f"
        head -n 80 "$f"
    done
    if [ "$ok" = 1 ]; then
        echo "test.sh: make check passed under AddressSanitizer and UndefinedBehaviorSanitizer"
        exit 0
    fi
    echo "test.sh: the sanitizer pass failed (reports above, all in $reports)"
    exit 1
fi
# A failed make check does not hide the other two (issue 30): the formatting and the fuzzing
# still run, and the script fails at the end with all three results.
# The sources follow .clang-format (Debian 12's clang-format 14); checked in a git checkout.
format="skipped (no git checkout or no clang-format)"
if git rev-parse --git-dir >/dev/null 2>&1 && command -v clang-format >/dev/null; then
    out=$(git ls-files '*.c' '*.h' '*.cu' | xargs clang-format --dry-run 2>&1 | grep 'warning:' || true)
    if [ -n "$out" ]; then
        echo "$out" | head -20
        echo "test.sh: sources differ from .clang-format (run clang-format -i on those files)"
        format=FAILED
    else
        echo "test.sh: sources follow .clang-format"
        format=passed
    fi
fi
# A short run of every fuzz harness; scripts/fuzz.sh skips (with the reason) without clang's
# fuzzer runtime, and fails on a crash, printing the reproducer.
if [ "${HS_FUZZ_SECONDS:-10}" != 0 ]; then
    if bash scripts/fuzz.sh "${HS_FUZZ_SECONDS:-10}"; then fuzz=passed; else fuzz=FAILED; fi
else
    echo "test.sh: SKIP: fuzzing (HS_FUZZ_SECONDS=0)"
    fuzz="skipped (HS_FUZZ_SECONDS=0)"
fi
echo "test.sh: make check $check ($total suites), formatting $format, fuzzing $fuzz"
case "$check $format $fuzz" in
*FAILED*) exit 1 ;;
esac
