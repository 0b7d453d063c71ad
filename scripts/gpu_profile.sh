#!/usr/bin/env bash
# One prepared GPU profile (issue 30, item 1), for one short call on a lent
# GPU: at most about 10 minutes after the build (13 steps of at most 40 s,
# ncu's at most 80 s; a few minutes on an H200 by the sizes below).
# In order:
#   - the build (as scripts/gpu_check.sh; NTKD_GPU_CHECK_NO_BUILD=1 takes
#     BUILD_DIR as it is, an unpacked bundle of scripts/gpu_bundle.sh say),
#     then the versions (driver, runtime, cuBLAS);
#   - Nsight Compute (`ncu --clock-control none`) on the SLICE3 kernel
#     (k_slice3) of a CNTK-GAP-21 tile of 32 images: speed of light,
#     launch statistics, achieved occupancy, scheduler issue-slot use, warp
#     stall reasons, memory workload (L1/L2 traffic), shared-memory bank
#     conflicts; its report files go under $OUT;
#   - per entry on the GPU: CNTK-GAP-21, CNN-Flatten-21, Myrtle-10 and
#     neural-tangents' README WideResNet (configs/wrn.conf's arch), with the
#     ratios the issue sets (Myrtle-10 <= 1/3 and the WideResNet <= 3 x
#     CNTK-GAP-21), CNTK-GAP-21 once more with NTKD_GPU_SLICE3_BLOCKS=3
#     (SLICE3 at 80 registers, 3 blocks a multiprocessor: the float32
#     kernel before 2026-12-04; the default holds it to 64 and 4),
#     the WideResNet once more with NTKD_GPU_CHAIN=0 (its
#     strided blocks on the full covariance, as before the slice runs
#     carried them), and the fp32 peak for CNTK-GAP-21's fraction of it;
#   - where the bundle carries a base build (scripts/gpu_bundle.sh --base
#     REV), CNTK-GAP-21 and Myrtle-10 with this build and the base one,
#     alternating three times: the ratio this/base (skipped without one);
#   - the FC job (N = 10 000, d = 3 072, 3-layer ReLU NTK, tile 2048, one
#     process, backend = cuda): its tiles phase at the default store level
#     and at level = 0, the GPU's busy fraction during each (nvidia-smi's
#     utilization.gpu sampled every 50 ms), and one cublasSsyrk of the
#     same size.
# Where counters cannot be read (no ncu, ERR_NVGPUCTRPERM, a driver
# without profiling) that step is skipped and says why; the timings still
# run. Every step runs whatever the earlier ones gave, under a time limit,
# and the table at the end has one row per step and one per measurement
# (a value, or why not).
#   scripts/gpu_profile.sh [BUILD_DIR]      default build-gpu/
# Environment: OUT, the folder for the report (default gpu-profile-out/):
# gpu-profile.txt (everything printed), ncu-slice3.txt and
# ncu-slice3.ncu-rep. NTKD_GPU_CHECK_ONLY=REGEX runs only the matching
# steps (the versions step always runs), NTKD_GPU_CHECK_STEP_TIMEOUT the
# limit per step (default 40 s; ncu gets twice that, the build 10 times).
# Exit status 0 when
# no step failed. Without a GPU (tests/gpu_scripts.sh, with the stub
# driver) every step fails or is skipped and the exit is 1.
set -uo pipefail
set -a   # the steps run in their own bash: variables and functions go along
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(readlink -m "${1:-$here/build-gpu}")
py=${PYTHON:-python3}                    # with numpy
out=$(readlink -m "${OUT:-$here/gpu-profile-out}")
mkdir -p "$out" || { echo "gpu_profile: cannot create $out"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
NTKD_GPU_CHECK_STEP_TIMEOUT=${NTKD_GPU_CHECK_STEP_TIMEOUT:-40}
source "$here/scripts/gpu_steps.sh"

gap21="[Conv(3, 1, SAME) Relu]*20 GlobalAvgPool Dense"
flat21="[Conv(3, 1, SAME) Relu]*20 Flatten Dense"
myrtle10="[Conv(3, 1, SAME) Relu]*3 AvgPool(2) [Conv(3, 1, SAME) Relu]*3 AvgPool(2) [Conv(3, 1, SAME) Relu]*3 GlobalAvgPool Dense"
wrn=$(sed -n 's/^arch = //p' "$here/configs/wrn.conf")

summary() {
  step_table
  local g f m w pk fc fc0 sy
  g=$(val gap) f=$(val flat) m=$(val myrtle10) w=$(val wrn) pk=$(val peak) fc=$(val fc) fc0=$(val fc0) sy=$(val syrk)
  printf '\n%-44s %s\n' "measurement (${gpu:-no GPU})" "result"
  printf '%-44s %s\n' "ncu on SLICE3 (CNTK-GAP-21 tile)" "$(cell ncu "read: $out/ncu-slice3.txt" "ncu: SLICE3 of a CNTK-GAP-21 tile")"
  printf '%-44s %s\n' "CNTK-GAP-21, us per entry" "$(cell gap "$( [ -n "$g" ] && us "$g") (target <= 50, stretch 30)" "time: CNTK-GAP-21")"
  printf '%-44s %s\n' "... fraction of the fp32 peak" \
    "$( if [ -n "$g" ] && [ -n "$pk" ]; then echo "$(calc "0.48 / ($g * $pk)") (peak measured: $pk GFLOP/s)"; else echo "not measured (needs the CNTK-GAP-21 and peak rows)"; fi)"
  printf '%-44s %s\n' "... NTKD_GPU_SLICE3_BLOCKS=3, us per entry" \
    "$(cell gap_b3 "$( [ -n "$(val gap_b3)" ] && us "$(val gap_b3)")$( [ -n "$(val gap_b3)" ] && [ -n "$g" ] && echo "; the default takes $(calc "$g / $(val gap_b3)") of this")" "time: CNTK-GAP-21, NTKD_GPU_SLICE3_BLOCKS=3")"
  printf '%-44s %s\n' "... against the base build (this/base)" \
    "$(cell gap_ab "$(val gap_ab)" "time: CNTK-GAP-21 against the base build, alternating")"
  printf '%-44s %s\n' "CNN-Flatten-21, us per entry" "$(cell flat "$( [ -n "$f" ] && us "$f")" "time: CNN-Flatten-21")"
  printf '%-44s %s\n' "Myrtle-10, us per entry" \
    "$(cell myrtle10 "$( [ -n "$m" ] && us "$m")$( [ -n "$m" ] && [ -n "$g" ] && echo "; $(calc "$m / $g") of CNTK-GAP-21 (target <= 1/3)")" "time: Myrtle-10")"
  printf '%-44s %s\n' "Myrtle-10 against the base build (this/base)" \
    "$(cell myrtle10_ab "$(val myrtle10_ab)" "time: Myrtle-10 against the base build, alternating")"
  printf '%-44s %s\n' "README WideResNet, us per entry" \
    "$(cell wrn "$( [ -n "$w" ] && us "$w")$( [ -n "$w" ] && [ -n "$g" ] && echo "; $(calc "$w / $g") x CNTK-GAP-21 (target <= 3)")" "time: README WideResNet")"
  printf '%-44s %s\n' "... NTKD_GPU_CHAIN=0, us per entry" \
    "$(cell wrn0 "$( [ -n "$(val wrn0)" ] && us "$(val wrn0)")$( [ -n "$(val wrn0)" ] && [ -n "$w" ] && echo "; the chained runs take $(calc "$w / $(val wrn0)") of this")" "time: README WideResNet, NTKD_GPU_CHAIN=0")"
  printf '%-44s %s\n' "FC N=10000 d=3072 NTK, tiles (s), level 1" \
    "$(cell fc "$fc s, GPU busy $(val fc_busy) %" "FC job, default store level")"
  printf '%-44s %s\n' "... level = 0 (tiles stored raw)" \
    "$(cell fc0 "$fc0 s, GPU busy $(val fc0_busy) %" "FC job, level = 0")"
  printf '%-44s %s\n' "one cublasSsyrk 10000 x 3072 (s)" "$(cell syrk "$sy ($(val syrk_gf) GFLOP/s)" "cublasSsyrk 10000 x 3072")"
  printf '%-44s %s\n' "ratio FC tiles / ssyrk (level 1, level 0)" \
    "$( if [ -n "$sy" ] && { [ -n "$fc" ] || [ -n "$fc0" ]; }; then echo "$( [ -n "$fc" ] && calc "$fc / $sy"), $( [ -n "$fc0" ] && calc "$fc0 / $sy")"; else echo "not measured"; fi)"
  echo "report: $out/gpu-profile.txt"
  if [ $fail = 0 ]; then echo "gpu_profile: every step passed or was skipped"; else echo "gpu_profile: FAILED steps above"; fi
  return $fail
}

# ncu on the SLICE3 kernel: the first three launches of a 32-image tile
# (its capture pass and the band of the tile's pairs), each section the
# issue asks for, and the shared-memory bank conflicts by name.
ncu_slice3() {
  need_gpu
  local ncu
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1 || true)
  [ -n "$ncu" ] || skip "ncu not found (Nsight Compute not installed): timings only"
  "$ncu" --version | tail -1
  local rc=0
  "$ncu" --clock-control none -k regex:k_slice3 --launch-count 3 \
    --section SpeedOfLight --section LaunchStats --section Occupancy --section SchedulerStats \
    --section WarpStateStats --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
    --section SourceCounters \
    --metrics l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,smsp__issue_active.avg.pct_of_peak_sustained_active \
    -f -o "$out/ncu-slice3" "$build/ntkd_bench_cnn" --gpu "$gap21" 32 > "$out/ncu-slice3.txt" 2>&1 || rc=$?
  # With -o ncu prints no section: the report is read back into the text
  # (every section, then the three metrics by name).
  if [ -s "$out/ncu-slice3.ncu-rep" ]; then
    "$ncu" --import "$out/ncu-slice3.ncu-rep" --page details >> "$out/ncu-slice3.txt" 2>&1 || rc=$?
    "$ncu" --import "$out/ncu-slice3.ncu-rep" --page raw --csv \
      --metrics l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,smsp__issue_active.avg.pct_of_peak_sustained_active \
      >> "$out/ncu-slice3.txt" 2>&1 || rc=$?
  fi
  if grep -qE "ERR_NVGPUCTRPERM|permission to access NVIDIA GPU Performance Counters|profiling is not supported" "$out/ncu-slice3.txt"; then
    grep -E "ERR_|permission|not supported" "$out/ncu-slice3.txt" | head -3
    skip "the GPU's counters cannot be read here (ncu says so above): timings only"
  fi
  if [ $rc != 0 ] || ! grep -q "k_slice3" "$out/ncu-slice3.txt"; then
    tail -30 "$out/ncu-slice3.txt"
    echo "ncu failed (exit $rc) or profiled no k_slice3 launch"
    return 1
  fi
  grep -E "k_slice3|Achieved Occupancy|Theoretical Occupancy|Registers Per Thread|Block Limit|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Stall|L1/TEX Hit|L2 Hit|Mem Busy|Max Bandwidth|Shared|bank_conflicts|issue_active|Duration|Compute \(SM\)" "$out/ncu-slice3.txt" | head -120
  setval ncu 1
  note "report in $out/ncu-slice3.txt"
}

