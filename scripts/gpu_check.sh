#!/usr/bin/env bash
# GPU checks, where a CUDA device is present: the CUDA parts against the
# CPU path. Needs a CUDA build (scripts/build.sh with nvcc on PATH).
#   scripts/gpu_check.sh [BUILD_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(readlink -f "${1:-$here/build}")
"$build/ntkd" --version | sed -n 's/^backends: /ntkd backends: /p'
if [ ! -x "$build/ntkd_gpu_check_adam" ]; then
  echo "gpu_check: $build is not a CUDA build (no ntkd_gpu_check_adam)"; exit 1
fi
# 1. Adam (issue 6, item 5): the -ftz=true kernel against the CPU update
#    with FTZ/DAZ, through the subnormal range of m and v.
"$build/ntkd_gpu_check_adam" 1000000 2000
# 2. Training on a GPU rank (issue 6, item 5): cuBLAS gradient and the
#    device Adam against the CPU path.
"$build/ntkd_gpu_check_train" 50
