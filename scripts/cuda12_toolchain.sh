#!/usr/bin/env bash
# Lays out a CUDA toolkit root whose runtime is CUDA 12.9, for builds that
# must run on NVIDIA drivers older than R580 (any driver >= R525): the CUDA
# 13 runtime that a CUDA 13 toolkit links statically refuses those drivers
# ("insufficient driver"). Used by scripts/gpu_bundle.sh (docs/GPU.md).
#
# PyPI's CUDA 12 wheels hold no complete compiler: nvidia-cuda-nvcc-cu12
# 12.9.86 has ptxas, the crt headers, libnvvm and libdevice, but no nvcc,
# cicc, cudafe++, fatbinary or nvlink (no 12.x release of it has). So the
# root combines
#   from the CUDA 12.9 wheels (pip, pinned below): the runtime headers,
#     libcudart_static.a / libcudadevrt.a / libculibos.a, ptxas 12.9,
#     libdevice, the cuBLAS headers (cuBLAS itself is loaded at run time,
#     src/backend/cuda/cublas_dl.cu), CCCL;
#   from a CUDA 13 toolkit (the front end: NTKD_CUDA_FRONTEND, else the one
#     of the nvcc on PATH, else /usr/local/cuda, else - or with
#     NTKD_CUDA_FRONTEND=pip - the 13.0.88 wheels nvidia-cuda-nvcc,
#     nvidia-cuda-crt and nvidia-nvvm, unpacked to ROOT.front13): nvcc,
#     cudafe++, cicc and its crt headers, fatbinary, nvlink.
# Every kernel is turned into machine code by ptxas 12.9 and every binary
# carries the 12.9 runtime. cicc 13 writes PTX ISA 9.0, which ptxas 12.9
# does not take: cicc is wrapped to label its PTX 8.8 (the newest ptxas
# 12.9 knows); an instruction that 8.8 lacks makes ptxas fail, never
# compile differently. Embedded PTX is then 8.8 too (JIT only on a GPU
# without matching SASS, and only by a driver >= R575).
#
#   scripts/cuda12_toolchain.sh [ROOT]   (default: $NTKD_CUDA12_ROOT, else
#                                         ~/.cache/ntkd/cuda12)
# The last line printed is ROOT; then configure with
#   cmake -DCMAKE_CUDA_COMPILER=ROOT/bin/nvcc -DCUDAToolkit_ROOT=ROOT ...
# Wheels are fetched with pip (its cache keeps them; cuBLAS's is 580 MB, of
# which only the headers are kept). NTKD_CUDA12_WHEELS=DIR takes them from
# DIR instead (pip download --no-deps of the four packages below).
set -euo pipefail
root=$(readlink -m "${1:-${NTKD_CUDA12_ROOT:-$HOME/.cache/ntkd/cuda12}}")
py=${PYTHON:-python3}
pkgs=(nvidia-cuda-nvcc-cu12==12.9.86 nvidia-cuda-runtime-cu12==12.9.79
      nvidia-cuda-cccl-cu12==12.9.27 nvidia-cublas-cu12==12.9.3.13)
die() { echo "cuda12_toolchain: $*" >&2; exit 1; }

front=${NTKD_CUDA_FRONTEND:-}
if [ -z "$front" ]; then
  if command -v nvcc >/dev/null; then front=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")
  else front=/usr/local/cuda; fi
  # No CUDA 13 here: the front end from PyPI too.
  if ! "$front/bin/nvcc" --version 2>/dev/null | grep -q 'release 13\.'; then front=pip; fi
fi
if [ "$front" = pip ]; then
  # nvidia-cuda-nvcc (nvcc, cudafe++, fatbinary, nvlink), nvidia-cuda-crt
  # (the crt headers), nvidia-nvvm (cicc): all under nvidia/cu13/.
  front=$(readlink -m "$root.front13")
  if [ ! -x "$front/bin/nvcc" ]; then
    fw=$(mktemp -d)
    "$py" -m pip download --quiet --no-deps --only-binary=:all: -d "$fw" nvidia-cuda-nvcc==13.0.88 \
      nvidia-cuda-crt==13.0.88 nvidia-nvvm==13.0.88 || die "pip download of the CUDA 13 front end failed"
    rm -rf "$front" && mkdir -p "$front"
    "$py" - "$fw" "$front" <<'EOF2'
