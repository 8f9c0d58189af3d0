#!/bin/sh
# tests/test_digits_parity.sh — Hearsay against PyTorch 1.13 on scikit-learn's digits (issue 14):
#   1. LeNet-5 and the batch-norm ResNet-20 on IDENTICAL weights and batches: losses, gradients,
#      running statistics agree (bench/torch_parity.py --check);
#   2. LeNet-5 with PyTorch's hyperparameters (lr 0.05, momentum 0.9, weight decay 5e-4,
#      batch 64, 10 epochs), 3 seeds each: the mean test accuracies within 1 point
#      (bench/digits_parity.py --check 1, which prints the table).
# Exits 77 (skipped), saying why, without /usr/bin/python3 + python3-torch or the digits file
# (python3-sklearn); part 1 also without a shared library free of sanitizers (ctypes).
py=/usr/bin/python3
src=${HS_SRCDIR:-$(dirname "$0")/..}
bin=${HS_BIN:-./hearsay}
lib=$(dirname "$bin")/.libs/libhearsay.so
if [ ! -x "$py" ] || ! "$py" -c "import torch, numpy" 2>/dev/null; then
    echo "test_digits_parity: skipped: PyTorch not installed (apt-get install python3-torch)"
    exit 77
fi
# skip only when the digits file is missing (the message names the package); fail otherwise
if ! msg=$("$bin" train --data digits --model logreg:784-10 --max-iters 1 --quiet 2>&1); then
    case $msg in
    *python3-sklearn*)
        echo "test_digits_parity: skipped: the digits are not installed (apt-get install python3-sklearn)"
        exit 77 ;;
    *)
        echo "test_digits_parity: FAIL: hearsay train on the digits failed: $msg"
        exit 1 ;;
    esac
fi
if [ -f "$lib" ] && ! nm -D "$lib" 2>/dev/null | grep -q __asan_init; then
    # one step (batch-norm gradients of a deep net differ from float64 by up to ~1e-3 in
    # float32, PyTorch's as much as Hearsay's, and later steps amplify it)
    "$py" "$src/bench/torch_parity.py" --lib "$lib" --model lenet5,resnet20 --init torch \
        --seed 1 --steps 1 --batch 8 --check 1e-4 || exit 1
else
    echo "test_digits_parity: identical-weights check skipped: no plain $lib (sanitizer build?)"
fi
exec "$py" "$src/bench/digits_parity.py" --hearsay "$bin" --epochs 10 --seeds 1,2,3 --check 1
