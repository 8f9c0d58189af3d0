#!/usr/bin/env bash
# Behaviour of two builds, side by side: every algorithm run in virtual time by each build's
# `hearsay` binary, with the same flags, and their results compared byte for byte.
#
#   scripts/compare-builds.sh OLD_HEARSAY NEW_HEARSAY [-n RANKS] [--iters T] [--keep]
#
# For a refactoring that must not change behaviour (issue 31: "every test, study and
# benchmark figure holds, measured old build against new"). A run of `hearsay sim` with
# --sim-compute fixed (its default) is bit-for-bit repeatable, so two builds that run the same
# algorithm the same way write identical files. For each case below, both binaries run
#   hearsay sim -n RANKS --algo A [its flags] --max-iters T --seed 1 --eval-every 0.5
#       --dump-params --out DIR
# and the script compares every rank's final parameters (rank-R.final.f32), every rank's
# metrics (rank-R.csv, less any host-time columns), eval.csv and consensus.csv. One line per case: "same",
# or "DIFFERENT" with the first file that differs. The script fails when a case differs or
# fails in one build only. --keep leaves the run directories (named at the end).
set -euo pipefail
usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; }
[ $# -ge 2 ] || {
    usage >&2
    exit 2
}
old=$1 new=$2
shift 2
ranks=4 iters=20 keep=0
while [ $# -gt 0 ]; do
    case "$1" in
    -n)
        ranks=${2:?-n needs a count}
        shift 2
        ;;
    --iters)
        iters=${2:?--iters needs a count}
        shift 2
        ;;
    --keep)
        keep=1
        shift
        ;;
    -h | --help)
        usage
        exit 0
        ;;
    *)
        echo "compare-builds.sh: unknown argument '$1' (see --help)" >&2
        exit 2
        ;;
    esac
done
for b in "$old" "$new"; do
    [ -x "$b" ] || {
        echo "compare-builds.sh: '$b' is not an executable hearsay binary" >&2
        exit 2
    }
done

# algorithm and its flags, one case per line; the last ones run the network models (links,
# NICs shared fairly or first in first out, the rendezvous, a crash's dead letters)
cases=(
    "local"
    "sgp"
    "sgp --delay-bound none"
    "sgp --sgp-step z"
    "osgp --tau 2"
    "dpsgd"
    "adpsgd"
    "allreduce"
    "allreduce --bucket-mb 0"
    "allreduce --compress topk:10%"
    "localsgd --period 3"
    "easgd --tau 2"
    "eamsgd --momentum 0.9 --tau 2"
    "lsgd --tau 2"
    "choco --compress topk:10%"
    "choco --compress int8:stochastic"
    "allreduce --compress randk:10% --bucket-mb 0.0004"
    "easgd --compress fp16"
    "qsgp --compress int8"
    "sgp --link latency=1ms,jitter=0.5ms,bw=100Mbit"
    "allreduce --ranks-per-host 2 --sim-nic 100Mbit"
    "allreduce --ranks-per-host 2 --sim-nic 100Mbit --sim-nic-share fifo --link latency=1ms"
    "sgp --ranks-per-host 2 --sim-nic 100Mbit --sim-proto rndv=1000,acks --link latency=1ms"
    "easgd --tau 2 --ranks-per-host 1 --sim-nic 1Gbit --sim-proto rxm"
    "adpsgd --ranks-per-host 2 --sim-nic 100Mbit --straggler crash:3:iter=5"
)

work=$(mktemp -d "${TMPDIR:-/tmp}/hs-compare.XXXXXX")
cleanup() { [ "$keep" = 1 ] || rm -rf "$work"; }
trap cleanup EXIT

# rank-R.csv columns measured on the host clock differ between any two runs: drop them
strip_host() {
    awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i !~ /^host_/) keep[i] = 1 }
             { s = ""; for (i = 1; i <= NF; i++) if (keep[i]) s = s (s == "" ? "" : ",") $i; print s }' "$1"
}

bad=0
k=0
for c in "${cases[@]}"; do
    k=$((k + 1))
    read -r -a args <<<"$c"
    rcs=()
    for side in old new; do
        bin=$old
        [ $side = new ] && bin=$new
        d="$work/$k-$side"
        if "$bin" sim -n "$ranks" --algo "${args[@]}" --max-iters "$iters" --seed 1 \
            --eval-every 0.5 --dump-params --quiet --out "$d" >"$d.log" 2>&1; then
            rcs+=(0)
        else
            rcs+=(1)
        fi
    done
    if [ "${rcs[0]}" != "${rcs[1]}" ]; then
        echo "DIFFERENT  $c: exit status old ${rcs[0]}, new ${rcs[1]} (logs $work/$k-*.log)"
        bad=1
        continue
    fi
    if [ "${rcs[0]}" != 0 ]; then
        echo "failed     $c: both builds fail ($(tail -1 "$work/$k-old.log"))"
        continue
    fi
    diff=""
    for f in "$work/$k-old"/rank-*.final.f32 "$work/$k-old"/eval.csv "$work/$k-old"/consensus.csv; do
        [ -e "$f" ] || continue
        cmp -s "$f" "$work/$k-new/$(basename "$f")" || {
            diff=$(basename "$f")
            break
        }
    done
    if [ -z "$diff" ]; then
        for f in "$work/$k-old"/rank-[0-9]*.csv; do
            cmp -s <(strip_host "$f") <(strip_host "$work/$k-new/$(basename "$f")") || {
                diff=$(basename "$f")
                break
            }
        done
    fi
    # (a case with an injected crash: the crashed rank writes none, in both builds)
    n=$(ls "$work/$k-old"/rank-*.final.f32 2>/dev/null | wc -l)
    n_new=$(ls "$work/$k-new"/rank-*.final.f32 2>/dev/null | wc -l)
    if [ "$n" = 0 ] || [ "$n" != "$n_new" ]; then
        echo "DIFFERENT  $c: $n (old) and $n_new (new) of $ranks ranks wrote final parameters"
        bad=1
    elif [ -n "$diff" ]; then
        echo "DIFFERENT  $c: $diff differs"
        bad=1
    else
        echo "same       $c"
    fi
done
[ "$keep" = 1 ] && echo "compare-builds.sh: runs kept in $work"
exit $bad
