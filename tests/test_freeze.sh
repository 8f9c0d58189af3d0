#!/bin/sh
# tests/test_freeze.sh — issue 28 item 2 and 3, bounded for make check: a rank frozen
# (--straggler freeze = SIGSTOP) for 1 s (< --fail-timeout 2), 6 s (>) and for good under
# sgp, osgp and allreduce; each run ends within its limit, never NaN, a failure names rank 2,
# and the push-sum mass (survivors + lost + unreported) is N within 1e-6 (sgp, osgp)
# (experiments/freeze_matrix.sh; its long suite: every algorithm, 10 s / 60 s / forever).
bin=${HS_BIN:-./hearsay}
[ -x /usr/bin/python3 ] || { echo "test_freeze: /usr/bin/python3 missing: skipped"; exit 77; }
FREEZE_QUICK=1 FREEZE_ALGOS=${FREEZE_ALGOS:-"sgp osgp allreduce"} \
    exec "$(dirname "$0")/../experiments/freeze_matrix.sh" "$bin"
