#!/usr/bin/env bash
# The main job: install what is missing, build, and run the default study — the straggler
# study with quick settings (all-reduce SGD, SGP, OSGP, D-PSGD, EASGD and LSGD on 8 workers, one straggler
# at 1x and 4x) — then print its table. Results: ${HS_OUT:-runs/stragglers} (results.csv,
# table.md, PNG plots, one run directory per algorithm and slowdown). Extra arguments go to
# experiments/stragglers.sh (e.g. --slowdowns "1 2 4 8" for the full study).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
bash scripts/build.sh
out=${HS_OUT:-runs/stragglers}
HEARSAY="$(pwd)/${HS_BUILD:-_build}/hearsay" bash experiments/stragglers.sh --quick --out "$out" "$@"
echo "study: results in $out (table.md, results.csv, *.png)"
