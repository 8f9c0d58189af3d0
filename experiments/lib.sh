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

# The launcher of one run: `hearsay run -n N -- hearsay train` for real, or, in virtual time,
# `hearsay sim -n N --sim-compute SPEC` (sets HS_LAUNCH). Call after the flags are parsed.
# --sim-compute bench is measured once here, for every run of the study (each run measuring its
# own would give each its own step time): `hearsay bench step` on MODEL at BATCH, 1 thread.
hs_sim_compute() { # BIN SPEC MODEL BATCH
    if [ "$2" != bench ]; then echo "$2"; return; fi
    local ms
    ms=$("$1" bench step --model "$3" --batch "$4" --threads 1 --reps 30 2>/dev/null |
        awk '{for (i = 1; i < NF; i++) if ($i == "median") print $(i + 1)}' | head -n 1)
    [ -n "$ms" ] || hs_die "hearsay bench step --model $3 --batch $4 failed"
    echo "fixed:$ms"
}

hs_launcher() { # BIN SIM WORKERS SIMCOMPUTE
    if [ "$2" = 1 ]; then
        HS_LAUNCH=("$1" sim -n "$3" --sim-compute "$4")
    else
        HS_LAUNCH=("$1" run --keep-going -n "$3" -- hearsay train)
    fi
}

hs_die() {
    echo "error: $*" >&2
    exit 2
}
