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
# (default 10; 0 skips fuzzing).
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
ok=1
if ! make check -j"${HS_CHECK_JOBS:-2}"; then
    ok=0
    # Show the logs of the failing suites before failing.
    for f in tests/*.log; do
        if grep -qE '^:test-result: (FAIL|ERROR)' "${f%.log}.trs" 2>/dev/null; then echo "==== $f"; tail -n 60 "$f"; fi
    done
fi
cd "$src"
if [ "$sanitize" = 1 ]; then
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
if [ "$ok" = 0 ]; then exit 1; fi
# The sources follow .clang-format (Debian 12's clang-format 14); checked in a git checkout.
if git rev-parse --git-dir >/dev/null 2>&1 && command -v clang-format >/dev/null; then
    out=$(git ls-files '*.c' '*.h' '*.cu' | xargs clang-format --dry-run 2>&1 | grep 'warning:' || true)
    if [ -n "$out" ]; then
        echo "$out" | head -20
        echo "test.sh: sources differ from .clang-format (run clang-format -i on those files)"
        exit 1
    fi
    echo "test.sh: sources follow .clang-format"
fi
# A short run of every fuzz harness; scripts/fuzz.sh skips (with the reason) without clang's
# fuzzer runtime, and fails on a crash, printing the reproducer.
if [ "${HS_FUZZ_SECONDS:-10}" != 0 ]; then
    bash scripts/fuzz.sh "${HS_FUZZ_SECONDS:-10}"
else
    echo "test.sh: SKIP: fuzzing (HS_FUZZ_SECONDS=0)"
fi
