# shellcheck shell=sh disable=SC2034 # fail and tmp are read by the tests that source this
# tests/shlib.sh — what the shell tests share, sourced by them (`. "$(dirname "$0")/shlib.sh"`):
# ok / bad lines (bad sets $fail, which the test exits with), and hs_scratch NAME, a fresh
# directory in $tmp under $TMPDIR (or /tmp); the test removes it in its own EXIT trap.
fail=0
ok() { echo "ok: $*"; }
bad() {
    echo "FAIL: $*"
    fail=1
}
hs_scratch() {
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/hs_$1_XXXXXX") || exit 1
}
