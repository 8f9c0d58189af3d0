#!/usr/bin/env bash
# Install what is missing, build, and run the whole test suite (make check).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
bash scripts/build.sh
cd "${HS_BUILD:-_build}"
if ! make check -j"${HS_CHECK_JOBS:-2}"; then
    # Show the logs of the failing suites before failing.
    for f in tests/*.log; do
        if grep -qE '^(FAIL|ERROR)' "${f%.log}.trs" 2>/dev/null; then echo "==== $f"; tail -n 60 "$f"; fi
    done
    exit 1
fi
