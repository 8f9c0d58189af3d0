#!/bin/sh
# scripts/abi_symbols.sh — the symbols the public headers declare: every function and variable
# with external linkage that include/hearsay/*.h declares (static and inline definitions,
# typedefs, struct/enum/union bodies and macros are not symbols). libhearsay.so exports
# exactly these (the build writes its version script from this list: Makefile.am) and
# tests/test_exports.sh compares the list with `nm -D --defined-only` of the library.
#
#   abi_symbols.sh [--map] INCLUDE_DIR CC [CFLAGS...]
#
# prints the names one a line, sorted; with --map, a linker version script that exports them
# and nothing else. The headers are run through the C preprocessor (CC -E) first, so comments,
# conditionals and macros are what the compiler sees; the line markers it writes tell which
# file a declaration came from: only include/hearsay/*.h's count, not the system headers they
# include.
set -eu
map=0
if [ "${1:-}" = --map ]; then
    map=1
    shift
fi
if [ $# -lt 2 ]; then
    echo "usage: abi_symbols.sh [--map] INCLUDE_DIR CC [CFLAGS...]" >&2
    exit 2
fi
inc=$(cd "$1" && pwd)
shift
set -- "$@" -E -I"$inc" -D_GNU_SOURCE -x c -
n=0
tu=""
for h in "$inc"/hearsay/*.h; do
    [ -f "$h" ] || continue
    n=$((n + 1))
    tu="$tu#include \"$h\"
"
done
if [ "$n" -eq 0 ]; then
    echo "abi_symbols: no headers in $inc/hearsay" >&2
    exit 1
fi
if ! pp=$(printf '%s' "$tu" | "$@"); then
    echo "abi_symbols: the preprocessor failed on $inc/hearsay/*.h ($*)" >&2
    exit 1
fi
syms=$(printf '%s\n' "$pp" | awk -v dir="$inc/hearsay/" '
    # Line markers: # LINE "FILE" FLAGS. Keep the text of the public headers only.
    /^# [0-9]+ "/ {
        f = $3; gsub(/"/, "", f)
        ours = (index(f, dir) == 1 && f ~ /\.h$/ && substr(f, length(dir) + 1) !~ /\//)
        next
    }
    /^#/ { next }
    ours { text = text " " $0 }
    function trim(s) { gsub(/^[ \t]+|[ \t]+$/, "", s); return s }
    # One top-level declaration (its braced bodies already dropped): print its name when it
    # declares a function or a variable with external linkage.
    function decl(s,    t, m, name) {
        s = trim(s)
        if (s == "") return
        t = " " s " "
        if (t ~ /[ (*]typedef[ ]/ || t ~ /^ (static|inline|_Static_assert|__inline)[ (]/ ||
            t ~ /[ ]static[ ]/ || t ~ /[ ]inline[ ]/ || t ~ /[ ]__inline__?[ ]/) return
        if (s ~ /^(struct|union|enum)[ ]+[A-Za-z_0-9]*[ ]*$/ || s ~ /^(struct|union|enum)[ ]*$/) return
        p = index(s, "(")
        if (p > 0) {
            head = substr(s, 1, p - 1)
            rest = substr(s, p + 1)
            if (rest ~ /^[ ]*\*/) {          # a pointer to a function: (*name)(...)
                sub(/^[ ]*\*[ ]*/, "", rest)
                if (match(rest, /^[A-Za-z_][A-Za-z_0-9]*/)) print substr(rest, 1, RLENGTH)
                return
            }
            if (match(head, /[A-Za-z_][A-Za-z_0-9]*[ ]*$/)) print trim(substr(head, RSTART))
            return
        }
        sub(/=.*/, "", s)
        gsub(/\[[^]]*\]/, "", s)
        if (match(s, /[A-Za-z_][A-Za-z_0-9]*[ ]*$/)) print trim(substr(s, RSTART))
    }
    END {
        # Drop __attribute__((...)) and __asm__(...), balanced parentheses included.
        out = ""
        n = length(text)
        i = 1
        while (i <= n) {
            if (substr(text, i, 13) == "__attribute__" || substr(text, i, 7) == "__asm__") {
                i += (substr(text, i, 2) == "__" && substr(text, i, 7) == "__asm__") ? 7 : 13
                while (i <= n && substr(text, i, 1) ~ /[ \t]/) i++
                if (substr(text, i, 1) == "(") {
                    d = 0
                    do {
                        c = substr(text, i, 1)
                        if (c == "(") d++
                        else if (c == ")") d--
                        i++
                    } while (i <= n && d > 0)
                }
                continue
            }
            out = out substr(text, i, 1)
            i++
        }
        gsub(/[ \t]+/, " ", out)
        # Split at the top level: ";" ends a declaration; a braced body is dropped, and a
        # function definition ("...) { ... }", a static inline one) ends at its closing brace.
        stmt = ""
        braces = 0
        n = length(out)
        for (i = 1; i <= n; i++) {
            c = substr(out, i, 1)
            if (braces > 0) {
                if (c == "{") braces++
                else if (c == "}") {
                    braces--
                    if (braces == 0 && isfn) { stmt = ""; isfn = 0 }
                }
                continue
            }
            if (c == "{") {
                braces = 1
                isfn = (trim(stmt) ~ /\)$/)
                continue
            }
            if (c == ";") { decl(stmt); stmt = ""; continue }
            stmt = stmt c
        }
    }' | sort -u)
if [ -z "$syms" ]; then
    echo "abi_symbols: found no declarations in $inc/hearsay/*.h" >&2
    exit 1
fi
if [ "$map" -eq 0 ]; then
    printf '%s\n' "$syms"
    exit 0
fi
echo "/* Written by scripts/abi_symbols.sh from include/hearsay/*.h: do not edit. */"
echo "{"
echo "  global:"
printf '%s\n' "$syms" | sed 's/^/    /; s/$/;/'
echo "  local:"
echo "    *;"
echo "};"
