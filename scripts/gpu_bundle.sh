#!/usr/bin/env bash
# Packs a CUDA build of ntkd with everything it needs to run (its shared
# libraries down to the C library and the dynamic loader, Open MPI's
# runtime and plugins) into one archive, for a GPU machine that has the
# NVIDIA driver and the CUDA toolkit but not ntkd's build dependencies.
# There:
#   tar xf ntkd-gpu-bundle.tar.xz -C /tmp
#   NTKD_GPU_CHECK_NO_BUILD=1 scripts/gpu_check.sh /tmp/ntkd-gpu-bundle
# The bundle's programs are small scripts that start the real ones with
# the bundled loader; libcuda (the driver) and cuBLAS come from the
# machine (its ld.so.cache, /usr/local/nvidia/lib64, /usr/local/cuda/lib64).
#   scripts/gpu_bundle.sh [--cuda 12|system] [ARCHIVE]
#                                      (default: ntkd-gpu-bundle.tar.xz)
# --cuda 12 (the default): built with scripts/cuda12_toolchain.sh, so the
#   programs carry the CUDA 12.9 runtime and run on any driver >= R525
#   (a CUDA 13 runtime needs R580 or newer). Needs pip and a CUDA 13 nvcc
#   here (the front end); the wheels are fetched once.
# --cuda system: the nvcc on PATH as it is (CUDA 13 here: driver >= R580).
# --base REV: also ntkd_bench_cnn of commit REV, built the same way, as
#   base/ntkd_bench_cnn in the bundle: scripts/gpu_profile.sh then times
#   CNTK-GAP-21 and Myrtle-10 with both, alternating in one call, for a
#   before/after ratio measured on one machine (never against a figure
#   of another day). BUILD-INFO names REV.
# The archive must stay under 40 MB (it travels in a 64 MiB transfer).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cuda=${NTKD_BUNDLE_CUDA:-12}
base=
while [ $# -gt 0 ]; do
  case "$1" in
    --cuda) cuda=$2; shift 2 ;;
    --cuda=*) cuda=${1#--cuda=}; shift ;;
    --base) base=$2; shift 2 ;;
    --base=*) base=${1#--base=}; shift ;;
    -*) echo "usage: gpu_bundle.sh [--cuda 12|system] [--base REV] [ARCHIVE]" >&2; exit 2 ;;
    *) break ;;
  esac
done
archive=$(readlink -m "${1:-$here/ntkd-gpu-bundle.tar.xz}")
progs=(ntkd ntkd_bench_cnn ntkd_gpu_check_adam ntkd_gpu_check_train ntkd_gpu_bench_syrk tests/test_backend)
case "$cuda" in
  12)
    root=$("$here/scripts/cuda12_toolchain.sh" | tail -1)
    build=${NTKD_BUNDLE_BUILD:-$here/build-gpu12}
    cudaflags=(-DCMAKE_CUDA_COMPILER="$root/bin/nvcc" -DCUDAToolkit_ROOT="$root")
    want=12 ;;
  system)
    build=${NTKD_BUNDLE_BUILD:-$here/build-gpu}
    cudaflags=()
    want= ;;
  *) echo "gpu_bundle: --cuda is 12 or system, not '$cuda'" >&2; exit 2 ;;
esac
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
cuda_build() { # SOURCE BUILD TARGET...
  local src=$1 dir=$2 log
  shift 2
  log=$(mktemp)
  { cmake -S "$src" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNTKD_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="75;90" \
      "${cudaflags[@]}" && cmake --build "$dir" -j "$(nproc)" --target "$@"; } >"$log" 2>&1 ||
    { tail -40 "$log"; echo "gpu_bundle: the build in $dir failed" >&2; rm -f "$log"; exit 1; }
  grep '^-- ntkd CUDA runtime' "$log" || true
  rm -f "$log"
}
cuda_build "$here" "$build" "${progs[@]##*/}"
if [ -n "$base" ]; then
  rev=$(git -C "$here" rev-parse --verify --quiet "$base^{commit}") ||
    { echo "gpu_bundle: --base $base is not a commit of $here" >&2; exit 2; }
  # Built afresh each time, from a fixed source folder beside the build:
  # CMake's cache names its source, and a second run from a fresh temporary
  # one failed.
  rm -rf "$build-base.src" "$build-base"
  mkdir -p "$build-base.src"
  git -C "$here" archive "$rev" | tar x -C "$build-base.src"
  cuda_build "$build-base.src" "$build-base" ntkd_bench_cnn
