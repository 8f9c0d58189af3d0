#!/bin/sh
# shellcheck disable=SC2015,SC2317 # A && ok || bad: ok never fails; cleanup runs from trap
# tests/test_start_signals.sh — SIGTERM during a worker's start-up (issue 28 item 7). A
# library's constructor (libinfinipath's) installs SIGINT/SIGTERM handlers that call exit()
# and write *.btr files; a stop that came while the other libraries still loaded crashed
# inside them. tests/fake_ipath.c, preloaded, does the same in hearsay workers and then takes
# 1.5 s to "load". hearsay run starts hearsay workers with the stop signals blocked and their
# main unblocks them after restoring the defaults: SIGTERM to the launcher in the middle of
# the loading must end every rank by the signal (the launcher exits 143), leave no *.btr
# file, and take no longer than the loading. Skipped (77) without a C compiler.
bin=${HS_BIN:-./hearsay}
src=${srcdir:-$(dirname "$0")/..}
# shellcheck source=tests/shlib.sh
. "$(dirname "$0")/shlib.sh"
cc=${CC:-cc}
if ! command -v "$cc" >/dev/null 2>&1; then
    echo "test_start_signals: skipped: no C compiler ($cc) to build tests/fake_ipath.c"
    exit 77
fi
hs_scratch startsig
job=
trap '[ -n "$job" ] && kill -KILL "$job" 2>/dev/null; rm -rf "$tmp"' EXIT
so=$tmp/fake_ipath.so
if ! "$cc" -shared -fPIC -o "$so" "$src/tests/fake_ipath.c" 2>"$tmp/cc.log"; then
    echo "test_start_signals: skipped: cannot build tests/fake_ipath.c: $(cat "$tmp/cc.log")"
    exit 77
fi
case $bin in /*) ;; *) bin=$(pwd)/$bin ;; esac
mkdir "$tmp/wd"
for try in 1 2; do
    rm -f "$tmp/wd"/*
    # (in the sanitizer build the preloaded library comes before AddressSanitizer's runtime,
    # which it then refuses unless told not to check the order: fake_ipath.c allocates nothing)
    (cd "$tmp/wd" && ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
        LD_PRELOAD=$so exec "$bin" run -n 2 -- "$bin" train --algo sgp \
        --model mlp:16-32-4 --data gauss:dim=16,classes=4,train=2000,test=200,sep=5 \
        --epochs 1 --batch 32 --progress 0 >"$tmp/out" 2>"$tmp/err") &
    job=$!
    i=0
    while [ $i -lt 200 ] && [ "$(ls "$tmp/wd" | grep -c '^loading-')" -lt 2 ]; do
        sleep 0.02
        i=$((i + 1))
    done
    [ "$(ls "$tmp/wd" | grep -c '^loading-')" -ge 2 ] ||
        bad "try $try: the workers never reached the fake library's constructor"
    t0=$(date +%s.%N)
    kill -TERM "$job"
    wait "$job"
    st=$?
    job=
    dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
    btr=$(ls "$tmp/wd" | grep '\.btr$')
    if [ -n "$btr" ]; then
        bad "try $try: SIGTERM during start-up ran the library's handler: $btr left, exit $st"
    elif [ $st != 143 ]; then
        bad "try $try: the launcher exited $st, not 143: $(tail -n 3 "$tmp/err")"
    elif grep -q 'exited with status 1\|status 1' "$tmp/err"; then
        bad "try $try: a worker exited 1 (the library's handler): $(tail -n 3 "$tmp/err")"
    else
        ok "try $try: SIGTERM while loading: exit 143 after $dt s, no *.btr, $(grep -c . "$tmp/err") stderr lines"
    fi
done
exit $fail