time_gpu() { # KEY ARCH N: seconds per entry of one tile of N images on the GPU
  need_gpu
  local s
  s=$("$build/ntkd_bench_cnn" --gpu "$2" "$3")
  setval "$1" "$s"
  note "$(calc "$s * 1e6") us per entry"
}

# The same with the strided Convs and blocks on the full covariance
# between slice runs, as before the runs carried them (cnn_gpu.c).
time_gpu_unchained() { NTKD_GPU_CHAIN=0 time_gpu "$@"; }

# SLICE3 at 80 registers, 3 blocks a multiprocessor: the float32 kernel
# before 2026-12-04 (cnn_cuda.cu; the default holds it to 64 and 4).
time_gpu_b3() { NTKD_GPU_SLICE3_BLOCKS=3 time_gpu "$@"; }

# Against the base build the bundle may carry (scripts/gpu_bundle.sh
# --base REV: base/ntkd_bench_cnn): three pairs, this build first then
# the base, on the same GPU in the same call; the median of the three
# ratios this/base (below 1: this build is faster).
time_ab() { # KEY ARCH N
  need_gpu
  [ -x "$build/base/ntkd_bench_cnn" ] || skip "no base build (bundle it with scripts/gpu_bundle.sh --base REV)"
  grep '^base ' "$build/BUILD-INFO" 2>/dev/null || true
  local i a b r=()
  for i in 1 2 3; do
    a=$("$build/ntkd_bench_cnn" --gpu "$2" "$3")
    b=$("$build/base/ntkd_bench_cnn" --gpu "$2" "$3")
    echo "pair $i: this build $(calc "$a * 1e6") us, base $(calc "$b * 1e6") us per entry"
    r+=("$(calc "$a / $b")")
  done
  setval "$1" "$(printf '%s\n' "${r[@]}" | sort -g | sed -n 2p)"
  note "this/base $(val "$1") (median of ${r[*]})"
}

