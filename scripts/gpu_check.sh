#!/usr/bin/env bash
# GPU checks, where a CUDA device is present: builds ntkd with CUDA into
# BUILD_DIR (default build-gpu/, for the device's own architecture and
# sm_75/sm_90), then checks every CUDA part against the CPU path and ends
# with the benchmark table (docs/GPU.md). Needs nvcc and the build
# dependencies of scripts/install-deps.sh; NTKD_GPU_CHECK_NO_BUILD=1 uses
# BUILD_DIR as it is.
#   scripts/gpu_check.sh [BUILD_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(readlink -m "${1:-$here/build-gpu}")
if [ "${NTKD_GPU_CHECK_NO_BUILD:-0}" != 1 ]; then
  archs="75;90" arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d . || true)
  case "$arch" in ''|75|90) ;; *) archs="$archs;$arch" ;; esac
  cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNTKD_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$archs" >/dev/null
  cmake --build "$build" -j "$(nproc)" >/dev/null
fi
py=${PYTHON:-python3}                    # with numpy
mpirun=mpirun                             # a bundle (scripts/gpu_bundle.sh) brings its own
[ -x "$build/mpirun" ] && mpirun="$build/mpirun"
calc() { "$py" -c "print('%.4g' % ($1))"; }
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
#    fresh random inputs (a new seed each run, printed), every
#    fully-connected kernel type and the 15 convolutional networks of
#    tests/cnn_archs.h (DIAG, SLICE, pooling, strides, CIRCULAR, VALID),
#    float32 (1e-5) and float64 (1e-12); diagonal tiles exactly symmetric.
seed=$(( $(date +%s) % 100000 ))
echo "test_backend seed: $seed"
NTKD_TEST_SEED=$seed CK_FORK=no "$build/tests/test_backend"
#    And the CNN kernels under compute-sanitizer where the toolkit has it:
#    races in shared memory (racecheck), barriers (synccheck) and
#    out-of-bounds accesses (memcheck), on small jobs of each kind.
san=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
if [ -n "$san" ]; then
  for tool in racecheck synccheck memcheck; do
    for a in "[Conv(3, 1, SAME) Relu]*3 GlobalAvgPool Dense Relu Dense" "[Conv(3, 1, SAME) Relu]*3 Flatten Dense" \
             "Conv(3, 1, SAME) Relu AvgPool(2) Conv(3, 2, SAME) Erf AvgPool(2, 1) Flatten Dense"; do
      for p in float32 float64; do
        "$san" --tool "$tool" --error-exitcode 9 "$build/ntkd_bench_cnn" --gpu "$a" 6 "$p" 8 8 3 >/dev/null 2>"$build/san.log" ||
          { cat "$build/san.log"; echo "compute-sanitizer $tool: $a ($p) failed"; exit 1; }
      done
    done
    echo "compute-sanitizer $tool: CNN kernels clean"
  done
else
  echo "skipped: compute-sanitizer (not in this CUDA toolkit)"
