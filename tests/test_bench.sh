#!/bin/sh
# shellcheck disable=SC2015,SC2317 # A && ok || bad: ok never fails; cleanup runs from trap
# tests/test_bench.sh — `hearsay bench gossip` and `hearsay bench allreduce` run end to end on
# small sizes (2 and 4 local ranks, 64 KiB and 1 MiB, both gossip paths, hearsay's all-reduce
# without MPI): one JSON object per (ranks, size) with the fields the docs quote, times that
# are positive numbers, and the exchange's own check (z keeps the mean of the ranks) passed;
# `hearsay bench step` with its GEMM ceiling (the model's largest product timed alone); and bad
# input (a size of 0, an unknown path) refused with a message naming it, exit 2, and an
# all-reduce path forced by HS_AR_PATH that the transport cannot give, refused by name.
# Timings are not asserted: speed is for the benchmarks themselves (docs/benchmarks.md).
bin=${HS_BIN:-./hearsay}
if [ ! -x /usr/bin/python3 ]; then
    echo "test_bench: skipped: no /usr/bin/python3 to read the JSON (apt-get install python3)"
    exit 77
fi
# shellcheck source=tests/shlib.sh
. "$(dirname "$0")/shlib.sh"
hs_scratch bench
trap 'rm -rf "$tmp"' EXIT
export HS_SHM_QUIET=1

# NAME FILE N FIELD...: FILE holds N JSON lines, each with every FIELD a positive number
check_json() {
    name=$1 file=$2 want=$3
    shift 3
    if ! /usr/bin/python3 - "$file" "$want" "$@" <<'EOF'; then
import json, math, sys
path, want, fields = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
rows = [json.loads(l) for l in open(path) if l.startswith("{")]
if len(rows) != want:
    sys.exit(f"{len(rows)} JSON lines, expected {want}")
for r in rows:
    for f in fields:
        v = r.get(f)
        if not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            sys.exit(f"{f} = {v!r} in {r}")
EOF
        bad "$name: output:"
        cat "$file"
        return
    fi
    ok "$name"
}

for path in zerocopy copy; do
    if "$bin" bench gossip --ranks 2,4 --sizes 64K,1M --reps 3 --warmup 1 --path "$path" \
        --timeout 120 --json >"$tmp/g_$path" 2>"$tmp/g_$path.err"; then
        check_json "bench gossip --path $path" "$tmp/g_$path" 4 median_s min_s floor_s floor_ratio
        grep -q "\"path\": \"$path\"" "$tmp/g_$path" && ok "gossip reports path $path" ||
            bad "gossip's JSON does not name path $path"
    else
        bad "bench gossip --path $path failed:"
        cat "$tmp/g_$path.err"
    fi
done

if "$bin" bench allreduce --ranks 2,4 --sizes 64K,1M --reps 3 --warmup 1 --no-mpi \
    --timeout 120 --json >"$tmp/a" 2>"$tmp/a.err"; then
    check_json "bench allreduce --no-mpi" "$tmp/a" 4 median_s
else
    bad "bench allreduce failed:"
    cat "$tmp/a.err"
fi

# bench step: the step beside the backend's own GEMM on its largest product (fc1 of
# mlp:20-40-10 at batch 8: M N K = 8 x 40 x 20, against fc2's 8 x 10 x 40)
if "$bin" bench step --model mlp:20-40-10 --batch 8 --reps 3 --warmup 1 --json >"$tmp/s" \
    2>"$tmp/s.err"; then
    check_json "bench step" "$tmp/s" 1 median_ms step_gemm_gflop step_tflops gemm_ms gemm_tflops \
        fraction_of_gemm
    grep -q '"largest_gemm": "fc1", "gemm_mnk": \[8, 40, 20\]' "$tmp/s" &&
        ok "bench step names the largest product" || bad "bench step's largest product: $(cat "$tmp/s")"
else
    bad "bench step failed:"
    cat "$tmp/s.err"
fi

# bad input: exit 2 and a message naming the bad part
refuse() { # NAME PATTERN ARGS...
    name=$1 pat=$2
    shift 2
    "$bin" "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ "$rc" -eq 2 ] && grep -qi -- "$pat" "$tmp/err"; then
        ok "refused: $name"
    else
        bad "$name: exit $rc (expected 2), stderr:"
        cat "$tmp/err"
    fi
}
refuse "gossip size 0" "size" bench gossip --sizes 0 --reps 1
refuse "gossip unknown path" "path" bench gossip --path nowhere --reps 1
refuse "allreduce ranks 0" "ranks" bench allreduce --ranks 0 --reps 1 --no-mpi
# a forced all-reduce path that the transport (libfabric's tcp) cannot give: the worker stops
# with a message naming the path and the transport
for p in direct mapped; do
    HS_AR_PATH=$p "$bin" bench allreduce --ranks 2 --sizes 64K --reps 1 --warmup 0 --no-mpi \
        --provider tcp >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ "$rc" -ne 0 ] && grep -q "the $p path needs a transport" "$tmp/err" &&
        grep -q "this one is tcp" "$tmp/err"; then
        ok "refused: HS_AR_PATH=$p over tcp"
    else
        bad "HS_AR_PATH=$p over tcp: exit $rc, stderr:"
        cat "$tmp/err"
    fi
done
exit $fail
