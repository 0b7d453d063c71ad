#!/usr/bin/env bash
# GPU checks, where a CUDA device is present: builds ntkd with CUDA into
# BUILD_DIR (default build-gpu/, for the device's own architecture and
# sm_75/sm_90), then checks every CUDA part against the CPU path and ends
# with the benchmark table (docs/GPU.md). Needs nvcc and the build
# dependencies of scripts/install-deps.sh; NTKD_GPU_CHECK_NO_BUILD=1 uses
# BUILD_DIR as it is (a bundle from scripts/gpu_bundle.sh, say).
#   scripts/gpu_check.sh [BUILD_DIR]
# Every step runs whatever the earlier ones gave, and reports pass, FAIL or
# skipped (with why); the summary table at the end has one row per step
# and one per benchmark. Exit status: 0 when no step failed, 1 otherwise.
# NTKD_GPU_CHECK_ONLY=REGEX runs only the steps whose names match (grep -E;
# the versions step always runs), for a short session on a lent GPU.
set -uo pipefail
set -a   # the steps run in their own bash: variables and functions go along
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(readlink -m "${1:-$here/build-gpu}")
py=${PYTHON:-python3}                    # with numpy
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source "$here/scripts/gpu_steps.sh"
# The table: every step, then the benchmark rows (a value, or why not).
# Printed also when the script is stopped (SIGTERM, SIGINT), with the step
# in progress as interrupted.
summary() {
  step_table
  g=$(val gap) gc=$(val gap_cpu) f=$(val flat) fcpu=$(val flat_cpu) m=$(val model) pk=$(val peak)
  printf '\n%-44s %s\n' "benchmark (${gpu:-no GPU})" "result"
  printf '%-44s %s\n' "CNTK-GAP depth 21, us per entry" \
    "$(cell gap "$( [ -n "$g" ] && us "$g") (target <= 50)" "bench: CNTK-GAP-21 on the GPU")$( [ -n "$m" ] && echo "; model $m us")$( [ -n "$gc" ] && echo "; one CPU core here: $(us "$gc")")"
  printf '%-44s %s\n' "... fraction of the fp32 peak" \
    "$( if [ -n "$g" ] && [ -n "$pk" ]; then echo "$(calc "0.48 / ($g * $pk)") (peak measured: $pk GFLOP/s)"; else echo "not measured (needs the GAP-21 and peak rows)"; fi)"
  printf '%-44s %s\n' "CNN-Flatten depth 21, us per entry" \
    "$(cell flat "$( [ -n "$f" ] && us "$f")" "bench: CNN-Flatten-21 on the GPU")$( [ -n "$fcpu" ] && echo "; one CPU core here: $(us "$fcpu")")"
  printf '%-44s %s\n' "FC N=10000 d=3072 NTK, ntkd tiles (s)" "$(cell fc "$(val fc)" "bench: FC N=10000 d=3072 NTK, ntkd")"
  printf '%-44s %s\n' "one cublasSsyrk 10000 x 3072 (s)" \
    "$(cell syrk "$(val syrk) ($(val syrk_gf) GFLOP/s)" "bench: one cublasSsyrk 10000 x 3072")"
  printf '%-44s %s\n' "ratio ntkd / ssyrk" \
    "$( if [ -n "$(val fc)" ] && [ -n "$(val syrk)" ]; then calc "$(val fc) / $(val syrk)"; else echo "not measured"; fi)"
  if [ $fail = 0 ]; then echo "gpu_check: every step passed or was skipped"; else echo "gpu_check: FAILED steps above"; fi
  return $fail
}
trap interrupted TERM INT
mpirun=mpirun                             # a bundle (scripts/gpu_bundle.sh) brings its own
[ -x "$build/mpirun" ] && mpirun="$build/mpirun"

# 0. The build (gpu_steps.sh), unless NTKD_GPU_CHECK_NO_BUILD=1.
if [ "${NTKD_GPU_CHECK_NO_BUILD:-0}" != 1 ]; then run_step "build (CUDA, $build)" build_it; fi

