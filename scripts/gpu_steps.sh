# The step framework of the GPU scripts (scripts/gpu_check.sh,
# scripts/gpu_profile.sh), sourced by them after `set -a` with here, build,
# py and work set; each defines summary() (its table), which interrupted()
# prints when the script is stopped.
steptime=${NTKD_GPU_CHECK_STEP_TIMEOUT:-600}   # seconds per step
names=() states=() current= steppid=
# run_step NAME FUNCTION [ARGS]: the function runs in a new bash with -e
# and pipefail, under a timeout (NTKD_GPU_CHECK_STEP_TIMEOUT); it may call
# skip WHY (exit 77) or note TEXT (shown in its row). A step that fails or
# hangs never stops the script.
run_step() {
  local name=$1 rc state
  shift
  current=$name
  if [ -n "${NTKD_GPU_CHECK_ONLY:-}" ] && [[ $name != versions* ]] && ! grep -Eq -- "$NTKD_GPU_CHECK_ONLY" <<< "$name"; then
    names+=("$name") states+=("skipped: not selected (NTKD_GPU_CHECK_ONLY)")
    current=
    return
  fi
  printf '\n== step: %s\n' "$name"
  rm -f "$work/skip" "$work/note"
  export -f $(declare -F | awk '{print $3}')
  # In the background so that a signal to this script is handled at once
  # (wait returns); timeout leads its own process group, stopped as a whole.
  timeout -k 10 "$steptime" bash -c 'set -eo pipefail; "$@"' step "$@" &
  steppid=$!
  wait "$steppid"
  rc=$?
  steppid=
  if [ $rc = 0 ]; then state=pass
  elif [ $rc = 77 ]; then state="skipped: $(cat "$work/skip" 2>/dev/null)"
  elif [ $rc = 124 ] || [ $rc = 137 ]; then state="FAIL (timed out after $steptime s)"
  else state="FAIL (exit $rc)"; fi
  [ -s "$work/note" ] && state="$state; $(cat "$work/note")"
  names+=("$name") states+=("$state")
  current=
  echo "-- step: $name: $state"
}
skip() { echo "$*" > "$work/skip"; echo "skipped: $*"; exit 77; }
note() { echo "$*" > "$work/note"; }
val() { cat "$work/val.$1" 2>/dev/null; }   # a benchmark value, empty when not measured
setval() { echo "$2" > "$work/val.$1"; }
calc() { "$py" -c "print('%.4g' % ($1))"; }
need_gpu() { [ -e "$work/gpu_ok" ] || skip "no usable GPU (see the versions step)"; }
need_py() { "$py" -c "import numpy" 2>/dev/null || skip "$py with numpy not found"; }
# A benchmark row's cell: KEY's value text, else the state of the step that
# makes it.
cell() { # KEY: the value's row text, else the state of the step that makes it
  local v
  v=$(val "$1")
  if [ -n "$v" ]; then echo "$2"; return; fi
  local i
  for i in "${!names[@]}"; do
    if [ "${names[$i]}" = "$3" ]; then
      case "${states[$i]}" in skipped*) echo "${states[$i]%%;*}" ;; *) echo "failed" ;; esac
      return
    fi
  done
  echo "not run"
}
us() { calc "$1 * 1e6"; }
# The steps' table (one row per step, its state); fail=1 when one failed.
# The GPU's name, from the versions step, in gpu.
step_table() {
  gpu=$(cat "$work/gpu_name" 2>/dev/null || true)
  printf '\n%-60s %s\n' "step" "result"
  fail=0
  for i in "${!names[@]}"; do
    printf '%-60s %s\n' "${names[$i]}" "${states[$i]}"
    case "${states[$i]}" in FAIL*) fail=1 ;; esac
  done
}
# Two measurements both scripts take: the fp32 peak (FMA chains) and one
# cublasSsyrk of the FC benchmark's size (10 000 x 3 072).
peak() {
  need_gpu
  local p
  p=$("$build/ntkd_gpu_bench_syrk" peak | awk '{print $2}')
  setval peak "$p"
  note "$p GFLOP/s"
}
syrk() {
  need_gpu
  local out
  out=$("$build/ntkd_gpu_bench_syrk" 10000 3072)
  echo "$out"
  setval syrk "$(echo "$out" | awk '{print $4}')"
  setval syrk_gf "$(echo "$out" | awk '{print $5}')"
  note "$(val syrk) s"
}
interrupted() {
  trap '' TERM INT   # ignored from here: stopping the step may signal back
  if [ -n "$steppid" ]; then kill -TERM -- "-$steppid" "$steppid" 2>/dev/null; wait "$steppid" 2>/dev/null; fi
  if [ -n "$current" ]; then names+=("$current") states+=("FAIL (interrupted)"); fi
  summary
  exit 1
}
trap interrupted TERM INT