import glob, os, sys, zipfile
for whl in glob.glob(os.path.join(sys.argv[1], "*.whl")):
    with zipfile.ZipFile(whl) as z:
        for m in z.infolist():
            if m.is_dir() or not m.filename.startswith("nvidia/cu13/"):
                continue
            out = os.path.join(sys.argv[2], m.filename[len("nvidia/cu13/"):])
            os.makedirs(os.path.dirname(out), exist_ok=True)
            with z.open(m) as src, open(out, "wb") as dst:
                dst.write(src.read())
            os.chmod(out, (m.external_attr >> 16) & 0o777 or 0o644)
EOF2
    rm -rf "$fw"
  fi
fi
front=$(readlink -f "$front")
for f in bin/nvcc bin/cudafe++ bin/fatbinary bin/nvlink bin/bin2c nvvm/bin/cicc include/crt/host_runtime.h; do
  [ -e "$front/$f" ] || die "front end $front has no $f (set NTKD_CUDA_FRONTEND to a CUDA 13 toolkit)"
done
[ -d "$front/bin/crt" ] || die "front end $front has no bin/crt (link.stub)"
fver=$("$front/bin/nvcc" --version | sed -n 's/.*release \([0-9]*\.[0-9]*\).*/\1/p')
case "$fver" in 13.*) ;; *) die "front end $front is CUDA '$fver'; this layout is made for a CUDA 13 front end" ;; esac
stamp="front=$front $fver; ${pkgs[*]}"
if [ -f "$root/.ntkd-cuda12" ] && [ "$(cat "$root/.ntkd-cuda12")" = "$stamp" ] && [ -x "$root/bin/nvcc" ]; then
  echo "$root"; exit 0
fi

wheels=${NTKD_CUDA12_WHEELS:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -z "$wheels" ]; then
  wheels="$tmp/wheels"
  "$py" -m pip download --quiet --no-deps --only-binary=:all: -d "$wheels" "${pkgs[@]}" ||
    die "pip download of ${pkgs[*]} failed"
fi
rm -rf "$root"
mkdir -p "$root/bin" "$root/nvvm/bin" "$root/nvvm/libdevice" "$root/targets/x86_64-linux/include/cccl" \
         "$root/targets/x86_64-linux/lib"
inc="$root/targets/x86_64-linux/include" lib="$root/targets/x86_64-linux/lib"
# Unpack only what a build needs (keeping the executable bits).
"$py" - "$wheels" "$root" <<'EOF'
import glob, os, sys, zipfile
wheels, root = sys.argv[1], sys.argv[2]
inc = root + "/targets/x86_64-linux/include"; lib = root + "/targets/x86_64-linux/lib"
rules = [  # (wheel name prefix, member prefix, destination)
    ("nvidia_cuda_nvcc_cu12-", "nvidia/cuda_nvcc/bin/ptxas", root + "/bin/ptxas"),
    ("nvidia_cuda_nvcc_cu12-", "nvidia/cuda_nvcc/nvvm/libdevice/", root + "/nvvm/libdevice/"),
    ("nvidia_cuda_nvcc_cu12-", "nvidia/cuda_nvcc/include/", root + "/crt12/"),
    ("nvidia_cuda_runtime_cu12-", "nvidia/cuda_runtime/include/", inc + "/"),
    ("nvidia_cuda_runtime_cu12-", "nvidia/cuda_runtime/lib/", lib + "/"),
    ("nvidia_cuda_cccl_cu12-", "nvidia/cuda_cccl/include/", inc + "/cccl/"),
    ("nvidia_cublas_cu12-", "nvidia/cublas/include/", inc + "/"),
]
seen = set()
for whl, prefix, dest in rules:
    found = glob.glob(os.path.join(wheels, whl + "*.whl"))
    if not found:
        sys.exit("cuda12_toolchain: no %s*.whl in %s" % (whl, wheels))
    n = 0
    with zipfile.ZipFile(found[0]) as z:
        for m in z.infolist():
            if not m.filename.startswith(prefix) or m.is_dir() or m.filename.endswith("__init__.py"):
                continue
            out = dest + m.filename[len(prefix):] if dest.endswith("/") else dest
            os.makedirs(os.path.dirname(out), exist_ok=True)
            with z.open(m) as src, open(out, "wb") as dst:
                dst.write(src.read())
            os.chmod(out, (m.external_attr >> 16) & 0o777 or 0o644)
            n += 1
    if not n:
        sys.exit("cuda12_toolchain: %s has nothing under %s" % (found[0], prefix))
    seen.add(whl)
