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
# hs_run_status LABEL WANT LOG TAIL CMD...: run CMD with its output in LOG. A status other than
# WANT prints a FAIL line and LOG's last TAIL lines, sets $fail and returns 1.
hs_run_status() {
    _label=$1 _want=$2 _log=$3 _tail=$4
    shift 4
    "$@" >"$_log" 2>&1
    _st=$?
    if [ "$_st" -ne "$_want" ]; then
        echo "FAIL $_label: status $_st (expected $_want)"
        tail -n "$_tail" "$_log"
        fail=1
        return 1
    fi
    return 0
}
