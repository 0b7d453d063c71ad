#!/usr/bin/env bash
# Install the Debian packages ntkd needs to build, test and run its
# examples, if any is missing. Debian 12; run as root (or with sudo).
set -euo pipefail
source "$(dirname "$0")/args.sh"
script_args 0 -- "$@"
pkgs=(
  build-essential cmake pkg-config            # toolchain
  libopenmpi-dev openmpi-bin                  # MPI
  libopenblas-dev                             # BLAS (OpenBLAS, with LAPACK)
  libscalapack-openmpi-dev                    # ScaLAPACK ([solve] method = scalapack)
  libzstd-dev zlib1g-dev libxxhash-dev
  check                                       # unit tests
  locales                                     # tests/test_lib.c's de_DE host locale (localedef)
  python3-numpy time bc procps                # end-to-end tests and benchmarks
  python3-zstandard python3-xxhash            # python/ntkd_store (the Python reader)
  python3-venv python3-setuptools python3-wheel  # pip install ./python (tests/e2e_python.sh)
  python3-pytest                              # the Python package's tests (tests/python/)
  python3-matplotlib                          # scripts/plot.py (pictures)
  dataset-fashion-mnist                       # the quickstart's real data
  clang libclang-rt-14-dev                    # libFuzzer (scripts/fuzz.sh)
)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#pkgs[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: not root and no sudo; install: ${missing[*]}" >&2; exit 1; }
  sudo=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