EOF
chmod +x "$root/bin/ptxas"
# The front end: the driver and its tools, and the crt headers that its
# cudafe++ and cicc generate code for (crt/host_runtime.h's launch macros
# changed in 13; the functions they call are in the 12.9 runtime).
for t in nvcc cudafe++ fatbinary nvlink bin2c; do cp "$front/bin/$t" "$root/bin/"; done
cp -r "$front/bin/crt" "$root/bin/"
rm -rf "$inc/crt"
cp -r "$front/include/crt" "$inc/crt"
cp "$front/nvvm/bin/cicc" "$root/nvvm/bin/cicc.real"
cat > "$root/nvvm/bin/cicc" <<'EOF'
#!/bin/sh
# cicc of the CUDA 13 front end, its PTX labelled ISA 8.8 for ptxas 12.9
# (scripts/cuda12_toolchain.sh).
here=$(dirname "$0")
"$here/cicc.real" "$@" || exit $?
out=
while [ $# -gt 0 ]; do
  case "$1" in -o) out=$2; shift ;; esac
  shift
done
case "$out" in
  *.ptx) sed -i 's/^\.version 9\.[0-9]*$/.version 8.8/' "$out" ;;
esac
EOF
chmod +x "$root/nvvm/bin/cicc"
cat > "$root/bin/nvcc.profile" <<'EOF'

TOP              = $(_HERE_)/..

CICC_PATH        = $(TOP)/nvvm/bin
NVVMIR_LIBRARY_DIR = $(TOP)/nvvm/libdevice

LD_LIBRARY_PATH += $(TOP)/lib:
PATH            += $(CICC_PATH):$(_HERE_):

INCLUDES        +=  "-I$(TOP)/$(_TARGET_DIR_)/include" $(_SPACE_)
SYSTEM_INCLUDES +=  "-isystem" "$(TOP)/$(_TARGET_DIR_)/include/cccl" $(_SPACE_)

LIBRARIES        =+ $(_SPACE_) "-L$(TOP)/$(_TARGET_DIR_)/lib$(_TARGET_SIZE_)/stubs" "-L$(TOP)/$(_TARGET_DIR_)/lib$(_TARGET_SIZE_)"

CUDAFE_FLAGS    +=
PTXAS_FLAGS     +=
EOF
ln -s targets/x86_64-linux/include "$root/include"
ln -s targets/x86_64-linux/lib "$root/lib64"
ln -s targets/x86_64-linux/lib "$root/lib"
ln -sf libcudart.so.12 "$lib/libcudart.so"
rm -rf "$root/crt12"   # the 12.9 crt headers: unpacked only to check they exist
cat > "$root/version.json" <<EOF
{ "cuda": { "name": "CUDA SDK", "version": "12.9.1" },
  "cuda_cudart": { "name": "CUDA Runtime (cudart)", "version": "12.9.79" },
  "ntkd_note": "runtime, headers, ptxas 12.9 from PyPI; nvcc front end $fver from $front (scripts/cuda12_toolchain.sh)" }
EOF
# Check: a kernel through the whole chain, and the runtime it links.
cat > "$tmp/probe.cu" <<'EOF'
#include <cuda_runtime.h>
#include <stdio.h>
__global__ void k(float *x, float a, float b) { x[threadIdx.x] = a / b + sqrtf(a); }
int main(void) { printf("CUDART_VERSION %d\n", CUDART_VERSION); return 0; }
EOF
"$root/bin/nvcc" -gencode arch=compute_90,code=sm_90 -o "$tmp/probe" "$tmp/probe.cu" ||
  die "the laid-out toolkit does not compile a probe kernel"
v=$("$tmp/probe")
[ "$v" = "CUDART_VERSION 12090" ] || die "probe built against '$v', not the 12.9 runtime"
# And the machine code is CUDA 12's: ptxas 12.9 writes cubins of ELF
# OS/ABI 0x33, ABI version 7; CUDA 13's ptxas writes 0x41, version 8,
# which a CUDA 12 driver does not load.
"$root/bin/nvcc" -cubin -arch=sm_90 -o "$tmp/probe.cubin" "$tmp/probe.cu" || die "no cubin from the probe"
abi=$(od -An -tx1 -j7 -N2 "$tmp/probe.cubin" | tr -d ' \n')
[ "$abi" = 3307 ] || die "the probe's cubin has ELF OS/ABI and version $abi, not 33 07 (CUDA 12)"
echo "CUDA 12.9 runtime, headers and ptxas (PyPI wheels); nvcc front end $fver ($front)" > "$root/NTKD-TOOLKIT"
echo "$stamp" > "$root/.ntkd-cuda12"
echo "cuda12_toolchain: CUDA 12.9 runtime and ptxas, nvcc front end $fver ($front)" >&2
echo "$root"
