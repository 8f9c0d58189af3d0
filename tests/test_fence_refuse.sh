#!/bin/sh
# tests/test_fence_refuse.sh — issue 28 item 2: "a rank suspected and then excluded is fenced:
# its later messages are refused". A woken fenced rank normally knows before it sends anything
# (its own last heartbeat is too old) and exits 71; this test makes it learn 1 s late
# (HS_TEST_FENCE_DEAF_RANK, a test hook: runtime/heartbeat.c), so that it keeps training and
# sending for that second, as a rank would whose messages were already on their way. The
# others must refuse every one of them, and say so:
#   sgp, osgp  summary.json ps_weight_refused > 0, and survivors + lost (refused included) +
#              unreported = 4 within 1e-6 (the fenced rank takes back, on its way out, what
#              the others had not begun to take: each share is counted once);
#   adpsgd     the passive side: "AD-PSGD refused N request(s) of fenced ranks" (rank 1: an
#              active rank, which sends requests);
#   easgd      the center shards: "EASGD center refused N message(s)";
#   lsgd       the loss tables: "leader-SGD refused N loss message(s)" (never a leader).
# 4 ranks on hsshm, the rank frozen at iteration 50 for 4 s (--fail-timeout 2: fenced), each
# run bounded by timeout(1); never NaN, status 71 (the fenced rank), the survivors' results.
bin=${HS_BIN:-./hearsay}
[ -x /usr/bin/python3 ] || { echo "test_fence_refuse: /usr/bin/python3 missing: skipped"; exit 77; }
command -v timeout >/dev/null || { echo "test_fence_refuse: timeout(1) missing: skipped"; exit 77; }
algos=${FENCE_ALGOS:-"sgp osgp adpsgd easgd lsgd"}
# under the sanitizers: one push-sum and one center algorithm (their memory paths)
if [ -n "${ASAN_OPTIONS:-}" ] && [ -z "${FENCE_ALGOS:-}" ]; then algos="sgp easgd"; fi
out=$(mktemp -d "${TMPDIR:-/tmp}/hs-fence-refuse.XXXXXX")
trap 'rm -rf "$out"' EXIT
fail=0
for algo in $algos; do
    r=2
    [ "$algo" = adpsgd ] && r=1 # (an active rank: the passive side refuses its requests)
    d=$out/$algo
    t0=$(date +%s)
    HS_TEST_FENCE_DEAF_RANK=$r HS_TEST_FENCE_DEAF_S=1 timeout -k 5 120 "$bin" run --keep-going \
        --finish-timeout 10 -n 4 -- "$bin" train --algo "$algo" --model mlp:16-32-4 \
        --data gauss:dim=16,classes=4,train=32000,test=500 --batch 16 --epochs 1 --threads 1 \
        --quiet --comm-timeout 1 --drain-timeout 5 --fail-timeout 2 \
        --straggler pause:all:p=1:fixed=10ms --straggler "freeze:$r:at=50:for=4s" --out "$d" \
        >"$d.log" 2>&1
    st=$?
    secs=$(($(date +%s) - t0))
    why=""
    if [ $st -ne 71 ]; then why="status $st (expected 71: rank $r fenced)"; fi
    if ! grep -q "rank $r: fenced, and learns it 1 s late" "$d.log"; then
        why="${why:+$why; }rank $r was not fenced while frozen"
    fi
    if grep -qi 'nan\b\|diverged' "$d.log"; then why="${why:+$why; }NaN or divergence"; fi
    case $algo in
    sgp | osgp)
        v=$(/usr/bin/python3 - "$d/summary.json" <<'PY' 2>&1
import json, math, sys
s = json.load(open(sys.argv[1]))
w, lost, ref, unrep = (s.get(k) for k in ("ps_weight_sum", "ps_weight_lost", "ps_weight_refused",
                                          "ps_weight_unreported"))
loss = s.get("final_test_loss")
bad = []
if not (isinstance(ref, (int, float)) and ref > 0):
    bad.append("ps_weight_refused %s, not > 0" % ref)
if abs(w + lost + unrep - s["ranks"]) > 1e-6:
    bad.append("push-sum mass %.9f + %.9f + %.9f != %d" % (w, lost, unrep, s["ranks"]))
if not (isinstance(loss, (int, float)) and math.isfinite(loss)):
    bad.append("final test loss %s" % loss)
print("; ".join(bad) if bad else "ok refused %.6g, mass %.9f" % (ref, w + lost + unrep))
PY
        )
        case $v in ok*) ;; *) why="${why:+$why; }$v" ;; esac
        ;;
    adpsgd) pat="AD-PSGD refused [1-9][0-9]* request" ;;
    easgd) pat="EASGD center refused [1-9][0-9]* message" ;;
    lsgd) pat="leader-SGD refused [1-9][0-9]* loss message" ;;
    esac
    case $algo in
    adpsgd | easgd | lsgd)
        v=$(grep -c "$pat" "$d.log")
        if [ "$v" -lt 1 ]; then why="${why:+$why; }no survivor refused anything ('$pat')"; fi
        v="$v rank(s) refused"
        ;;
    esac
    if [ -z "$why" ]; then
        echo "ok   $algo: rank $r fenced, learnt it 1 s late; status $st in $secs s; $v"
    else
        echo "FAIL $algo: $why ($secs s)"
        tail -n 8 "$d.log"
        fail=1
    fi
done
exit $fail
