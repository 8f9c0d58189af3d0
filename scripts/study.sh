#!/usr/bin/env bash
# The main job: install what is missing, build, and run the default study.
# For now: one worker trains mlp:784-1024-1024-10 on the synthetic Gaussian-mixture task
# and prints its result (test accuracy beside the task's Bayes accuracy).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
bash scripts/build.sh
out=${HS_OUT:-runs/default}
"${HS_BUILD:-_build}/hearsay" train --out "$out" "$@"
echo "study: results in $out (summary.json, train.csv)"