fi
# 4. Mixed jobs (issue 5, item 2): mpirun -np 4 with backend = auto puts
#    the node's first workers on its GPUs and the rest on the CPU; the
#    matrix must agree with a CPU-only run (float32, 1e-5 relative). A
#    fully-connected job and a pooled CNN on 32 x 32 x 3 images.
mix=$(mktemp -d)
"$py" -c "
import numpy as np
r = np.random.default_rng($seed)
np.save('$mix/x.npy', r.standard_normal((3000, 256)).astype(np.float32))
np.save('$mix/im.npy', r.standard_normal((48, 32, 32, 3)).astype(np.float32))"
mixed() { # NAME DATA TILE ARCH
  for b in auto cpu; do
    printf '[data]\npath = %s\n[model]\narch = %s\n[compute]\ntile = %s\nbackend = %s\n[output]\npath = %s-%s.ntk\n' \
      "$2" "$4" "$3" "$b" "$1" "$b" > "$mix/$1-$b.conf"
  done
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 \
    "$mpirun" -np 4 "$build/ntkd" "$mix/$1-auto.conf" 2>&1 | grep -E "GPU|CPU|error" || true
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 \
    "$mpirun" -np 4 "$build/ntkd" "$mix/$1-cpu.conf" >/dev/null 2>&1
  "$build/ntkd" export "$mix/$1-auto.ntk" "$mix/$1-auto.npy" 2>/dev/null
  "$build/ntkd" export "$mix/$1-cpu.ntk" "$mix/$1-cpu.npy" 2>/dev/null
  "$py" -c "
import numpy as np
a = np.load('$mix/$1-auto.npy').astype(np.float64); c = np.load('$mix/$1-cpu.npy').astype(np.float64)
d = np.sqrt(np.abs(np.outer(np.diag(c), np.diag(c))))
err = float(np.max(np.abs(a - c) / np.maximum(np.abs(c), d)))
print('mixed GPU/CPU job ($1) vs CPU-only: largest relative difference %.3g (bound 1e-5)' % err)
raise SystemExit(0 if err < 1e-5 else 1)"
}
mixed fc x.npy 256 "Dense Relu Dense Erf Dense"
mixed cnn im.npy 16 "Conv(3, 1, SAME) Relu Conv(3, 1, SAME) Relu AvgPool(2) Conv(3, 1, SAME) Relu GlobalAvgPool Dense"
rm -rf "$mix"
# 5. Benchmarks. FC: N = 10 000, d = 3 072, 3-layer ReLU NTK, float32, one
#    rank on one GPU, against one cublasSsyrk of the same size.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$py" -c "import numpy as np; np.save('$work/x.npy', np.random.default_rng(1).standard_normal((10000, 3072)).astype(np.float32))"
printf '[data]\npath = x.npy\n[model]\narch = Dense Relu Dense Relu Dense\nkernel = ntk\n[compute]\ntile = 2048\nbackend = cuda\n[output]\npath = fc.ntk\n' > "$work/fc.conf"
"$build/ntkd" "$work/fc.conf" 2> "$work/fc.log" || { cat "$work/fc.log"; exit 1; }
fc_s=$(sed -n 's/.*, tiles \([0-9.]*\) s$/\1/p' "$work/fc.log")
read -r _ _ _ syrk_s syrk_gf < <("$build/ntkd_gpu_bench_syrk" 10000 3072)
#    CNN kernels (float32, 32 x 32 x 3, W_std^2 = 2 as in bench_cnn.sh):
#    seconds per entry on the GPU, against the measured fp32 peak (a
#    CNTK-GAP-21 pair is ~0.48 GFLOP, docs/PERFORMANCE.md) and one CPU core.
read -r _ peak_gf < <("$build/ntkd_gpu_bench_syrk" peak)
gap21="[Conv(3, 1, SAME) Relu]*20 GlobalAvgPool Dense"
flat21="[Conv(3, 1, SAME) Relu]*20 Flatten Dense"
gap_s=$("$build/ntkd_bench_cnn" --gpu "$gap21" 256)
flat_s=$("$build/ntkd_bench_cnn" --gpu "$flat21" 2048)
gap_cpu=$("$build/ntkd_bench_cnn" "$gap21" 12)
flat_cpu=$("$build/ntkd_bench_cnn" "$flat21" 256)
us() { calc "$1 * 1e6"; }
printf '\n%-44s %s\n' "benchmark ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -1))" "result"
printf '%-44s %s\n' "CNTK-GAP depth 21, us per entry" "$(us "$gap_s") (target <= 50; one CPU core here: $(us "$gap_cpu"))"
printf '%-44s %s\n' "... fraction of the fp32 peak" "$(calc "0.48 / ($gap_s * $peak_gf)") (peak measured: $peak_gf GFLOP/s)"
printf '%-44s %s\n' "CNN-Flatten depth 21, us per entry" "$(us "$flat_s") (one CPU core here: $(us "$flat_cpu"))"
printf '%-44s %s\n' "FC N=10000 d=3072 NTK, ntkd tiles (s)" "$fc_s"
printf '%-44s %s\n' "one cublasSsyrk 10000 x 3072 (s)" "$syrk_s ($syrk_gf GFLOP/s)"
printf '%-44s %s\n' "ratio ntkd / ssyrk" "$(calc "$fc_s / $syrk_s")"
