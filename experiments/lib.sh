# experiments/lib.sh — shared by the study scripts: find the hearsay binary, parse common flags.
# Sourced, not run.

# The hearsay command: $HEARSAY, else the build tree's, else PATH.
hs_find_bin() {
    local here
    here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
    if [ -n "${HEARSAY:-}" ]; then echo "$HEARSAY"; return; fi
    for b in "$here/${HS_BUILD:-_build}/hearsay" "$here/_build/hearsay" "$here/build/hearsay"; do
        if [ -x "$b" ]; then echo "$b"; return; fi
    done
    if command -v hearsay >/dev/null; then command -v hearsay; return; fi
    echo "error: no hearsay binary found: build first (bash scripts/build.sh) or set HEARSAY" >&2
    return 1
}

# Python with numpy/matplotlib: Debian's, not the one first on PATH.
HS_PY=${HS_PY:-/usr/bin/python3}

hs_die() {
    echo "error: $*" >&2
    exit 2
}
