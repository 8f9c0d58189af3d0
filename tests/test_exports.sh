#!/bin/sh
# tests/test_exports.sh — the ABI is the headers: libhearsay.so exports exactly the functions
# and variables that include/hearsay/*.h declare (scripts/abi_symbols.sh lists them; the build
# writes the library's version script from the same list), both ways: no internal symbol
# exported, no declared one missing. Run by make check in the build directory (or given the
# library's path as $1; the sources from $HS_SRCDIR, the compiler from $HS_CC). Exits 77
# (skipped), saying why, when nm, a C preprocessor or the shared library is missing: it never
# passes without having looked.
so=${1:-}
if [ -z "$so" ]; then
    top=.
    if [ -n "${HS_BIN:-}" ]; then top=$(dirname "$HS_BIN"); fi
    so=$top/.libs/libhearsay.so
fi
src=${HS_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
cc=${HS_CC:-cc}
if ! command -v nm >/dev/null 2>&1; then
    echo "test_exports: skipped: nm (binutils) is not installed"
    exit 77
fi
# shellcheck disable=SC2086 # HS_CC may carry words ("ccache gcc")
if ! command -v ${cc%% *} >/dev/null 2>&1; then
    echo "test_exports: skipped: no C compiler to preprocess the headers with ($cc)"
    exit 77
fi
if [ ! -f "$so" ]; then
    echo "test_exports: skipped: $so not found (shared library not built, e.g. --disable-shared)"
    exit 77
fi
if ! syms=$(nm -D --defined-only "$so"); then
    echo "test_exports: FAIL: nm -D --defined-only $so failed"
    exit 1
fi
# shellcheck disable=SC2086
if ! declared=$(sh "$src/scripts/abi_symbols.sh" "$src/include" $cc); then
    echo "test_exports: FAIL: scripts/abi_symbols.sh could not list the declarations of $src/include/hearsay/*.h"
    exit 1
fi
# "ADDRESS TYPE NAME[@VERSION]". The only entries allowed besides the declared names are
# version nodes (type A, an upper-case name), which a named node in the version script adds.
exported=$(printf '%s\n' "$syms" | awk '
    NF >= 3 {
        name = $3; sub(/@.*/, "", name)
        if ($2 == "A" && name ~ /^[A-Z][A-Z0-9_.]*$/) next
        print name
    }' | sort -u)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hs-exports.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
printf '%s\n' "$exported" >"$tmp/exported"
printf '%s\n' "$declared" | sort -u >"$tmp/declared"
extra=$(comm -23 "$tmp/exported" "$tmp/declared")
missing=$(comm -13 "$tmp/exported" "$tmp/declared")
n=$(wc -l <"$tmp/exported")
nd=$(wc -l <"$tmp/declared")
fail=0
if [ -n "$extra" ]; then
    echo "test_exports: FAIL: $so exports $(printf '%s\n' "$extra" | wc -l) symbols no public header"
    echo "declares (make them static, or declare them in include/hearsay/*.h if they are API):"
    printf '%s\n' "$extra" | sed 's/^/  /'
    fail=1
fi
if [ -n "$missing" ]; then
    echo "test_exports: FAIL: include/hearsay/*.h declares $(printf '%s\n' "$missing" | wc -l) symbols"
    echo "$so does not export (define them, or drop the stale declarations):"
    printf '%s\n' "$missing" | sed 's/^/  /'
    fail=1
fi
[ "$fail" -eq 0 ] || exit 1
# The API itself must be there: an empty or unreadable table is no pass.
if [ "$n" -lt 100 ] || ! printf '%s\n' "$syms" | grep -q ' T hs_transport_open\(@.*\)\{0,1\}$'; then
    echo "test_exports: FAIL: $so exports only $n symbols (hs_transport_open among them?)"
    exit 1
fi
# Every exported name carries the prefix (the headers' rule, checked here once more).
bad=$(grep -v '^hs_' "$tmp/exported" || true)
if [ -n "$bad" ]; then
    echo "test_exports: FAIL: exported symbols without the hs_ prefix:"
    printf '%s\n' "$bad" | sed 's/^/  /'
    exit 1
fi
echo "test_exports: $so exports $n symbols, exactly the $nd that include/hearsay/*.h declares"
exit 0
