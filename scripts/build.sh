#!/usr/bin/env bash
# Configure and build ntkd into build/ (CUDA parts when nvcc is present).
#   scripts/build.sh [extra cmake arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNTKD_CUDA=AUTO "$@"
cmake --build build -j "$(nproc)"
