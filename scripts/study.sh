#!/usr/bin/env bash
# The main job: install what is missing, build, and run the default study — the straggler
# study with quick settings (all-reduce SGD, local SGD, SGP and asynchronous SGP, OSGP, D-PSGD,
# AD-PSGD, EASGD and leader-SGD; no straggler, one at 4x, transient pauses everywhere):
#   1. in virtual time: 16 simulated workers, one per host behind 1 Gbit NICs, label-skewed
#      (Dirichlet 0.1) shards, 3 seeds: every cell a mean with its 95 % interval, verdicts only
#      where the intervals decide — the result to quote;
#   2. for real: 8 worker processes on this machine, one seed (they share its cores: these are
#      this machine's times, not a cluster's; no interval, no verdict).
# Results: ${HS_OUT:-runs/stragglers}-sim and ${HS_OUT:-runs/stragglers} (results.csv,
# table.md, PNG plots, OUT/SCENARIO/ALGO-sSEED per run). Extra arguments go to both runs of
# experiments/stragglers.sh (e.g. --slowdowns "1 2 4 8"); HS_SIM_SEEDS sets the seeds of part 1.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
bash scripts/build.sh
out=${HS_OUT:-runs/stragglers}
echo "== 1. in virtual time: 16 simulated workers, ${HS_SIM_SEEDS:-3} seeds (hearsay sim)"
HEARSAY="$(pwd)/${HS_BUILD:-_build}/hearsay" bash experiments/stragglers.sh --quick --sim \
    --seeds "${HS_SIM_SEEDS:-3}" --out "$out-sim" "$@"
echo
echo "== 2. for real: 8 worker processes on this machine (they share its cores), one seed"
HEARSAY="$(pwd)/${HS_BUILD:-_build}/hearsay" bash experiments/stragglers.sh --quick --out "$out" "$@"
echo
echo "study: results in $out-sim (virtual time, the one to quote) and $out (real processes):"
echo "table.md, results.csv, *.png each; hearsay report DIR redraws either"
