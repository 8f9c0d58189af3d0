#!/usr/bin/env bash
# Run the libFuzzer harnesses (tests/fuzz/fuzz_NAME, built by `make fuzz`) for SECONDS each.
#
#   scripts/fuzz.sh [SECONDS] [NAME...]     default: 10 s each, every harness
#
# Each harness starts from its committed seeds (tests/fuzz/corpus/NAME, never written) and a
# work corpus of the inputs it found (BUILD/tests/fuzz/out/NAME/corpus, kept between runs so a
# long run continues where the last one stopped). A crash, sanitizer report, leak, timeout
# (an input running over HS_FUZZ_TIMEOUT s, default 25) or out-of-memory (over 2 GiB) fails the
# script: it prints the report's last lines, the reproducer's path and how to replay it.
# The harnesses run one after the other, each on one core.
# Environment: HS_BUILD (the build directory, default _build), HS_FUZZ_TIMEOUT,
# HS_FUZZ_ARGS (more libFuzzer flags, e.g. "-jobs=2 -workers=2" or "-dict=FILE").
# Without clang's fuzzer runtime (configure says why) it prints the reason and exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$(pwd)
secs=${1:-10}
shift || true
build=${HS_BUILD:-_build}
case $build in /*) ;; *) build=$src/$build ;; esac
if [ ! -f "$build/Makefile" ]; then
    echo "fuzz.sh: no build in $build (run scripts/build.sh first)" >&2
    exit 1
fi
out=$(make -s -C "$build" fuzz 2>&1) || {
    echo "$out"
    echo "fuzz.sh: make fuzz failed" >&2
    exit 1
}
if [ -n "$out" ]; then echo "$out"; fi
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
    read -r -a names <<<"$(make -s -C "$build" print-fuzz-targets)"
fi
if [ ! -x "$build/tests/fuzz/fuzz_${names[0]}" ]; then
    echo "fuzz.sh: SKIP: the fuzz harnesses are not built (see 'make fuzz' above)"
    exit 0
fi

failed=0
total_runs=0
printf '%-12s %10s %8s %7s  %s\n' target execs exec/s corpus result
for t in "${names[@]}"; do
    bin=$build/tests/fuzz/fuzz_$t
    seeds=$src/tests/fuzz/corpus/$t
    dir=$build/tests/fuzz/out/$t
    if [ ! -x "$bin" ] || [ ! -d "$seeds" ]; then
        echo "fuzz.sh: no harness or no seeds for '$t'" >&2
        failed=1
        continue
    fi
    mkdir -p "$dir/corpus"
    rm -f "$dir"/crash-* "$dir"/leak-* "$dir"/timeout-* "$dir"/oom-* "$dir"/slow-unit-*
    rc=0
    # shellcheck disable=SC2086
    # The outer timeout bounds loading the corpus too (libFuzzer's clock starts after it).
    (cd "$dir" && timeout -k 10 $((2 * secs + 120)) "$bin" -max_total_time="$secs" -timeout="${HS_FUZZ_TIMEOUT:-25}" \
        -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$dir/" \
        ${HS_FUZZ_ARGS:-} "$dir/corpus" "$seeds") >"$dir/log" 2>&1 || rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -1)
    speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$dir/log" | tail -1)
    corp=$(find "$dir/corpus" -type f | wc -l)
    total_runs=$((total_runs + ${execs:-0}))
    repro=$(find "$dir" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o \
        -name 'timeout-*' -o -name 'oom-*' \) | head -1)
    if [ "$rc" -eq 0 ] && [ -z "$repro" ]; then
        printf '%-12s %10s %8s %7s  %s\n' "$t" "${execs:-?}" "${speed:-?}" "$corp" ok
        continue
    fi
    failed=1
    printf '%-12s %10s %8s %7s  %s\n' "$t" "${execs:-?}" "${speed:-?}" "$corp" "FAILED (exit $rc)"
    echo "==== $t: the end of $dir/log"
    grep -v -e '^#[0-9]' -e '^INFO:' "$dir/log" | tail -n 40
    if [ -n "$repro" ]; then
        echo "==== $t: reproducer: $repro"
        echo "     replay: $bin $repro"
        echo "     bytes:  $(od -An -tx1 -v "$repro" | tr -d ' \n' | head -c 400)"
    fi
done
echo "fuzz.sh: ${#names[@]} harnesses, ${secs} s each, $total_runs inputs in all"
if [ "$failed" -ne 0 ]; then
    echo "fuzz.sh: FAILED (see above)"
    exit 1
fi
