#!/usr/bin/env bash
# Run the test suite (make check, as scripts/test.sh does) beside a CPU-bound load, several
# times: the suite must hold on a loaded machine (issue 30; docs/testing.md, "Under load").
#
#   scripts/test-load.sh [--procs N] [--rounds K] [--sanitize]
#
# --procs N   CPU-bound processes beside the suite (default 8): each a shell busy loop at the
#             suite's own priority, started before the build is checked and killed on exit
# --rounds K  times the suite runs (default 3); every round runs, and the script fails when
#             one of them failed
# --sanitize  the sanitizer build (scripts/test.sh --sanitize)
#
# The formatting check and the fuzzing do not depend on load: they are skipped here
# (HS_FUZZ_SECONDS=0 still runs the formatting check). HS_TESTS limits the suites as for
# scripts/test.sh. Each round's log is kept in a temporary directory that the summary names.
set -euo pipefail
cd "$(dirname "$0")/.."
procs=8
rounds=3
sanitize=()
while [ $# -gt 0 ]; do
    case "$1" in
    --procs)
        procs=${2:?--procs needs a count}
        shift 2
        ;;
    --rounds)
        rounds=${2:?--rounds needs a count}
        shift 2
        ;;
    --sanitize)
        sanitize=(--sanitize)
        shift
        ;;
    -h | --help)
        sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    *)
        echo "test-load.sh: unknown argument '$1' (see --help)" >&2
        exit 2
        ;;
    esac
done
for v in "$procs" "$rounds"; do
    if ! [[ "$v" =~ ^[0-9]+$ ]] || [ "$v" -gt 256 ]; then
        echo "test-load.sh: '$v' is not a count from 0 to 256" >&2
        exit 2
    fi
done
[ "$rounds" -ge 1 ] || {
    echo "test-load.sh: --rounds must be at least 1" >&2
    exit 2
}

logs=$(mktemp -d "${TMPDIR:-/tmp}/hs-test-load.XXXXXX")
pids=()
stop_load() {
    if [ ${#pids[@]} -gt 0 ]; then
        kill "${pids[@]}" 2>/dev/null || true
        wait "${pids[@]}" 2>/dev/null || true
    fi
    pids=()
}
trap stop_load EXIT
trap 'stop_load; exit 130' INT TERM

# Build (and install what is missing) before the load starts: the load is for the tests.
HS_FUZZ_SECONDS=0 HS_TESTS=tests/test_util bash scripts/test.sh "${sanitize[@]}" >"$logs/build.log" 2>&1 || {
    echo "test-load.sh: the build or tests/test_util failed unloaded; see $logs/build.log" >&2
    tail -20 "$logs/build.log" >&2
    exit 1
}

for _ in $(seq "$procs"); do
    bash -c 'while :; do :; done' &
    pids+=($!)
done
echo "test-load.sh: $procs CPU-bound processes beside the suite on $(nproc) CPUs; logs in $logs"

passed=0
results=()
for k in $(seq "$rounds"); do
    t0=$(date +%s)
    if HS_FUZZ_SECONDS=0 bash scripts/test.sh "${sanitize[@]}" >"$logs/round-$k.log" 2>&1; then
        r=passed
        passed=$((passed + 1))
    else
        r=FAILED
    fi
    t=$(($(date +%s) - t0))
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    fails=$(grep -E '^(\[[^]]*\] )?(FAIL|ERROR|XPASS):' "$logs/round-$k.log" | sed 's/^\[[^]]*\] //' | tr '\n' ' ' || true)
    results+=("round $k $r in ${t}s (load average $load)${fails:+: $fails}")
    echo "test-load.sh: ${results[-1]}"
done
stop_load
echo "test-load.sh: $passed of $rounds rounds passed beside $procs CPU-bound processes"
[ "$passed" = "$rounds" ]