# The FC job with the GPU's busy fraction: nvidia-smi samples
# utilization.gpu (the share of the last sample period with a kernel
# running) every 50 ms while the job runs; the mean over the samples.
fc_job() { # KEY LEVEL
  need_gpu
  need_py
  [ -e "$work/x.npy" ] || "$py" -c "import numpy as np; np.save('$work/x.npy', np.random.default_rng(1).standard_normal((10000, 3072)).astype(np.float32))"
  printf '[data]\npath = x.npy\n[model]\narch = Dense Relu Dense Relu Dense\nkernel = ntk\n[compute]\ntile = 2048\nbackend = cuda\n[output]\npath = %s.ntk\nlevel = %s\n' \
    "$1" "$2" > "$work/$1.conf"
  local smi
  nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -lms 50 > "$work/$1.util" 2>/dev/null &
  smi=$!
  local rc=0
  "$build/ntkd" "$work/$1.conf" 2> "$work/$1.log" || rc=$?
  kill "$smi" 2>/dev/null
  wait "$smi" 2>/dev/null
  cat "$work/$1.log"
  [ $rc = 0 ] || { echo "the FC job failed (exit $rc)"; return 1; }
  local s busy
  s=$(sed -n 's/.*, tiles \([0-9.]*\) s$/\1/p' "$work/$1.log")
  [ -n "$s" ] || { echo "no tile time in ntkd's log"; return 1; }
  busy=$(awk '$1 ~ /^[0-9.]+$/ {s += $1; n++} END {if (n) printf "%.0f", s / n}' "$work/$1.util")
  setval "$1" "$s"
  setval "$1_busy" "${busy:-?}"
  note "$s s, GPU busy ${busy:-?} % ($(wc -l < "$work/$1.util") samples)"
}


