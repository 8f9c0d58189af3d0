#!/bin/sh
# shellcheck disable=SC2015,SC2016,SC2317 # A && ok || bad: ok never fails; $HS_RANK expands in the rank's shell; cleanup runs from trap
# tests/test_auto_provider.sh — `--provider auto` across hosts (gossip/transport.c): 4 ranks
# on 2 hosts emulated with HS_HOSTNAME on this machine, started by `hearsay run`, take the
# best libfabric provider of HS_FAB_AUTO that every rank has (tcp here: no efa or verbs
# hardware), and summary.json names it; a list none of whose providers exists stops every
# rank with a message naming each candidate and a rank without it; a rank whose own list is
# bad stops every rank at once, naming it.
bin=${HS_BIN:-./hearsay}
if [ ! -x /usr/bin/python3 ]; then
    echo "test_auto_provider: skipped: no /usr/bin/python3 to read summary.json (apt-get install python3)"
    exit 77
fi
# shellcheck source=tests/shlib.sh
. "$(dirname "$0")/shlib.sh"
hs_scratch auto
trap 'rm -rf "$tmp"' EXIT
unset HS_PROVIDER
train() { # OUT RANKS_PER_HOST [RANK LIST]: a few SGP iterations on 4 ranks (RANK: HS_FAB_AUTO=LIST)
    HS_RPH=$2 HS_ODD_RANK=${3:--1} HS_ODD_LIST=${4:-} "$bin" run -n 4 --timeout 120 -- sh -c \
        '[ "$HS_RANK" = "$HS_ODD_RANK" ] && export HS_FAB_AUTO="$HS_ODD_LIST"
         HS_HOSTNAME=emu$((HS_RANK / HS_RPH)) exec "$0" train --algo sgp --model mlp:16-8-4 \
         --data gauss:dim=16,classes=4,train=512,test=128 --epochs 1 --batch 32 --progress 0 \
         --out "$1"' "$bin" "$1"
}
transports() {
    /usr/bin/python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["transports"]; print(t["intra_host"], t["inter_host"])' "$1/summary.json"
}

expect() { # NAME DIR RANKS_PER_HOST WANT: the run succeeds and summary.json's transports are WANT
    if train "$2" "$3" >"$2.log" 2>&1; then
        got=$(transports "$2")
        [ "$got" = "$4" ] && ok "$1: $got" || bad "$1: transports '$got', expected '$4'"
    else
        bad "$1 failed:"
        cat "$2.log"
    fi
}

export HS_FAB_AUTO="nosuchprov,efa,verbs,tcp"
expect "2 hosts of 2 ranks" "$tmp/two" 2 "hsshm tcp;ofi_rxm"
expect "4 hosts of 1 rank" "$tmp/four" 1 "None tcp;ofi_rxm"

export HS_FAB_AUTO="nosuchprov,alsonot"
if train "$tmp/none" 2 >"$tmp/none.log" 2>&1; then
    bad "a list of missing providers was accepted"
elif grep -q "nosuchprov (not on rank 0), alsonot (not on rank 0)" "$tmp/none.log"; then
    ok "no common provider: refused, naming each"
else
    bad "no common provider: message not found in:"
    cat "$tmp/none.log"
fi
[ -e "$tmp/none/summary.json" ] && bad "the refused run wrote a summary"

# one rank's list is bad: it says so, and every other rank stops at once naming it
unset HS_FAB_AUTO
if train "$tmp/badlist" 2 2 ",bad" >"$tmp/badlist.log" 2>&1; then
    bad "a rank with a bad HS_FAB_AUTO was accepted"
elif grep -q "HS_FAB_AUTO ',bad'" "$tmp/badlist.log" &&
    grep -q "rank 2 sent no valid record" "$tmp/badlist.log"; then
    ok "one rank's bad list: it and its peers stop, naming it"
else
    bad "one rank's bad list: messages not found in:"
    cat "$tmp/badlist.log"
fi
exit $fail
