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
# The sources follow .clang-format (Debian 12's clang-format 14); checked in a git checkout.
cd "$OLDPWD"
if git rev-parse --git-dir >/dev/null 2>&1 && command -v clang-format >/dev/null; then
    out=$(git ls-files '*.c' '*.h' '*.cu' | xargs clang-format --dry-run 2>&1 | grep 'warning:' || true)
    if [ -n "$out" ]; then
        echo "$out" | head -20
        echo "test.sh: sources differ from .clang-format (run clang-format -i on those files)"
        exit 1
    fi
    echo "test.sh: sources follow .clang-format"
fi
