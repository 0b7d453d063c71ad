#!/usr/bin/env bash
# The GPU scripts, without a GPU (docs/GPU.md):
#  1. scripts/cuda_ieee_check.sh: global CMAKE_CUDA_FLAGS (--use_fast_math,
#     -ftz=true ...) leave the PTX and cubin of fc_cuda.cu and cnn_cuda.cu
#     unchanged (in a CUDA build; ~30 s);
#  2. scripts/gpu_check.sh on this build (a CUDA one) with
#     scripts/libcuda_stub.c as the driver (CUDA 12.2, no device): every
#     step runs to the end, each failed or skipped, the table prints with
#     one row per step and the benchmark rows say why, exit non-zero;
#  3. scripts/gpu_profile.sh the same way: every step runs, none passes,
#     the report under $OUT holds the table, whose measurement rows say
#     why, exit non-zero;
#  4. every GPU script parses (bash -n); the profile's before/after
#     steps on stand-in programs (no CUDA build needed).
# The chroot rehearsal of a whole bundle (scripts/gpu_rehearse.sh) is not
# run here: it builds a bundle with the CUDA 12 wheels (minutes, 600 MB).
#   tests/gpu_scripts.sh BUILD_DIR      exit 77 when BUILD_DIR is not a CUDA build
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(readlink -f "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0 failed=0 ran=0
ok() { echo "ok: $*"; pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; failed=$((failed + 1)); }

for s in gpu_check.sh gpu_steps.sh gpu_profile.sh gpu_bundle.sh gpu_rehearse.sh cuda12_toolchain.sh cuda_ieee_check.sh; do
  bash -n "$here/scripts/$s" && ok "bash -n scripts/$s" || bad "bash -n scripts/$s"
done

# 1. In CUDA builds only (once per CI run, not again in the sanitizer's).
if [ ! -x "$build/ntkd_gpu_check_adam" ]; then rc=77
else
  bash "$here/scripts/cuda_ieee_check.sh" > "$work/ieee.log" 2>&1
  rc=$?
fi
if [ $rc = 77 ]; then echo "skipped: cuda_ieee_check (not a CUDA build, or no nvcc)"
else
  ran=1
  sed 's/^/    /' "$work/ieee.log"
  [ $rc = 0 ] && ok "cuda_ieee_check: kernel maps pinned to IEEE under global flags" || bad "cuda_ieee_check (exit $rc)"
fi

# 2.
if [ ! -x "$build/ntkd_gpu_check_adam" ]; then echo "skipped: gpu_check.sh without a GPU ($build is not a CUDA build)"
elif ! ${CC:-cc} -shared -fPIC -O1 -o "$work/libcuda.so.1" "$here/scripts/libcuda_stub.c"; then
  bad "cannot compile scripts/libcuda_stub.c"
else
  ran=1
  NTKD_GPU_CHECK_NO_BUILD=1 LD_LIBRARY_PATH="$work${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    bash "$here/scripts/gpu_check.sh" "$build" > "$work/check.log" 2>&1
  rc=$?
  [ $rc != 0 ] && ok "gpu_check.sh exits non-zero without a GPU ($rc)" || bad "gpu_check.sh exits 0 without a GPU"
  table() { awk '/^step +result$/ {t = 1; next} t && /^$/ {exit} t' "$work/check.log"; }
  nsteps=$(grep -c '^-- step: ' "$work/check.log")
  nrows=$(table | wc -l)
  [ "$nsteps" -ge 18 ] && [ "$nsteps" = "$nrows" ] && ok "gpu_check.sh: $nsteps steps, $nrows table rows" ||
    bad "gpu_check.sh: $nsteps steps, $nrows table rows"
  # (scripts/gpu_model.py reads the SASS: it needs no GPU and may pass.)
  npass=$(table | grep -v '^model: ' | grep -cE ' pass(;|$)')
  [ "$npass" = 0 ] && ok "gpu_check.sh: no GPU step passes without a GPU" || bad "gpu_check.sh: $npass steps pass without a GPU"
  table | grep -qE '^versions .*FAIL.*driver CUDA 12\.2, runtime CUDA [0-9]' &&
    ok "gpu_check.sh: the versions row names the stub's driver and the runtime" || bad "gpu_check.sh: versions row"
  grep -q '^driver 12020 12.2' "$work/check.log" && grep -q '^runtime [0-9]* ' "$work/check.log" &&
    ok "gpu_check.sh: ntkd_gpu_bench_syrk versions printed first" || bad "gpu_check.sh: no versions output"
  for r in 'CNTK-GAP depth 21, us per entry' 'CNN-Flatten depth 21, us per entry' 'one cublasSsyrk 10000 x 3072 \(s\)'; do
    grep -qE "^$r +(failed|skipped: .+)\$" "$work/check.log" && ok "gpu_check.sh: row '$r' says why" ||
      bad "gpu_check.sh: row '$r'"
  done
  [ $failed = 0 ] || sed 's/^/    /' "$work/check.log"
  # 3.
  before=$failed
  OUT="$work/profile" NTKD_GPU_CHECK_NO_BUILD=1 LD_LIBRARY_PATH="$work${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    bash "$here/scripts/gpu_profile.sh" "$build" > "$work/profile.log" 2>&1
  rc=$?
  [ $rc != 0 ] && ok "gpu_profile.sh exits non-zero without a GPU ($rc)" || bad "gpu_profile.sh exits 0 without a GPU"
  report="$work/profile/gpu-profile.txt"
  [ -s "$report" ] && cmp -s "$report" "$work/profile.log" && ok "gpu_profile.sh: the report under \$OUT is what it printed" ||
    bad "gpu_profile.sh: no report under \$OUT, or not what it printed"
  ptable() { awk '/^step +result$/ {t = 1; next} t && /^$/ {exit} t' "$report"; }
  nsteps=$(grep -c '^-- step: ' "$report")
  nrows=$(ptable | wc -l)
  [ "$nsteps" -ge 10 ] && [ "$nsteps" = "$nrows" ] && ok "gpu_profile.sh: $nsteps steps, $nrows table rows" ||
    bad "gpu_profile.sh: $nsteps steps, $nrows table rows"
  npass=$(ptable | grep -cE ' pass(;|$)')
  [ "$npass" = 0 ] && ok "gpu_profile.sh: no step passes without a GPU" || bad "gpu_profile.sh: $npass steps pass without a GPU"
  ptable | grep -qE '^versions .*FAIL.*driver CUDA 12\.2' && ok "gpu_profile.sh: the versions row names the stub's driver" ||
    bad "gpu_profile.sh: versions row"
  ptable | grep -qE '^ncu: SLICE3 .*skipped: no usable GPU' && ok "gpu_profile.sh: ncu skipped, saying why" ||
    bad "gpu_profile.sh: ncu row"
  for r in 'ncu on SLICE3 \(CNTK-GAP-21 tile\)' 'CNTK-GAP-21, us per entry' '\.\.\. NTKD_GPU_SLICE3_BLOCKS=3, us per entry' \
           'Myrtle-10, us per entry' '\.\.\. against the base build \(this/base\)' 'Myrtle-10 against the base build \(this/base\)' \
           'README WideResNet, us per entry' '\.\.\. NTKD_GPU_CHAIN=0, us per entry' 'FC N=10000 d=3072 NTK, tiles \(s\), level 1' '\.\.\. level = 0 \(tiles stored raw\)'; do
    grep -qE "^$r +(failed|skipped: .+)\$" "$report" && ok "gpu_profile.sh: row '$r' says why" ||
      bad "gpu_profile.sh: row '$r'"
  done
  [ $failed = "$before" ] || sed 's/^/    /' "$report"
fi
# 4. The profile's before/after steps (a bundle of scripts/gpu_bundle.sh
# --base REV) on stand-in programs: the versions pass, this build takes
# 90 us per entry, the base 100, 200, 120 us in turn: the median ratio is
# 0.75, the row names it, and the base is named from BUILD-INFO.
fake="$work/fake"
mkdir -p "$fake/base"
printf '#!/bin/sh\necho "backends: cpu cuda"\n' > "$fake/ntkd"
printf '#!/bin/sh\n' > "$fake/ntkd_gpu_check_adam"
printf '#!/bin/sh\necho "driver 13000 13.0"; echo "runtime 13000 13.0"\n' > "$fake/ntkd_gpu_bench_syrk"
printf '#!/bin/sh\necho 9e-05\n' > "$fake/ntkd_bench_cnn"
printf '#!/bin/sh\nn=$(cat "%s/n" 2>/dev/null || echo 0); echo $((n + 1)) > "%s/n"\ncase $((n %% 3)) in 0) echo 1e-4 ;; 1) echo 2e-4 ;; *) echo 1.2e-4 ;; esac\n' \
  "$fake" "$fake" > "$fake/base/ntkd_bench_cnn"
chmod +x "$fake"/ntkd* "$fake/base/ntkd_bench_cnn"
echo "base abc1234 a subject (base/ntkd_bench_cnn)" > "$fake/BUILD-INFO"
OUT="$work/abprofile" NTKD_GPU_CHECK_NO_BUILD=1 NTKD_GPU_CHECK_ONLY='against the base' \
  bash "$here/scripts/gpu_profile.sh" "$fake" > "$work/ab.log" 2>&1
rc=$?
[ $rc = 0 ] && ok "gpu_profile.sh: the before/after steps pass with a base build" || bad "gpu_profile.sh before/after: exit $rc"
grep -qE '^\.\.\. against the base build \(this/base\) +0\.75$' "$work/ab.log" &&
  grep -qE '^Myrtle-10 against the base build \(this/base\) +0\.75$' "$work/ab.log" &&
  ok "gpu_profile.sh: the median of three alternating ratios (0.75)" || bad "gpu_profile.sh: before/after rows"
grep -q '^base abc1234 a subject' "$work/ab.log" && ok "gpu_profile.sh: the base build named" ||
  bad "gpu_profile.sh: base build not named"
[ $failed = 0 ] || sed 's/^/    /' "$work/ab.log"

echo "$pass passed, $failed failed"
[ $failed = 0 ] || exit 1
[ $ran = 1 ] || exit 77
