#!/bin/sh
# experiments/rejoin.sh — issue 28 item 9: a crashed rank's replacement joins the running job
# (virtual time, hearsay sim). For sgp and adpsgd, N ranks, a few seeds, four cases:
#   none      no crash (the uninterrupted run)
#   crash     rank R crashes at a quarter of the run, no replacement (the survivors finish)
#   rejoin=D  the same crash, and a replacement joins D later (for each D in REJOIN_DELAYS)
# One row per run: the averaged model's final test loss and accuracy, and for a replacement
# how long the rank was down (crash to its first step, DIR/rank-R-rejoin.json), the iteration it
# joined at, its donor; sgp: the push-sum mass sum + lost (= N). Then the medians per case
# with the range over the seeds.
#   experiments/rejoin.sh [HEARSAY]
# Env: REJOIN_N (8), REJOIN_SEEDS ("1 2 3"), REJOIN_DELAYS ("1s 5s"), REJOIN_ALGOS
# ("sgp adpsgd"), REJOIN_OUT (keep the run directories there), REJOIN_FLAGS (the model, data
# and schedule; default below).
# REJOIN_REAL=1: real processes instead (`hearsay run -n N -- hearsay train`, hsshm on this
# host; the clock is the wall clock), every rank paced by REJOIN_PACE (default
# pause:all:p=1:fixed=5ms, in every case alike) so that the run outlasts the outage, and
# --keep-going so that the survivors of a crash without a replacement finish (the job's status
# is then the crash's, 70).
bin=${1:-${HS_BIN:-./hearsay}}
n=${REJOIN_N:-8}
seeds=${REJOIN_SEEDS:-"1 2 3"}
delays=${REJOIN_DELAYS:-"1s 5s"}
algos=${REJOIN_ALGOS:-"sgp adpsgd"}
flags=${REJOIN_FLAGS:-"--model mlp:32-64-10 --data gauss:dim=32,classes=10,train=32000,test=2000 --batch 32 --epochs 8 --lr 0.05 --threads 1 --quiet"}
out=${REJOIN_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/hs-rejoin.XXXXXX")}
mkdir -p "$out"
victim=$((n / 2 - 1))
clock="virtual (hearsay sim)"
pace=""
if [ "${REJOIN_REAL:-0}" = 1 ]; then
    clock="wall (real processes: hearsay run, hsshm)"
    pace="--straggler ${REJOIN_PACE:-pause:all:p=1:fixed=5ms}"
fi
# a quarter of the run: iterations per epoch x epochs / 4
train=$(echo "$flags" | sed -n 's/.*train=\([0-9]*\).*/\1/p')
batch=$(echo "$flags" | sed -n 's/.*--batch \([0-9]*\).*/\1/p')
epochs=$(echo "$flags" | sed -n 's/.*--epochs \([0-9]*\).*/\1/p')
at=$((train / n / batch * epochs / 4))
rows=$out/rows.tsv
: >"$rows"
for algo in $algos; do
    for seed in $seeds; do
        for c in none crash $delays; do
            d=$out/$algo-$c-$seed
            case $c in
            none) s="" ;;
            crash) s="--straggler crash:$victim:iter=$at" ;;
            *) s="--straggler crash:$victim:iter=$at:rejoin=$c" ;;
            esac
            if [ -n "$pace" ]; then
                # shellcheck disable=SC2086
                timeout -k 5 600 "$bin" run -n "$n" --keep-going -- "$bin" train --algo "$algo" $flags \
                    --seed "$seed" $pace $s --out "$d" >"$d.log" 2>&1
            else
                # shellcheck disable=SC2086
                "$bin" sim -n "$n" --algo "$algo" $flags --seed "$seed" $s --out "$d" >"$d.log" 2>&1
            fi
            st=$?
            /usr/bin/python3 - "$d" "$algo" "$c" "$seed" "$st" "$victim" >>"$rows" <<'PY'
import json, os, sys
d, algo, case, seed, st, v = sys.argv[1:7]
try:
    s = json.load(open(d + "/summary.json"))
except OSError:
    print("\t".join([algo, case, seed, st] + ["-"] * 6))
    sys.exit(0)
j = {}
if os.path.exists("%s/rank-%s-rejoin.json" % (d, v)):
    j = json.load(open("%s/rank-%s-rejoin.json" % (d, v)))
mass = s.get("ps_weight_sum", 0) + s.get("ps_weight_lost", 0) + s.get("ps_weight_unreported", 0)
print("\t".join(str(x) for x in [algo, case, seed, st, "%.5f" % s["final_test_loss"],
      "%.4f" % s["final_test_acc"], "%.3f" % j["down_s"] if j else "-",
      j.get("iteration", "-"), j.get("donor", "-"), "%.9f" % mass if algo == "sgp" else "-"]))
PY
        done
    done
done
printf 'clock: %s; %s ranks; rank %s crashes at iteration %s; model: %s %s\n' \
    "$clock" "$n" "$victim" "$at" "$flags" "$pace"
printf '%-7s %-8s %4s %6s %9s %7s %7s %6s %5s %12s\n' algo case seed status loss acc down_s \
    joined donor mass
awk -F'\t' '{printf "%-7s %-8s %4s %6s %9s %7s %7s %6s %5s %12s\n", $1,$2,$3,$4,$5,$6,$7,$8,$9,$10}' "$rows"
echo "medians over the seeds (range): the averaged model's final test loss and accuracy"
/usr/bin/python3 - "$rows" <<'PY'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
cases = []
for r in rows:
    if (r[0], r[1]) not in cases:
        cases.append((r[0], r[1]))
for algo, case in cases:
    rs = [r for r in rows if r[0] == algo and r[1] == case and r[4] != "-"]
    if not rs:
        print("%-7s %-8s no result" % (algo, case))
        continue
    loss = [float(r[4]) for r in rs]
    acc = [100 * float(r[5]) for r in rs]
    print("%-7s %-8s loss %.5f (%.5f-%.5f)  accuracy %.2f %% (%.2f-%.2f)  runs %d" %
          (algo, case, statistics.median(loss), min(loss), max(loss), statistics.median(acc),
           min(acc), max(acc), len(rs)))
PY
echo "runs: $out"