main() {
  trap interrupted TERM INT
  echo "gpu_profile: $(date -u +%Y-%m-%dT%H:%M:%SZ), build $build, report in $out"
  git -C "$here" log -1 --format='ntkd commit %h %s' 2>/dev/null || true
  if [ "${NTKD_GPU_CHECK_NO_BUILD:-0}" != 1 ]; then
    local st=$steptime
    steptime=$((st * 10)) # a CUDA build takes minutes
    run_step "build (CUDA, $build)" build_it
    steptime=$st
  fi
  run_step "versions (driver, runtime, cuBLAS)" versions
  local st=$steptime
  steptime=$((st * 2))
  run_step "ncu: SLICE3 of a CNTK-GAP-21 tile" ncu_slice3
  steptime=$st
  run_step "time: CNTK-GAP-21" time_gpu gap "$gap21" 256
  run_step "time: CNTK-GAP-21, NTKD_GPU_SLICE3_BLOCKS=3" time_gpu_b3 gap_b3 "$gap21" 256
  run_step "time: CNTK-GAP-21 against the base build, alternating" time_ab gap_ab "$gap21" 256
  run_step "time: CNN-Flatten-21" time_gpu flat "$flat21" 2048
  run_step "time: Myrtle-10" time_gpu myrtle10 "$myrtle10" 256
  run_step "time: Myrtle-10 against the base build, alternating" time_ab myrtle10_ab "$myrtle10" 256
  run_step "time: README WideResNet" time_gpu wrn "$wrn" 64
  run_step "time: README WideResNet, NTKD_GPU_CHAIN=0" time_gpu_unchained wrn0 "$wrn" 64
  run_step "fp32 peak (FMA chains)" peak
  run_step "FC job, default store level" fc_job fc 1
  run_step "FC job, level = 0" fc_job fc0 0
  run_step "cublasSsyrk 10000 x 3072" syrk
  summary
}
set +a
main 2>&1 | tee "$out/gpu-profile.txt"
exit "${PIPESTATUS[0]}"
