#!/bin/sh
# tests/test_exports.sh — libhearsay.so exports only hs_-prefixed symbols (the version script
# libhearsay.map). Run by make check in the build directory (or given the library's path as
# $1). Exits 77 (skipped), saying why, when nm or the shared library is missing: it never
# passes without having looked.
so=${1:-}
if [ -z "$so" ]; then
    top=.
    if [ -n "${HS_BIN:-}" ]; then top=$(dirname "$HS_BIN"); fi
    so=$top/.libs/libhearsay.so
fi
if ! command -v nm >/dev/null 2>&1; then
    echo "test_exports: skipped: nm (binutils) is not installed"
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
# "ADDRESS TYPE NAME[@VERSION]". The only entries allowed without the prefix are version
# nodes (type A, an upper-case name), which a named node in the version script would add.
report=$(printf '%s\n' "$syms" | awk '
    NF >= 3 {
        name = $3; sub(/@.*/, "", name)
        if ($2 == "A" && name ~ /^[A-Z][A-Z0-9_.]*$/) { print "allowed version node " name; next }
        if (name ~ /^hs_/) ok++; else print "BAD " $2 " " name
    }
    END { print "hs_symbols " ok + 0 }')
printf '%s\n' "$report" | grep '^allowed' || true
bad=$(printf '%s\n' "$report" | grep '^BAD ' || true)
n=$(printf '%s\n' "$report" | sed -n 's/^hs_symbols //p')
if [ -n "$bad" ]; then
    echo "test_exports: FAIL: $so exports symbols without the hs_ prefix (make them static,"
    echo "rename them hs_..., or check libhearsay.map and its -Wl,--version-script in Makefile.am):"
    printf '%s\n' "$bad" | sed 's/^BAD /  /'
    exit 1
fi
# The API itself must be there: an empty or unreadable table is no pass.
if [ "${n:-0}" -lt 100 ] || ! printf '%s\n' "$syms" | grep -q ' T hs_transport_open\(@.*\)\{0,1\}$'; then
    echo "test_exports: FAIL: $so exports only ${n:-0} hs_ symbols (hs_transport_open among them?)"
    exit 1
fi
echo "test_exports: $so exports $n symbols, all hs_-prefixed"
exit 0
