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
#   scripts/gpu_bundle.sh [ARCHIVE]     (default: ntkd-gpu-bundle.tar.xz)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
archive=$(readlink -m "${1:-$here/ntkd-gpu-bundle.tar.xz}")
build="$here/build-gpu"
cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNTKD_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="75;90" >/dev/null
cmake --build "$build" -j "$(nproc)" >/dev/null
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
b="$stage/ntkd-gpu-bundle"
mkdir -p "$b/real" "$b/lib" "$b/tests"
ompi=/usr/lib/x86_64-linux-gnu/openmpi
progs=(ntkd ntkd_bench_cnn ntkd_gpu_check_adam ntkd_gpu_check_train ntkd_gpu_bench_syrk tests/test_backend)
for p in "${progs[@]}"; do cp "$build/$p" "$b/real/$(basename "$p")"; done
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
exec "\$b/lib/ld-linux-x86-64.so.2" --library-path "\$b/lib:\$b/usr/lib/x86_64-linux-gnu/openmpi/lib:/usr/local/nvidia/lib64:/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:/usr/lib64" "\$b/real/$1" "\$@"
EOF
  chmod +x "$2"
}
for p in "${progs[@]}"; do wrap "$(basename "$p")" "$b/$p"; done
wrap orterun "$b/mpirun"
wrap orted "$b/orted"
tar -C "$stage" -cJf "$archive" ntkd-gpu-bundle
echo "gpu_bundle: $archive ($(du -h "$archive" | cut -f1); $(du -sh "$b" | cut -f1) unpacked)"