# The build (a step), unless told to use BUILD_DIR as it is. NTKD_GPU_CHECK_CUDA12=1
#    builds with scripts/cuda12_toolchain.sh (the CUDA 12.9 runtime, for a
#    driver older than the nvcc here needs).
build_it() {
  local archs="75;90" arch drv rel extra=()
  arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d . || true)
  case "$arch" in ''|75|90) ;; *) archs="$archs;$arch" ;; esac
  if [ "${NTKD_GPU_CHECK_CUDA12:-0}" = 1 ]; then
    local root
    root=$("$here/scripts/cuda12_toolchain.sh" | tail -1)
    extra=(-DCMAKE_CUDA_COMPILER="$root/bin/nvcc" -DCUDAToolkit_ROOT="$root")
  else
    drv=$(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9]*\)\..*/\1/p' | head -1 || true)
    rel=$(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9]*\)\..*/\1/p' || true)
    if [ -n "$drv" ] && [ -n "$rel" ] && [ "$drv" -lt "$rel" ]; then
      echo "WARNING: the driver supports CUDA $drv, this nvcc builds CUDA $rel programs: they will not use the GPU;"
      echo "         rerun with NTKD_GPU_CHECK_CUDA12=1, or use scripts/gpu_bundle.sh's bundle (CUDA 12)"
    fi
  fi
  cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNTKD_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$archs" \
    "${extra[@]}" >"$work/build.log" 2>&1 || { tail -30 "$work/build.log"; return 1; }
  cmake --build "$build" -j "$(nproc)" >"$work/build.log" 2>&1 || { tail -30 "$work/build.log"; return 1; }
}
# Versions (a step), first: the driver (nvidia-smi and cudaDriverGetVersion), the
#    runtime this build carries (cudaRuntimeGetVersion) and cuBLAS; said
#    plainly when the driver is older than the runtime needs.
versions() {
  "$build/ntkd" --version | sed -n 's/^backends: /ntkd backends: /p' || true
  [ -f "$build/BUILD-INFO" ] && sed 's/^/bundle: /' "$build/BUILD-INFO"
  [ -x "$build/ntkd_gpu_check_adam" ] || { echo "$build is not a CUDA build (no ntkd_gpu_check_adam)"; return 1; }
  local smi
  smi=$(nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv,noheader 2>&1) ||
    smi="nvidia-smi failed: $smi"
  echo "nvidia-smi: $smi"
  case "$smi" in "nvidia-smi failed"*) ;; *) echo "$smi" | head -1 | cut -d, -f1 > "$work/gpu_name" ;; esac
  local rc=0 rt drv
  "$build/ntkd_gpu_bench_syrk" versions > "$work/versions" 2>&1 || rc=$?
  cat "$work/versions"
  rt=$(awk '$1 == "runtime" {print $3}' "$work/versions")
  drv=$(awk '$1 == "driver" {print $3}' "$work/versions")
  note "driver CUDA ${drv:-?}, runtime CUDA ${rt:-?}$(grep -q '^MISMATCH' "$work/versions" && echo ': DRIVER TOO OLD FOR THIS BUILD')"
  [ "$rc" = 0 ] && touch "$work/gpu_ok"
  return "$rc"
}