fi
b="$stage/ntkd-gpu-bundle"
mkdir -p "$b/real" "$b/lib" "$b/tests"
ompi=/usr/lib/x86_64-linux-gnu/openmpi
for p in "${progs[@]}"; do cp "$build/$p" "$b/real/$(basename "$p")"; done
[ -z "$base" ] || { mkdir -p "$b/base"; cp "$build-base/ntkd_bench_cnn" "$b/real/base_ntkd_bench_cnn"; }
cp /usr/bin/orterun /usr/bin/orted "$b/real/"
# Open MPI's tree, relocated with OPAL_PREFIX=$b/usr (its plugins, help
# texts and default parameters).
mkdir -p "$b/usr/lib/x86_64-linux-gnu" "$b/usr/share" "$b/etc"
cp -a "$ompi" "$b/usr/lib/x86_64-linux-gnu/"
rm -rf "$b/usr/lib/x86_64-linux-gnu/openmpi/include"
cp -a /usr/share/openmpi "$b/usr/share/"
cp -a /etc/openmpi "$b/etc/"
# Shared libraries of every program and plugin, except the driver's and
# CUDA's (the machine's own must be used) and the kernel's vDSO.
skip='libcuda\.so|libcublas|libcublasLt|libnvidia|linux-vdso'
{
  for f in "$b"/real/*; do ldd "$f"; done
  find "$b/usr" -name '*.so*' -type f -exec ldd {} \; 2>/dev/null
} | awk '/=> \// {print $3} /^\t\/lib64\/ld-linux/ {print $1}' | grep -Ev "$skip" | sort -u |
  while read -r lib; do cp -L "$lib" "$b/lib/"; done
cp -L /lib64/ld-linux-x86-64.so.2 "$b/lib/"
# Wrappers: the bundled loader, the bundled libraries first, then the
# machine's driver and CUDA libraries.
wrap() { # NAME PATH_IN_BUNDLE
  cat > "$2" <<EOF
#!/bin/sh
b=\$(cd "\$(dirname "\$0")" && pwd)
while [ ! -d "\$b/real" ]; do b=\$(dirname "\$b"); done
export OPAL_PREFIX="\$b/usr" OMPI_MCA_mca_base_component_show_load_errors=0 PATH="\$b:\$PATH"
# One node, no ssh needed; Open MPI only checks that the agent exists.
export OMPI_MCA_plm_rsh_agent="\${OMPI_MCA_plm_rsh_agent:-sh}"
# ntkd's own OpenBLAS fix re-executes /proc/self/exe, which is the loader
# here: choose the kernels in this script instead.
export NTKD_KEEP_BLAS_CORE=1
if [ -z "\${OPENBLAS_CORETYPE:-}" ]; then
  if grep -q avx512f /proc/cpuinfo 2>/dev/null; then export OPENBLAS_CORETYPE=SkylakeX
  elif grep -q avx2 /proc/cpuinfo 2>/dev/null; then export OPENBLAS_CORETYPE=Haswell; fi
fi
# The loader's --library-path replaces LD_LIBRARY_PATH: the machine's is
# kept, last, for a driver or cuBLAS in a place of its own.
exec "\$b/lib/ld-linux-x86-64.so.2" --library-path "\$b/lib:\$b/usr/lib/x86_64-linux-gnu/openmpi/lib:/usr/local/nvidia/lib64:/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:/usr/lib64\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" "\$b/real/$1" "\$@"
EOF
  chmod +x "$2"
}
for p in "${progs[@]}"; do wrap "$(basename "$p")" "$b/$p"; done
[ -z "$base" ] || wrap base_ntkd_bench_cnn "$b/base/ntkd_bench_cnn"
wrap orterun "$b/mpirun"
wrap orted "$b/orted"
# The runtime the programs carry, asked of the bundled bench itself (no
# driver needed: cudaRuntimeGetVersion answers without one).
rt=$("$b/ntkd_gpu_bench_syrk" versions 2>/dev/null | awk '$1 == "runtime" {print $2; exit}' || true)
[ -n "$rt" ] || { echo "gpu_bundle: the bundled ntkd_gpu_bench_syrk does not start here" >&2; exit 1; }
if [ -n "$want" ] && [ "$((rt / 1000))" != "$want" ]; then
  echo "gpu_bundle: the programs carry CUDA runtime $rt, not CUDA $want" >&2; exit 1
fi
{
  "$b/ntkd" --version 2>/dev/null | head -1 || true
  echo "cuda_runtime $rt (needs a driver for CUDA $((rt / 1000)).0 or newer)"
  nvcc=$(sed -n 's/^CMAKE_CUDA_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")
  echo "nvcc $nvcc: $("$nvcc" --version | grep -o 'release [0-9.]*')"
  if [ "$cuda" = 12 ]; then echo "toolkit $(cat "$root/NTKD-TOOLKIT")"; fi
  echo "architectures 75;90"
  [ -z "$base" ] || echo "base $(git -C "$here" log -1 --format='%h %s' "$rev") (base/ntkd_bench_cnn)"
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ)"
} > "$b/BUILD-INFO"
tar -C "$stage" -cJf "$archive" ntkd-gpu-bundle
size=$(stat -c %s "$archive")
echo "gpu_bundle: $archive ($(du -h "$archive" | cut -f1); $(du -sh "$b" | cut -f1) unpacked; CUDA runtime $rt)"
if [ "$size" -gt $((40 * 1000 * 1000)) ]; then
  echo "gpu_bundle: the archive is over 40 MB: it must travel in a 64 MiB transfer with the work tree" >&2; exit 1
fi
