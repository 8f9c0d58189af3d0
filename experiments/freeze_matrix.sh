#!/bin/sh
# experiments/freeze_matrix.sh — issue 28 item 2: a rank frozen (--straggler freeze, i.e.
# SIGSTOP of the whole process) for a short time (< --fail-timeout), a long time (>) and for
# good, under each algorithm, 4 ranks on hsshm. Each run must end (bounded by LIMIT) either
# correctly (status 0, the frozen rank carried on) or with a failure status and a message naming
# rank 2 (71: it was fenced or killed frozen; 1: a synchronous algorithm stopped); never NaN. Prints one row per run: algo, freeze, status, seconds, the survivors' weight sum,
# the lost / refused / unreported weight (push-sum) and the verdict.
#   experiments/freeze_matrix.sh [HEARSAY]      the long suite: the issue's 10 s / 60 s / forever
#                                                at the default timeouts (--fail-timeout 30)
#   FREEZE_QUICK=1 ...                           make check's: grace 2 s, 1 s / 6 s / forever
# Env: FREEZE_ALGOS (default: all eight, and allreduce@topk:10%: ALGO@SPEC runs ALGO
# --compress SPEC), FREEZE_OUT (keep the run directories there),
# FREEZE_TIMES (the freezes, e.g. "1.5s forever"), FREEZE_TMO (the timeout options),
# FREEZE_LIMIT (each run's own bound, s), FREEZE_STRICT=1 (a freeze shorter than the
# --fail-timeout in FREEZE_TMO must end with status 0 and a finite loss: it is no fault).
bin=${1:-${HS_BIN:-./hearsay}}
# ALGO@SPEC: the algorithm with --compress SPEC (allreduce@topk:10%: EF-SGD's compressed gather)
algos=${FREEZE_ALGOS:-"sgp osgp dpsgd adpsgd allreduce allreduce@topk:10% localsgd easgd lsgd"}
if [ -n "$FREEZE_QUICK" ]; then
    times=${FREEZE_TIMES:-"1s 6s forever"}
    tmo="--comm-timeout 2 --drain-timeout 5 --fail-timeout 2"
    fin=10 limit=90 train=8000 at=50
else
    times=${FREEZE_TIMES:-"10s 60s forever"}
    tmo="" # the defaults: --comm-timeout 30 --drain-timeout 30 --fail-timeout 30
    fin=60 limit=400 train=16000 at=100
fi
tmo=${FREEZE_TMO:-$tmo}
limit=${FREEZE_LIMIT:-$limit}
# the grace period in force (a freeze shorter than it is no fault)
grace=$(echo "$tmo" | sed -n 's/.*--fail-timeout \([0-9.]*\).*/\1/p')
grace=${grace:-30}
out=${FREEZE_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/hs-freeze.XXXXXX")}
fail=0
printf '%-9s %-8s %6s %6s %9s %9s %9s %9s %5s %9s  %s\n' algo freeze status secs w_sum w_lost \
    w_refused w_unrep mass loss verdict
for algo in $algos; do
    name=${algo%%@*} extra=""
    [ "$algo" != "$name" ] && extra="--compress ${algo#*@}"
    for f in $times; do
        d=$out/$(echo "$algo" | tr '@%:' '___')-$f
        rm -rf "$d"
        t0=$(date +%s)
        # shellcheck disable=SC2086 # word splitting of the option lists is wanted
        timeout -k 5 $limit "$bin" run --keep-going --finish-timeout $fin -n 4 -- "$bin" train \
            --algo "$name" $extra --model mlp:16-32-4 \
            --data gauss:dim=16,classes=4,train=$train,test=500 --batch 16 --epochs 1 \
            --threads 1 --quiet $tmo --straggler pause:all:p=1:fixed=10ms \
            --straggler "freeze:2:at=$at:for=$f" --out "$d" >"$d.log" 2>&1
        st=$?
        secs=$(($(date +%s) - t0))
        # push-sum mass: survivors + lost (refused included) + unreported = N within 1e-6
        row=$(/usr/bin/python3 - "$d/summary.json" <<'PY' 2>/dev/null || echo "- - - - - -"
import json, sys
s = json.load(open(sys.argv[1]))
g = lambda k: s.get(k)
ks = ("ps_weight_sum", "ps_weight_lost", "ps_weight_refused", "ps_weight_unreported")
v = [g(k) if isinstance(g(k), (int, float)) else None for k in ks]
mass = "-" if None in v or s.get("ranks") is None else \
    ("ok" if abs(v[0] + v[1] + v[3] - s["ranks"]) < 1e-6 else "%.9f" % (v[0] + v[1] + v[3]))
loss = s.get("final_test_loss")
loss = "%.4f" % loss if isinstance(loss, (int, float)) else "-"
print(" ".join("%.6g" % x if x is not None else "-" for x in v), mass, loss)
PY
)
        verdict=ok
        if grep -qi 'nan\b\|diverged' "$d.log"; then verdict="NaN/diverged"; fi
        if [ $st -eq 124 ] || [ $st -eq 137 ]; then verdict="HANG (killed after $limit s)"; fi
        if [ $st -ne 0 ] && [ $st -ne 124 ] && [ $st -ne 137 ] &&
            ! grep -q 'rank 2' "$d.log"; then verdict="status $st without naming rank 2"; fi
        if [ $st -ne 0 ] && [ $st -ne 71 ] && [ "$verdict" = ok ]; then verdict="stopped, rank 2 named"; fi
        loss=${row##* }
        mass=${row% *}
        mass=${mass##* }
        short=$(awk -v f="${f%s}" -v g="$grace" 'BEGIN { print (f != "forever" && f + 0 < g + 0) }')
        if [ -n "$FREEZE_STRICT" ] && [ "$short" = 1 ]; then
            # shorter than the grace period: no fault, the run finishes as if nothing happened
            if [ $st -ne 0 ]; then
                case $verdict in ok | stopped*)
                    verdict="status $st after a freeze shorter than the grace period" ;;
                esac
            elif [ "$loss" = - ] || [ "$loss" = nan ]; then
                verdict="no finite final loss"
            fi
        fi
        case $algo in sgp | osgp)
            if [ "$mass" != ok ] && { [ $st -eq 0 ] || [ $st -eq 71 ]; }; then
                verdict="push-sum mass $mass, not N"
            fi
            ;;
        esac
        case $verdict in ok | stopped*) ;; *) fail=1 ;; esac
        # shellcheck disable=SC2086
        printf '%-9s %-8s %6s %6s %9s %9s %9s %9s %5s %9s  %s\n' "$algo" "$f" $st $secs $row "$verdict"
        [ -z "$FREEZE_VERBOSE" ] || case $verdict in ok) ;; *) tail -5 "$d.log" ;; esac
    done
done
[ -n "$FREEZE_OUT" ] || rm -rf "$out"
exit $fail
