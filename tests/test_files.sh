#!/bin/sh
# shellcheck disable=SC2015,SC2317 # A && ok || bad: ok never fails; cleanup runs from trap
# tests/test_files.sh — the files Hearsay writes and reads in a directory another user can
# write to (issue 28 items 5 and 6; hearsay/file.h):
#   writing: a symlink planted at every name a run writes (its outputs, checkpoints, trace
#     parts, the --env-file, and the temporary names the old code used: F.tmp, F.tmp.PID)
#     points at a victim file; after the run the victim is unchanged, each name is the run's
#     own regular file, no temporary is left, and the --env-file (it holds the job key) is 0600.
#   reading: a FIFO given as --config, as a checkpoint part (--resume) or as a trace merge part
#     is refused at once (no hang), and so are devices; trace merge refuses an OUT that is one
#     of its parts and leaves the part as it was; --trace /dev/full fails at start.
bin=${HS_BIN:-./hearsay}
# shellcheck source=tests/shlib.sh
. "$(dirname "$0")/shlib.sh"
hs_scratch files
rdv=
trap '[ -n "$rdv" ] && kill "$rdv" 2>/dev/null; rm -rf "$tmp"' EXIT
bound=60
common="--algo sgp --model mlp:16-32-4 --data gauss:dim=16,classes=4,train=2000,test=200,sep=5
    --epochs 1 --batch 32 --progress 0"

victim=$tmp/victim
printf 'VICTIM\n' >"$victim"
chmod 0644 "$victim"
check_victim() { # WHAT
    if [ "$(cat "$victim")" = VICTIM ] && [ "$(stat -c %a "$victim")" = 644 ]; then
        ok "$1: the file the planted symlinks point at is unchanged"
    else
        bad "$1: the victim file was written through a planted symlink: $(head -c 80 "$victim")"
        printf 'VICTIM\n' >"$victim"
        chmod 0644 "$victim"
    fi
}
plant() { # NAME...: a symlink to the victim at each name
    for n in "$@"; do ln -s "$victim" "$n"; done
}
own_file() { # NAME...: each is a regular file now, not the planted symlink
    for n in "$@"; do
        if [ -L "$n" ] || [ ! -f "$n" ]; then
            bad "$n is still a symlink (or missing) after the run"
            return
        fi
    done
    ok "the planted names are the run's own regular files ($#)"
}
no_temporaries() { # DIR...
    left=$(find "$@" -name '*.tmp*' ! -type l 2>/dev/null)
    [ -z "$left" ] && ok "no temporary file left in $*" || bad "temporaries left: $left"
}

# --- a run's outputs, checkpoints and trace ------------------------------------------------
run=$tmp/run
mkdir -p "$run/ckpt"
outs="config.ini rank-0.csv rank-1.csv rank-0-eval.csv rank-1-eval.csv eval.csv summary.json
    sim.json consensus.csv rank-1-lost.json rank-0-ps-failed.csv"
for n in $outs; do plant "$run/$n"; done
ckpts="$run/ckpt/rank-0.it-16.bin $run/ckpt/rank-1.it-16.bin $run/ckpt/set-16.manifest"
# shellcheck disable=SC2086
plant "$run/rank-1-lost.json.tmp" $ckpts
plant "$tmp/t.json" "$tmp/t.json.rank0" "$tmp/t.json.rank0.tmp"
# The old temporary of a checkpoint was rank-R.bin.tmp.PID: the exec keeps the shell's PID.
# shellcheck disable=SC2086
if sh -c 'for r in 0 1; do ln -s "$1" "$2/ckpt/rank-$r.bin.tmp.$$"; done; shift 2; exec "$@"' \
    sh "$victim" "$run" timeout -k 5 $bound "$bin" sim -n 2 $common --checkpoint-every 0.5 \
    --out "$run" --trace "$tmp/t.json" --straggler crash:1:iter=20 >"$tmp/run.log" 2>&1; then
    ok "hearsay sim with symlinks planted at its names ran"
else
    bad "hearsay sim failed: $(tail -n 5 "$tmp/run.log")"
