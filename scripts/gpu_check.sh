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
# 3. Kernel tiles (issue 5): the CUDA backend against the CPU backend on
#    fresh random inputs, every fully-connected kernel type, float32 (1e-5)
#    and float64 (1e-12); diagonal tiles exactly symmetric.
CK_FORK=no "$build/tests/test_backend"
# 4. Benchmarks. FC: N = 10 000, d = 3 072, 3-layer ReLU NTK, float32, one
#    rank on one GPU, against one cublasSsyrk of the same size.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 -c "import numpy as np; np.save('$work/x.npy', np.random.default_rng(1).standard_normal((10000, 3072)).astype(np.float32))"
printf '[data]\npath = x.npy\n[model]\narch = Dense Relu Dense Relu Dense\nkernel = ntk\n[compute]\ntile = 2048\nbackend = cuda\n[output]\npath = fc.ntk\n' > "$work/fc.conf"
"$build/ntkd" "$work/fc.conf" 2> "$work/fc.log" || { cat "$work/fc.log"; exit 1; }
fc_s=$(sed -n 's/.*, tiles \([0-9.]*\) s$/\1/p' "$work/fc.log")
read -r _ _ _ syrk_s syrk_gf < <("$build/ntkd_gpu_bench_syrk" 10000 3072)
printf '\n%-44s %s\n' "benchmark ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -1))" "result"
printf '%-44s %s\n' "CNTK-GAP depth 21, us per entry" "not on the GPU yet (CNN kernels run on the CPU backend)"
printf '%-44s %s\n' "CNN-Flatten depth 21, us per entry" "not on the GPU yet (CNN kernels run on the CPU backend)"
printf '%-44s %s\n' "FC N=10000 d=3072 NTK, ntkd tiles (s)" "$fc_s"
printf '%-44s %s\n' "one cublasSsyrk 10000 x 3072 (s)" "$syrk_s ($syrk_gf GFLOP/s)"
printf '%-44s %s\n' "ratio ntkd / ssyrk" "$(echo "$fc_s / $syrk_s" | bc -l | cut -c1-6)"
