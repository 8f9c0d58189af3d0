#!/bin/sh
# shellcheck disable=SC2015,SC2317 # A && ok || bad: ok never fails; cleanup runs from trap
# tests/test_algo_example.sh — an algorithm in one file (tests/algo_example.c, public headers
# only, registered with one line) runs like a built-in one (issue 31): real ranks under
# hearsay run and simulated ranks in virtual time finish and learn; its options are in --help,
# checked (range), refused for another algorithm, recorded in config.ini and summary.json; the
# simulated run repeats bit for bit; and its averaging works: the ranks' final parameters are
# closer to each other than those of independent workers (--algo local) from the same seed.
bin=${HS_BIN:-./hearsay}
ex=${HS_ALGO_EXAMPLE:-$(dirname "$bin")/tests/algo_example}
# shellcheck source=tests/shlib.sh
. "$(dirname "$0")/shlib.sh"
[ -x "$ex" ] || {
    echo "skipped: $ex not built"
    exit 77
}
hs_scratch algo_example
trap 'rm -rf "$tmp"' EXIT
small="--data gauss:dim=8,classes=3,train=600,test=120 --model mlp:8-16-3 --batch 16 --max-iters 30 --seed 3 --init-spread 0.5 --progress 0 -q"

# (a) real ranks: hearsay run starts the example program as it would hearsay
# shellcheck disable=SC2086
"$bin" run -n 3 -- "$ex" train --algo example --example-weight 0.5 $small --out "$tmp/real" \
    --dump-params >"$tmp/out" 2>"$tmp/err" && ok "3 real ranks of --algo example finished" ||
    bad "real run failed: $(tail -n 5 "$tmp/err")"
grep -q '"algo": "example"' "$tmp/real/summary.json" 2>/dev/null && ok "summary.json: algo example" ||
    bad "summary.json's algo: $(grep '"algo"' "$tmp/real/summary.json" 2>&1)"
grep -q '"example-weight": 0.5' "$tmp/real/summary.json" 2>/dev/null &&
    ok "summary.json's config records example-weight" || bad "no example-weight in summary.json's config"
grep -q '^example-weight = 0.5' "$tmp/real/config.ini" 2>/dev/null && ok "config.ini records example-weight" ||
    bad "config.ini: $(grep example "$tmp/real/config.ini" 2>&1)"
grep -q '^example-period = 1' "$tmp/real/config.ini" 2>/dev/null &&
    ok "config.ini records the default example-period" || bad "no example-period in config.ini"

# the loss falls: rank 0's mean training loss over its first 5 and its last 5 iterations
loss_drop() {
    awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "train_loss") c = i; next }
             c { v[NR - 1] = $c; n = NR - 1 }
             END { if (!c || n < 10) { print "no train_loss column or too few rows"; exit 1 }
                   for (i = 1; i <= 5; i++) { f += v[i]; l += v[n - 5 + i] }
                   printf "%s %.4g -> %.4g\n", (l < f ? "ok" : "no"), f / 5, l / 5 }' "$1"
}
r=$(loss_drop "$tmp/real/rank-0.csv" 2>&1)
case $r in ok*) ok "real run: rank 0's loss fell ($r)" ;; *) bad "real run: loss did not fall: $r" ;; esac

# (b) virtual time, twice: the same bytes
for i in 1 2; do
    # shellcheck disable=SC2086
    "$ex" sim -n 4 --algo example --example-weight 0.5 $small --out "$tmp/sim$i" --dump-params \
        >"$tmp/out" 2>"$tmp/err" || bad "sim run $i failed: $(tail -n 5 "$tmp/err")"
done
[ -f "$tmp/sim1/rank-3.final.f32" ] && ok "4 simulated ranks of --algo example finished" || bad "no rank-3.final.f32"
same=1
for q in 0 1 2 3; do
    cmp -s "$tmp/sim1/rank-$q.final.f32" "$tmp/sim2/rank-$q.final.f32" || same=0
    cmp -s "$tmp/sim1/rank-$q.csv" "$tmp/sim2/rank-$q.csv" || same=0
done
[ $same = 1 ] && ok "virtual time: two runs byte-identical (final parameters, rank files)" ||
    bad "virtual-time runs differ"
r=$(loss_drop "$tmp/sim1/rank-0.csv" 2>&1)
case $r in ok*) ok "sim run: rank 0's loss fell ($r)" ;; *) bad "sim run: loss did not fall: $r" ;; esac

# the averaging is real: the ranks' final parameters closer than independent workers'
# shellcheck disable=SC2086
"$ex" sim -n 4 --algo local $small --out "$tmp/local" --dump-params >"$tmp/out" 2>"$tmp/err" ||
    bad "sim --algo local failed: $(tail -n 5 "$tmp/err")"
spread() { # RMS distance of the ranks' final parameters from their mean
    /usr/bin/python3 - "$1" <<'EOF' 2>/dev/null
import sys, array
d = sys.argv[1]
xs = []
for q in range(4):
    a = array.array('f')
    with open(f"{d}/rank-{q}.final.f32", "rb") as f:
        a.frombytes(f.read())
    xs.append(a)
n = len(xs[0])
s = 0.0
for i in range(n):
    m = sum(x[i] for x in xs) / 4
    s += sum((x[i] - m) ** 2 for x in xs)
print(f"{(s / 4) ** 0.5:.6g}")
EOF
}
se=$(spread "$tmp/sim1")
sl=$(spread "$tmp/local")
if [ -n "$se" ] && [ -n "$sl" ]; then
    awk -v e="$se" -v l="$sl" 'BEGIN { exit !(e < 0.5 * l) }' &&
        ok "ranks' parameters spread $se (example) < half of $sl (local, same seed)" ||
        bad "example's spread $se is not below half of local's $sl"
else
    echo "skipped: the parameter spread (no python3)"
fi

# its option: in --help, range-checked, refused for another algorithm
"$ex" train --help >"$tmp/help" 2>&1
grep -q -- "--example-weight W  *example: weight of the ring predecessor" "$tmp/help" &&
    ok "--help lists --example-weight with its algorithm" || bad "--help: $(grep -A1 example-weight "$tmp/help")"
grep -q "^  example  *tests/algo_example.c" "$tmp/help" && ok "--help lists --algo example" || bad "no example in --help's algorithms"
# shellcheck disable=SC2086
"$ex" sim -n 2 --algo example --example-weight 2 $small >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc = 2 ] && grep -q "example-weight.*2.*(0, 1\]" "$tmp/err" &&
    ok "--example-weight 2 refused naming the range (exit 2)" || bad "--example-weight 2: exit $rc: $(cat "$tmp/err")"
# shellcheck disable=SC2086
"$ex" sim -n 2 --algo sgp --example-weight 0.3 $small >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc = 2 ] && grep -q -- "--example-weight applies to --algo example (--algo sgp has no --example-weight)" "$tmp/err" &&
    ok "--example-weight with --algo sgp refused, naming the algorithm that takes it" ||
    bad "--algo sgp --example-weight: exit $rc: $(cat "$tmp/err")"
# the built-in command does not know it
"$bin" train --algo example >"$tmp/out" 2>&1 && bad "hearsay train accepted --algo example" ||
    ok "the hearsay binary has no --algo example"
exit $fail