fi
check_victim "hearsay sim --out --checkpoint-every --trace"
# shellcheck disable=SC2086
own_file $(for n in $outs; do echo "$run/$n"; done) $ckpts "$tmp/t.json" "$tmp/t.json.rank0"
no_temporaries "$run" "$tmp/t.json.rank0"
rm -f "$run"/ckpt/*.tmp* "$run"/*.tmp "$tmp"/t.json*

# a symlink planted as the checkpoint directory itself is refused, nothing written through it
mkdir "$tmp/elsewhere"
rm -rf "$run/ckpt"
ln -s "$tmp/elsewhere" "$run/ckpt"
# shellcheck disable=SC2086
if msg=$(timeout -k 5 $bound "$bin" sim -n 2 $common --checkpoint-every 0.5 --out "$run" 2>&1); then
    bad "a symlink as DIR/ckpt was followed (exit 0)"
elif [ -n "$(ls -A "$tmp/elsewhere")" ]; then
    bad "checkpoints were written through the symlink DIR/ckpt: $(ls "$tmp/elsewhere")"
else
    ok "a symlink as DIR/ckpt is refused: $(echo "$msg" | grep -m1 ckpt)"
fi
rm -f "$run/ckpt"

# --- the --env-file (the job key) ----------------------------------------------------------
env=$tmp/job.env
plant "$env"
sh -c 'ln -s "$1" "$2.tmp.$$"; shift 2; exec "$@"' sh "$victim" "$env" \
    "$bin" run --rendezvous-only -n 2 --bind 127.0.0.1 --env-file "$env" >"$tmp/rdv.out" 2>&1 &
rdv=$!
i=0
while [ $i -lt 200 ] && ! grep -q HS_JOB_KEY "$tmp/rdv.out" 2>/dev/null; do
    sleep 0.05
    i=$((i + 1))
done
kill "$rdv" 2>/dev/null
wait "$rdv" 2>/dev/null
rdv=
check_victim "hearsay run --rendezvous-only --env-file"
if [ -f "$env" ] && [ ! -L "$env" ] && grep -q '^HS_JOB_KEY=' "$env"; then
    mode=$(stat -c %a "$env")
    [ "$mode" = 600 ] && ok "--env-file holds the key and is 0600" ||
        bad "--env-file holds the job key and is $mode, not 0600"
else
    bad "--env-file $env was not written as a file of its own: $(cat "$tmp/rdv.out")"
fi
no_temporaries "$tmp"/job.env*
rm -f "$tmp"/job.env*

# --- trace merge and topo outputs ----------------------------------------------------------
# shellcheck disable=SC2086
timeout -k 5 $bound "$bin" sim -n 2 $common --max-iters 5 --trace "$tmp/p.json" \
    >"$tmp/p.log" 2>&1 || bad "a traced run failed: $(tail -n 3 "$tmp/p.log")"
# keep the parts: rank 0 merged and removed them, so write them again by hand
# shellcheck disable=SC2086
timeout -k 5 $bound "$bin" sim -n 2 $common --max-iters 5 --trace "$tmp/q.json" \
    --straggler crash:1:iter=3 >"$tmp/q.log" 2>&1
part=$tmp/q.json.rank0
if [ -f "$part" ]; then
    plant "$tmp/merged.json"
    "$bin" trace merge "$tmp/merged.json" "$part" >/dev/null 2>&1 ||
        bad "trace merge into a planted name failed"
    check_victim "hearsay trace merge OUT"
    own_file "$tmp/merged.json"
    # OUT is one of the parts: refused, and the part is as it was
    sum=$(cksum <"$part")
    if msg=$("$bin" trace merge "$part" "$part" 2>&1); then
        bad "trace merge with OUT one of its parts exited 0"
    elif [ "$(cksum <"$part")" != "$sum" ]; then
        bad "trace merge overwrote its input $part"
    else
        ok "trace merge refuses an OUT that is one of its parts: $msg"
    fi
    ln "$part" "$tmp/hard.rank0" # the same file under another name
    if msg=$("$bin" trace merge "$tmp/hard.rank0" "$part" 2>&1) ||
        [ "$(cksum <"$part")" != "$sum" ]; then
        bad "trace merge with OUT a hard link to a part: '$msg'"
    else
        ok "trace merge refuses an OUT that is a part under another name"
    fi
else
    bad "no trace part $part: $(tail -n 3 "$tmp/q.log")"
fi
plant "$tmp/g.dot" "$tmp/g.edges"
"$bin" topo --graph exp --n 8 --dot "$tmp/g.dot" --edges "$tmp/g.edges" >/dev/null 2>&1 ||
    bad "hearsay topo --dot --edges failed"
check_victim "hearsay topo --dot --edges"
own_file "$tmp/g.dot" "$tmp/g.edges"

# --- readers: FIFOs and devices refused at once --------------------------------------------
mkfifo "$tmp/fifo"
refused() { # WHAT CMD...: exits non-zero within a few seconds, naming the FIFO
    what=$1
    shift
    msg=$(timeout -k 2 10 "$@" 2>&1)
    st=$?
    if [ $st -ge 124 ]; then
        bad "$what: hung (killed after 10 s)"
    elif [ $st -eq 0 ]; then
        bad "$what: exit 0"
    elif ! echo "$msg" | grep -q "regular file"; then
        bad "$what: exit $st, the message does not say why: $(echo "$msg" | tail -n 2)"
    else
        ok "$what refused: $(echo "$msg" | grep -m1 'regular file')"
    fi
}
# shellcheck disable=SC2086
refused "--config FIFO" "$bin" train --config "$tmp/fifo" $common
# shellcheck disable=SC2086
refused "--config /dev/zero" "$bin" train --config /dev/zero $common
refused "trace merge of a FIFO part" "$bin" trace merge "$tmp/m2.json" "$tmp/fifo"
refused "trace merge of /dev/zero" "$bin" trace merge "$tmp/m2.json" /dev/zero
mkdir -p "$tmp/res/ckpt"
mkfifo "$tmp/res/ckpt/rank-0.bin" "$tmp/res/ckpt/rank-1.bin"
# shellcheck disable=SC2086
refused "--resume with FIFO parts" "$bin" sim -n 2 $common --resume "$tmp/res"
mkdir -p "$tmp/res2/ckpt"
mkfifo "$tmp/res2/ckpt/set-16.manifest"
# shellcheck disable=SC2086
refused "--resume with a FIFO manifest" "$bin" sim -n 2 $common --resume "$tmp/res2"
refused "topo --graph file:FIFO" "$bin" topo --graph "file:$tmp/fifo" --n 4
# --trace to a device: refused at start, before any training. (Only while /dev/full is the
# device: the old code, run as root, unlinked /dev/full when the write at the end failed.)
if [ -c /dev/full ]; then
    # shellcheck disable=SC2086
    msg=$(timeout -k 5 $bound "$bin" sim -n 2 $common --trace /dev/full 2>&1)
    st=$?
    if [ ! -c /dev/full ]; then
        bad "--trace /dev/full: /dev/full IS NO LONGER A DEVICE (as root: mknod -m 666 /dev/full c 1 7)"
    elif [ $st -eq 0 ] || [ $st -ge 124 ] || ! echo "$msg" | grep -q -- "--trace /dev/full"; then
        bad "--trace /dev/full: exit $st, '$(echo "$msg" | tail -n 2)'"
    elif echo "$msg" | grep -q '^done:'; then
        bad "--trace /dev/full failed only after the run trained"
    else
        ok "--trace /dev/full fails at start: $(echo "$msg" | head -n 1)"
    fi
    msg=$("$bin" trace merge /dev/full "$part" 2>&1)
    [ -c /dev/full ] && ok "trace merge OUT=/dev/full leaves the device: $msg" ||
        bad "trace merge OUT=/dev/full: /dev/full IS NO LONGER A DEVICE"
else
    echo "test_files: /dev/full is not a character device here: its check is skipped"
fi
exit $fail
