#!/usr/bin/env bash
# The main job: install what is missing, build, and run the default study — the straggler
# study with quick settings (all-reduce SGD, local SGD, SGP and asynchronous SGP, OSGP, D-PSGD,
# AD-PSGD, EASGD and LSGD on 8 workers; no straggler, one at 4x, transient pauses everywhere), for
# real and in virtual time (16 simulated workers) — then print both tables. Results:
# ${HS_OUT:-runs/stragglers} (results.csv, table.md, PNG plots, one run directory per algorithm
# and scenario). Extra arguments go to experiments/stragglers.sh (e.g. --slowdowns "1 2 4 8").
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
bash scripts/build.sh
out=${HS_OUT:-runs/stragglers}
echo "== 1. for real: 8 worker processes on this machine (they share its cores)"
HEARSAY="$(pwd)/${HS_BUILD:-_build}/hearsay" bash experiments/stragglers.sh --quick --out "$out" "$@"
echo
echo "== 2. in virtual time: 16 simulated workers (hearsay sim; step time measured here once)"
HEARSAY="$(pwd)/${HS_BUILD:-_build}/hearsay" bash experiments/stragglers.sh --quick --sim \
    --out "$out-sim" "$@"
echo "study: results in $out (real processes) and $out-sim (virtual time): table.md,"
echo "results.csv, *.png each"