# 1. Versions first (gpu_steps.sh).
run_step "versions (driver, runtime, cuBLAS)" versions

# 2. Adam (issue 6, item 5): the -ftz=true kernel against the CPU update
#    with FTZ/DAZ, through the subnormal range of m and v.
run_step "adam: GPU update vs CPU FTZ/DAZ" "$build/ntkd_gpu_check_adam" 1000000 2000
# 3. Training on a GPU rank (issue 6, item 5): cuBLAS gradient and the
#    device Adam against the CPU path.
run_step "train: GPU rank vs CPU path" "$build/ntkd_gpu_check_train" 50
# 4. Kernel tiles (issue 5): the CUDA backend against the CPU backend on
#    fresh random inputs (a new seed each run, printed), every
#    fully-connected kernel type and the 15 convolutional networks of
#    tests/cnn_archs.h (DIAG, SLICE, pooling, strides, CIRCULAR, VALID),
#    float32 (1e-5) and float64 (1e-12); diagonal tiles exactly symmetric.
seed=$(( $(date +%s) % 100000 ))
backend_tiles() {
  echo "test_backend seed: $seed"
  note "seed $seed"
  NTKD_TEST_SEED=$seed CK_FORK=no "$build/tests/test_backend" 2>&1 | tee "$work/backend.log"
  if grep -q "^skipped: CUDA tiles" "$work/backend.log"; then
    [ -e "$work/gpu_ok" ] || skip "no usable GPU: test_backend ran its CPU part only (passed)"
    echo "test_backend skipped its CUDA part on a machine with a usable GPU"; return 1
  fi
}
run_step "test_backend: CUDA vs CPU backend" backend_tiles
# 5. A float64 CNTK-style network on 32 x 32 x 3 images, with the SLICE3
#    kernel (39 KiB of shared memory per block) and with the generic SLICE
#    kernel (NTKD_GPU_SLICE3=0: ~66 KiB, above the 48 KiB default, so the
#    cudaFuncSetAttribute opt-in). The backend's start-up self-check
#    compares the first 4-image tile with the CPU (1e-10); then a 6-image
#    job on the GPU against the same job on the CPU (1e-12 relative).
cnn64_arch="[Conv(3, 1, SAME) Relu]*3 GlobalAvgPool Dense"
cnn64() { # NTKD_GPU_SLICE3 value
  export NTKD_GPU_SLICE3=$1
  "$build/ntkd_bench_cnn" --gpu "$cnn64_arch" 4 float64 32 32 3
  need_py
  "$py" -c "
import numpy as np
np.save('$work/im64.npy', np.random.default_rng($seed).standard_normal((6, 32, 32, 3)))"
  for b in cuda cpu; do
    printf '[data]\npath = %s\n[model]\narch = %s\n[compute]\nprecision = float64\ntile = 6\nbackend = %s\n[output]\npath = %s\n' \
      "$work/im64.npy" "$cnn64_arch" "$b" "$work/cnn64-$1-$b.ntk" > "$work/cnn64-$1-$b.conf"
    # A store of its own per kernel: a second step must compute, not resume.
    "$build/ntkd" "$work/cnn64-$1-$b.conf"
    "$build/ntkd" export "$work/cnn64-$1-$b.ntk" "$work/cnn64-$1-$b.npy"
  done
  "$py" -c "
import numpy as np
a = np.load('$work/cnn64-$1-cuda.npy'); c = np.load('$work/cnn64-$1-cpu.npy')
d = np.sqrt(np.abs(np.outer(np.diag(c), np.diag(c))))
err = float(np.max(np.abs(a - c) / np.maximum(np.abs(c), d)))
print('float64 32x32x3 GPU vs CPU: largest relative difference %.3g (bound 1e-12)' % err)
raise SystemExit(0 if err < 1e-12 else 1)"
}
run_step "CNN float64 32x32x3, SLICE3 kernel, vs CPU" cnn64 1
run_step "CNN float64 32x32x3, SLICE kernel (shared memory > 48 KiB), vs CPU" cnn64 0
#    And the CNN kernels under compute-sanitizer where the toolkit has it:
#    races in shared memory (racecheck), barriers (synccheck) and
#    out-of-bounds accesses (memcheck), on small jobs of each kind, and
#    memcheck on the float64 32 x 32 x 3 case above.
san=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
sanitize() { # TOOL
  [ -n "$san" ] || skip "compute-sanitizer not in this CUDA toolkit"
  need_gpu
  local a p s3
  # Each network with the SLICE3 kernel and with the generic SLICE one.
  for s3 in 1 0; do
    for a in "[Conv(3, 1, SAME) Relu]*3 GlobalAvgPool Dense Relu Dense" "[Conv(3, 1, SAME) Relu]*3 Flatten Dense" \
             "Conv(3, 1, SAME) Relu AvgPool(2) Conv(3, 2, SAME) Erf AvgPool(2, 1) Flatten Dense" \
             "Conv(3, 1, SAME) FanOut(2) parallel(serial(Relu Conv(3, 2, SAME) Relu Conv(3, 1, SAME)), Conv(1, 2, SAME)) FanInSum Relu GlobalAvgPool Dense"; do
      for p in float32 float64; do
        NTKD_GPU_SLICE3=$s3 "$san" --target-processes all --tool "$1" --error-exitcode 9 "$build/ntkd_bench_cnn" --gpu "$a" 6 "$p" 8 8 3 >/dev/null 2>"$work/san.log" ||
          { cat "$work/san.log"; echo "compute-sanitizer $1: $a ($p, NTKD_GPU_SLICE3=$s3) failed"; return 1; }
      done
    done
    if [ "$1" = memcheck ]; then
      NTKD_GPU_SLICE3=$s3 "$san" --target-processes all --tool memcheck --error-exitcode 9 "$build/ntkd_bench_cnn" --gpu "$cnn64_arch" 4 float64 32 32 3 \
        >/dev/null 2>"$work/san.log" ||
        { cat "$work/san.log"; echo "compute-sanitizer memcheck: $cnn64_arch (float64 32x32x3, NTKD_GPU_SLICE3=$s3) failed"; return 1; }
    fi
  done
  echo "compute-sanitizer $1: CNN kernels clean"
}
for tool in racecheck synccheck memcheck; do run_step "compute-sanitizer $tool: CNN kernels" sanitize $tool; done
# 6. Mixed jobs (issue 5, item 2): mpirun -np 4 with backend = auto puts
#    the node's first workers on its GPUs and the rest on the CPU; the
#    matrix must agree with a CPU-only run (float32, 1e-5 relative). A
#    fully-connected job and a pooled CNN on 32 x 32 x 3 images. Skipped
#    without a usable GPU: both runs would be CPU-only.
mix="$work/mix"
mixed() { # NAME DATA TILE ARCH
  need_gpu
  need_py
  mkdir -p "$mix"
  [ -e "$mix/x.npy" ] || "$py" -c "
import numpy as np
r = np.random.default_rng($seed)
np.save('$mix/x.npy', r.standard_normal((3000, 256)).astype(np.float32))
np.save('$mix/im.npy', r.standard_normal((48, 32, 32, 3)).astype(np.float32))"
  local b
  for b in auto cpu; do
    printf '[data]\npath = %s\n[model]\narch = %s\n[compute]\ntile = %s\nbackend = %s\n[output]\npath = %s-%s.ntk\n' \
      "$2" "$4" "$3" "$b" "$1" "$b" > "$mix/$1-$b.conf"
  done
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  "$mpirun" -np 4 "$build/ntkd" "$mix/$1-auto.conf" > "$mix/$1-auto.log" 2>&1 || { cat "$mix/$1-auto.log"; return 1; }
  grep -E "GPU|CPU|error" "$mix/$1-auto.log" || true
  "$mpirun" -np 4 "$build/ntkd" "$mix/$1-cpu.conf" > "$mix/$1-cpu.log" 2>&1 || { cat "$mix/$1-cpu.log"; return 1; }
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
run_step "mixed GPU/CPU job, mpirun -np 4: FC" mixed fc x.npy 256 "Dense Relu Dense Erf Dense"
run_step "mixed GPU/CPU job, mpirun -np 4: pooled CNN 32x32x3" mixed cnn im.npy 16 \
  "Conv(3, 1, SAME) Relu Conv(3, 1, SAME) Relu AvgPool(2) Conv(3, 1, SAME) Relu GlobalAvgPool Dense"

# 7. Benchmarks, the CNN kernels first (float32, 32 x 32 x 3, W_std^2 = 2
#    as in bench_cnn.sh): seconds per entry on the GPU, against the
#    measured fp32 peak (a CNTK-GAP-21 pair is ~0.48 GFLOP,
#    docs/PERFORMANCE.md), one CPU core, and scripts/gpu_model.py's
#    prediction from the SASS where that script exists. Then FC: N = 10 000,
#    d = 3 072, 3-layer ReLU NTK, float32, one rank on one GPU, against one
#    cublasSsyrk of the same size.
gap21="[Conv(3, 1, SAME) Relu]*20 GlobalAvgPool Dense"
flat21="[Conv(3, 1, SAME) Relu]*20 Flatten Dense"
bench_gpu() { # KEY ARCH N
  need_gpu
  local s
  s=$("$build/ntkd_bench_cnn" --gpu "$2" "$3")
  setval "$1" "$s"
  note "$(calc "$s * 1e6") us per entry"
}
bench_cpu() { # KEY ARCH N: one core of this machine, for scale next to the GPU's
  need_gpu
  local s
  s=$("$build/ntkd_bench_cnn" "$2" "$3")
  setval "$1" "$s"
  note "$(calc "$s * 1e6") us per entry"
}
run_step "bench: CNTK-GAP-21 on the GPU" bench_gpu gap "$gap21" 256
run_step "bench: CNN-Flatten-21 on the GPU" bench_gpu flat "$flat21" 2048
run_step "bench: CNTK-GAP-21 on one CPU core" bench_cpu gap_cpu "$gap21" 12
run_step "bench: CNN-Flatten-21 on one CPU core" bench_cpu flat_cpu "$flat21" 256
model() {
  [ -f "$here/scripts/gpu_model.py" ] || skip "scripts/gpu_model.py absent"
  command -v "$py" >/dev/null || skip "$py not found"
  "$py" "$here/scripts/gpu_model.py" "$build" > "$work/model.log" 2>&1 || { cat "$work/model.log"; return 1; }
  cat "$work/model.log"
  local m
  m=$(sed -n 's/^predicted CNTK-GAP-21 us per entry: *\([0-9.eE+-]*\).*/\1/p' "$work/model.log" | tail -1)
  [ -n "$m" ] || { echo "no 'predicted CNTK-GAP-21 us per entry: X' line"; return 1; }
  setval model "$m"
  note "model $m us"
}
run_step "model: CNTK-GAP-21 from the SASS (scripts/gpu_model.py)" model
run_step "bench: fp32 peak (FMA chains)" peak
fc_bench() {
  need_gpu
  need_py
  "$py" -c "import numpy as np; np.save('$work/x.npy', np.random.default_rng(1).standard_normal((10000, 3072)).astype(np.float32))"
  printf '[data]\npath = x.npy\n[model]\narch = Dense Relu Dense Relu Dense\nkernel = ntk\n[compute]\ntile = 2048\nbackend = cuda\n[output]\npath = fc.ntk\n' > "$work/fc.conf"
  "$build/ntkd" "$work/fc.conf" 2> "$work/fc.log" || { cat "$work/fc.log"; return 1; }
  local s
  s=$(sed -n 's/.*, tiles \([0-9.]*\) s$/\1/p' "$work/fc.log")
  [ -n "$s" ] || { cat "$work/fc.log"; echo "no tile time in ntkd's log"; return 1; }
  setval fc "$s"
  note "$s s"
}
run_step "bench: FC N=10000 d=3072 NTK, ntkd" fc_bench
run_step "bench: one cublasSsyrk 10000 x 3072" syrk

set +a
summary
exit $?
