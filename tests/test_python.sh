#!/bin/sh
# shellcheck disable=SC2015,SC2317 # A && ok || bad: ok never fails; cleanup runs from trap
# tests/test_python.sh — the Python package (python/, docs/python.md) as a new user gets it: a
# fresh virtual environment with --system-site-packages (numpy, pandas from Debian) in a scratch
# directory, `pip install --no-deps --no-build-isolation ./python` (offline), then
# tests/python_checks.py (keywords as flags, HearsayError carrying the command's message,
# sim/train/load, dataset_from_numpy and the npy reader) and docs/python.md's worked example,
# run as it is written. Exits 77 (skipped), saying why, when /usr/bin/python3 lacks venv, pip,
# numpy, pandas or matplotlib (apt-get install python3-venv python3-pip python3-pandas
# python3-matplotlib).
bin=${HS_BIN:-./hearsay}
src=${HS_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
py=/usr/bin/python3
for m in venv pip numpy pandas matplotlib setuptools; do
    if ! $py -c "import $m" 2>/dev/null; then
        echo "test_python: skipped: $py cannot import $m (apt-get install python3-$m)"
        exit 77
    fi
done
# shellcheck source=tests/shlib.sh
. "$(dirname "$0")/shlib.sh"
hs_scratch python
trap 'rm -rf "$tmp"' EXIT

if ! $py -m venv --system-site-packages "$tmp/venv" >"$tmp/venv.log" 2>&1; then
    echo "test_python: skipped: $py -m venv failed: $(tail -n 3 "$tmp/venv.log")"
    exit 77
fi
# a copy of the package: pip builds in place, the source tree stays clean
cp -r "$src/python" "$tmp/pkg"
rm -rf "$tmp/pkg/build" "$tmp/pkg"/*.egg-info
if "$tmp/venv/bin/pip" install -q --no-deps --no-build-isolation "$tmp/pkg" >"$tmp/pip.log" 2>&1; then
    ok "pip install ./python into a fresh venv (--system-site-packages)"
else
    bad "pip install ./python failed:"
    cat "$tmp/pip.log"
    exit 1
fi
# the checks' and the runs' temporary directories go in the scratch directory too
export HEARSAY="$bin" MPLBACKEND=Agg TMPDIR="$tmp"
cd "$tmp" || exit 1
if "$tmp/venv/bin/python" "$src/tests/python_checks.py" >"$tmp/checks.log" 2>&1; then
    ok "tests/python_checks.py"
    grep '^ok' "$tmp/checks.log"
else
    bad "tests/python_checks.py failed:"
    cat "$tmp/checks.log"
fi

# docs/python.md's "Your own arrays" block, as written, then a check of what it made
awk '/^## Your own arrays/ {w = 1} w && /^```python/ {p = 1; next} p && /^```/ {exit} p' \
    "$src/docs/python.md" >"$tmp/arrays.py"
printf '%s\n' 'assert run.summary["ranks"] == 2 and data.startswith("npy:"), run.summary' \
    'print("accuracy", run.summary["final_test_acc"])' >>"$tmp/arrays.py"
if "$tmp/venv/bin/python" "$tmp/arrays.py" >"$tmp/arrays.log" 2>&1; then
    ok "docs/python.md's own-arrays block trains ($(tail -n 1 "$tmp/arrays.log"))"
else
    bad "docs/python.md's own-arrays block failed:"
    cat "$tmp/arrays.log"
fi

# docs/python.md's worked example: the python block under "## Worked example", as written
awk '/^## Worked example/ {w = 1} w && /^```python/ {p = 1; next} p && /^```/ {exit} p' \
    "$src/docs/python.md" >"$tmp/example.py"
[ "$(wc -l <"$tmp/example.py")" -ge 10 ] && ok "the worked example is $(wc -l <"$tmp/example.py") lines" ||
    bad "no worked example found in docs/python.md"
if "$tmp/venv/bin/python" "$tmp/example.py" >"$tmp/example.log" 2>&1; then
    ok "docs/python.md's worked example runs"
else
    bad "docs/python.md's worked example failed:"
    cat "$tmp/example.log"
fi
png=$(head -c 8 "$tmp/stragglers.png" 2>/dev/null | od -An -tx1 | tr -d ' \n')
[ "$png" = 89504e470d0a1a0a ] && ok "it plots stragglers.png" || bad "no stragglers.png written"
# what the document says it prints
awk '/^It prints/ {w = 1} w && /^```$/ {if (p) exit; p = 1; next} p' "$src/docs/python.md" >"$tmp/doc.out"
if diff "$tmp/doc.out" "$tmp/example.log" >"$tmp/diff"; then
    ok "it prints what docs/python.md says"
else
    bad "docs/python.md's example prints something else:"
    cat "$tmp/diff"
fi
exit $fail
