#!/usr/bin/env bash
# Rehearses the GPU bundle (scripts/gpu_bundle.sh) without a GPU: in an
# empty chroot (no /lib, no /usr but a stand-in driver), with
# scripts/libcuda_stub.c as libcuda.so.1 reporting an R535 driver (CUDA
# 12.2) and no device. Shows that
#   - a CUDA 13 build says "insufficient driver" there (its runtime refuses
#     the driver before looking for a device);
#   - the bundle's CUDA 12 runtime passes the version check (its error is
#     the stub's "no CUDA-capable device");
#   - ntkd --version, a single-process job and mpirun -np 3 with a CNN job
#     run, compute on the CPU and say so;
#   - scripts/gpu_check.sh on the bundle runs every step to the end, each
#     failed or skipped, prints its table and exits non-zero.
# Needs root (chroot, mounts), a C compiler, and the bundle or what
# gpu_bundle.sh needs to make one; the CUDA 13 part needs a CUDA 13 nvcc.
#   scripts/gpu_rehearse.sh [BUNDLE.tar.xz]
# Without BUNDLE, makes one with scripts/gpu_bundle.sh (a full CUDA build:
# minutes). NTKD_REHEARSE_CUDA13=DIR: a CUDA 13 build with ntkd and
# ntkd_gpu_bench_syrk (default: built into build-rehearse13/ with the nvcc
# on PATH when that is CUDA 13; the part is skipped otherwise).
# Prints one line per check and "N passed, N failed"; exit 0 when all pass,
# 1 otherwise, 77 when it cannot run here (not root, no chroot).
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
[ "$(id -u)" = 0 ] || { echo "gpu_rehearse: needs root (chroot and mounts); skipped"; exit 77; }
chroot=$(type -P chroot) || { echo "gpu_rehearse: no chroot; skipped"; exit 77; }
cc=${CC:-cc}
work=$(mktemp -d)
R="$work/root"
mounts=()
cleanup() {
  local i
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount "${mounts[$i]}" 2>/dev/null || umount -l "${mounts[$i]}"; done
  # Never follows a mount that is still there into the host.
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT
pass=0 failed=0
ok() { echo "ok: $*"; pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; failed=$((failed + 1)); }
expect() { # DESCRIPTION FILE REGEX: FILE has a line matching REGEX
  if grep -qE "$3" "$2"; then ok "$1"; else bad "$1 (no line matching /$3/ in:)"; sed 's/^/    /' "$2" | tail -20; fi
}
expect_not() {
  if grep -qE "$3" "$2"; then bad "$1 (a line matches /$3/:)"; grep -E "$3" "$2" | sed 's/^/    /' | head; else ok "$1"; fi
}

# The bundle.
bundle=${1:-}
if [ -z "$bundle" ]; then
  bundle="$work/ntkd-gpu-bundle.tar.xz"
  "$here/scripts/gpu_bundle.sh" "$bundle" || { echo "gpu_rehearse: scripts/gpu_bundle.sh failed"; exit 1; }
fi
bundle=$(readlink -f "$bundle")
# The CUDA 13 build, for contrast.
c13=${NTKD_REHEARSE_CUDA13:-}
if [ -z "$c13" ] && command -v nvcc >/dev/null && nvcc --version | grep -q 'release 13\.'; then
  c13="$here/build-rehearse13"
  { cmake -S "$here" -B "$c13" -DNTKD_CUDA=ON -DBUILD_TESTING=OFF -DCMAKE_CUDA_ARCHITECTURES=90 &&
    cmake --build "$c13" -j "$(nproc)" --target ntkd ntkd_gpu_bench_syrk; } >"$work/c13.log" 2>&1 ||
    { tail -20 "$work/c13.log"; echo "gpu_rehearse: CUDA 13 build failed"; exit 1; }
fi

# The root: the bundle at /b, the stub driver where the bundle looks for
# the machine's, a toolbox for the scripts under /tbx with its own
# libraries (found through LD_LIBRARY_PATH, which the bundle's programs
# do not use: its loader gets --library-path), the loader at /lib64, and
# /bin/sh. Nothing else: no /lib, no /usr/lib, no ld.so.cache.
mkdir -p "$R/b" "$R/usr/local/nvidia/lib64" "$R/tbx/bin" "$R/tbx/lib" "$R/lib64" "$R/bin" "$R/tmp" "$R/proc" \
         "$R/dev" "$R/src/scripts" "$R/c13" "$R/etc" "$R/root"
chmod 1777 "$R/tmp"
tar xf "$bundle" -C "$work" && mv "$work/ntkd-gpu-bundle"/* "$R/b/" || { echo "gpu_rehearse: cannot unpack $bundle"; exit 1; }
"$cc" -shared -fPIC -O1 -Wall -o "$R/usr/local/nvidia/lib64/libcuda.so.1" "$here/scripts/libcuda_stub.c" ||
  { echo "gpu_rehearse: cannot compile the libcuda stub"; exit 1; }
tools=(bash dash env cat mktemp rm mkdir date head tail tr cut sort tee readlink dirname basename ls stat wc
       nproc sleep grep sed mawk touch id uname cp mv printf expr seq find timeout kill)
for t in "${tools[@]}"; do
  p=$(type -P "$t") || { echo "gpu_rehearse: no $t here"; exit 1; }
  cp -L "$p" "$R/tbx/bin/$t"
  ldd "$p" 2>/dev/null | awk '/=> \// {print $3}' | while read -r l; do cp -Ln "$l" "$R/tbx/lib/" 2>/dev/null; done
done
ln -s mawk "$R/tbx/bin/awk"
ln -s dash "$R/tbx/bin/sh"
ln -s /tbx/bin/dash "$R/bin/sh"
cp -L /lib64/ld-linux-x86-64.so.2 "$R/lib64/"
cp "$here/scripts/gpu_check.sh" "$R/src/scripts/"
[ -f "$here/scripts/gpu_model.py" ] && cp "$here/scripts/gpu_model.py" "$R/src/scripts/"
echo "root:x:0:0:root:/root:/bin/sh" > "$R/etc/passwd"
echo "root:x:0:" > "$R/etc/group"
echo "127.0.0.1 localhost $(uname -n)" > "$R/etc/hosts"
if [ -n "$c13" ]; then cp "$c13/ntkd" "$c13/ntkd_gpu_bench_syrk" "$R/c13/"; fi
# Mounts: /proc, and /dev as a tmpfs holding only bind-mounted null, zero,
# urandom and an shm directory (Open MPI's shared memory).
mnt() { mount "$@" && mounts+=("${!#}"); }
mnt -t proc proc "$R/proc" || { echo "gpu_rehearse: cannot mount /proc here; skipped"; exit 77; }
mnt -t tmpfs -o mode=755 tmpfs "$R/dev" || { echo "gpu_rehearse: cannot mount a tmpfs; skipped"; exit 77; }
mkdir -p "$R/dev/shm" && chmod 1777 "$R/dev/shm"
# hwloc (Open MPI) reads the CPU topology from /sys, as on any machine.
mkdir -p "$R/sys" && { mnt -t sysfs -o ro sysfs "$R/sys" 2>/dev/null || mnt --rbind -o ro /sys "$R/sys" 2>/dev/null ||
  echo "note: no /sys in the root (hwloc will say so)"; }
for d in null zero urandom random; do touch "$R/dev/$d" && mnt --bind "/dev/$d" "$R/dev/$d"; done
# Data: 24 float32 samples of 64 features, 10 images of 8 x 8 x 3, written
# without numpy (.npy version 1.0).
npy() { # FILE SHAPE COUNT
  "${PYTHON:-python3}" - "$@" <<'EOF'
import random, struct, sys
path, shape, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }" % shape
hdr += " " * ((64 - (10 + len(hdr) + 1) % 64) % 64) + "\n"
r = random.Random(7)
with open(path, "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode())
    f.write(struct.pack("<%df" % n, *[r.gauss(0, 1) for _ in range(n)]))
EOF
}
npy "$R/root/x.npy" "(24, 64)" $((24 * 64)) && npy "$R/root/im.npy" "(10, 8, 8, 3)" $((10 * 8 * 8 * 3)) ||
  { echo "gpu_rehearse: cannot write the data"; exit 1; }
printf '[data]\npath = x.npy\n[model]\narch = Dense Relu Dense\n[compute]\ntile = 8\nbackend = auto\n[output]\npath = fc.ntk\n' > "$R/root/fc.conf"
printf '[data]\npath = im.npy\n[model]\narch = Conv(3, 1, SAME) Relu AvgPool(2) Conv(3, 1, SAME) Relu GlobalAvgPool Dense\n[compute]\ntile = 4\nbackend = auto\n[output]\npath = cnn.ntk\n' > "$R/root/cnn.conf"
in_root() { # OUTFILE COMMAND...: run in the chroot, output (both streams) to OUTFILE; returns its status
  local out=$1
  shift
  env -i PATH=/tbx/bin LD_LIBRARY_PATH=/tbx/lib HOME=/root TMPDIR=/tmp ${NTKD_STUB_DRIVER:+NTKD_STUB_DRIVER=$NTKD_STUB_DRIVER} \
    ${NTKD_STUB_LOG:+NTKD_STUB_LOG=$NTKD_STUB_LOG} "$chroot" "$R" /tbx/bin/bash -c 'cd /root && "$@"' sh "$@" \
    >"$out" 2>&1
}
drv=${NTKD_STUB_DRIVER:-12020}
echo "gpu_rehearse: $bundle in an empty chroot, stub driver: CUDA $((drv / 1000)).$((drv % 1000 / 10)), no device"
echo "root holds: $(cd "$R" && ls -d -- */ | tr '\n' ' ')(/usr: only usr/local/nvidia/lib64/libcuda.so.1)"
echo "bundle: $(tr '\n' ';' < "$R/b/BUILD-INFO")"

# 0. The bundle is complete: every program and Open MPI plugin finds every
#    library it links in the bundle alone (the wrappers also search the
#    machine's directories and LD_LIBRARY_PATH, which here hold the stub
#    driver and the toolbox). Only the driver and CUDA may be missing.
in_root "$work/list" sh -c 'for f in /b/real/* $(find /b/usr -name "*.so*" -type f); do
  /b/lib/ld-linux-x86-64.so.2 --library-path /b/lib:/b/usr/lib/x86_64-linux-gnu/openmpi/lib --list "$f" |
    sed -n "s|^\t\(.*\) => not found|$f: \1|p"; done'
nobj=$(( $(ls "$R/b/real" | wc -l) + $(find "$R/b/usr" -name '*.so*' -type f | wc -l) ))
if grep -vE ': (libcuda|libnvidia|libcublas)' "$work/list" | grep -q .; then
  bad "bundle: libraries missing from the bundle:"; sed 's/^/    /' "$work/list" | head -20
else
  ok "bundle: every program and plugin ($nobj objects) finds its libraries in the bundle alone"
fi

# 1. CUDA 13, for contrast: refused at the version check.
if [ -n "$c13" ]; then
  L="/b/lib/ld-linux-x86-64.so.2 --library-path /b/lib:/b/usr/lib/x86_64-linux-gnu/openmpi/lib:/usr/local/nvidia/lib64"
  in_root "$work/c13-versions" sh -c "$L /c13/ntkd_gpu_bench_syrk versions"
  expect "CUDA 13 build: runtime 13.x" "$work/c13-versions" '^runtime 13[0-9]{3} '
  expect "CUDA 13 build: driver 12.2 seen through the stub" "$work/c13-versions" '^driver 12020 '
  expect "CUDA 13 build: insufficient driver" "$work/c13-versions" '^devices 0 error: CUDA driver version is insufficient'
  expect "CUDA 13 build: said plainly" "$work/c13-versions" '^MISMATCH: .*insufficient driver'
  in_root "$work/c13-ntkd" sh -c "NTKD_KEEP_BLAS_CORE=1 $L /c13/ntkd --version"
  expect "CUDA 13 ntkd --version: driver too old, said plainly" "$work/c13-ntkd" 'driver supports CUDA 12\.2.*needs CUDA 13'
  sed 's/^/    /' "$work/c13-versions"
else
  bad "CUDA 13 contrast: no CUDA 13 build (NTKD_REHEARSE_CUDA13, or a CUDA 13 nvcc on PATH)"
fi

# 2. The bundle's CUDA 12 runtime gets past the version check.
in_root "$work/b-versions" /b/ntkd_gpu_bench_syrk versions
expect "bundle: runtime 12.x" "$work/b-versions" '^runtime 12[0-9]{3} '
expect "bundle: past the version check, the stub's own error" "$work/b-versions" '^devices 0 error: no CUDA-capable device'
expect_not "bundle: no insufficient-driver error" "$work/b-versions" 'insufficient'
sed 's/^/    /' "$work/b-versions"
in_root "$work/b-ntkd" /b/ntkd --version
expect "bundle: ntkd --version runs" "$work/b-ntkd" '^backends: '
expect "bundle: ntkd --version names the runtime and the driver" "$work/b-ntkd" 'CUDA runtime 12\.[0-9]+.*driver'
sed 's/^/    /' "$work/b-ntkd"

# 3. Jobs with backend = auto: on the CPU, saying why.
in_root "$work/fc.log" /b/ntkd fc.conf
rc=$?
[ $rc = 0 ] && ok "bundle: single-process FC job (exit 0)" || { bad "bundle: single-process FC job (exit $rc)"; tail "$work/fc.log"; }
expect "bundle: the FC job says it computes on the CPU" "$work/fc.log" 'CPU'
in_root "$work/fc-export" /b/ntkd export fc.ntk fc.npy
[ $? = 0 ] && [ -s "$R/root/fc.npy" ] && ok "bundle: ntkd export" || { bad "bundle: ntkd export"; cat "$work/fc-export"; }
in_root "$work/cnn.log" env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 \
  /b/mpirun -np 3 /b/ntkd cnn.conf
rc=$?
[ $rc = 0 ] && ok "bundle: mpirun -np 3 CNN job (exit 0)" || { bad "bundle: mpirun -np 3 CNN job (exit $rc)"; tail -20 "$work/cnn.log"; }
expect "bundle: the CNN job says its ranks compute on the CPU" "$work/cnn.log" 'CPU'
# The fallback is the CPU backend itself: the same matrix, bit for bit.
sed 's/^backend = auto/backend = cpu/; s/^path = cnn.ntk/path = cnn-cpu.ntk/' "$R/root/cnn.conf" > "$R/root/cnn-cpu.conf"
in_root "$work/cnn-cpu.log" /b/ntkd cnn-cpu.conf
in_root "$work/cnn-export" sh -c '/b/ntkd export cnn.ntk cnn.npy && /b/ntkd export cnn-cpu.ntk cnn-cpu.npy'
if [ -s "$R/root/cnn.npy" ] && cmp -s "$R/root/cnn.npy" "$R/root/cnn-cpu.npy"; then
  ok "bundle: the mpirun -np 3 CNN matrix equals a backend = cpu run bit for bit"
else
  bad "bundle: CNN matrix from auto differs from backend = cpu (or missing)"; cat "$work/cnn-cpu.log" "$work/cnn-export"
fi
grep -E 'GPU|CPU|CUDA' "$work/fc.log" "$work/cnn.log" | sed 's/^/    /' | head -8

# 4. gpu_check.sh on the bundle: every step to the end, none passes.
in_root "$work/check.log" env NTKD_GPU_CHECK_NO_BUILD=1 bash /src/scripts/gpu_check.sh /b
rc=$?
[ $rc != 0 ] && ok "gpu_check.sh exits non-zero ($rc)" || bad "gpu_check.sh exits 0 without a GPU"
nsteps=$(grep -c '^-- step: ' "$work/check.log")
nrows=$(awk '/^step +result$/ {t = 1; next} t && /^$/ {exit} t {n++} END {print n + 0}' "$work/check.log")
[ "$nsteps" -gt 10 ] && [ "$nsteps" = "$nrows" ] && ok "gpu_check.sh: $nsteps steps run, $nrows rows in its table" ||
  bad "gpu_check.sh: $nsteps steps run, $nrows table rows"
# (scripts/gpu_model.py, where it exists, needs no GPU: its row may pass.)
npass=$(awk '/^step +result$/ {t = 1; next} t && /^$/ {exit} t && !/^model: / && / pass(;|$)/ {n++} END {print n + 0}' "$work/check.log")
[ "$npass" = 0 ] && ok "gpu_check.sh: every GPU step failed or was skipped" || bad "gpu_check.sh: $npass steps pass without a GPU"
expect "gpu_check.sh: the versions step names driver and runtime" "$work/check.log" '^versions .*FAIL.*driver CUDA 12\.2, runtime CUDA 12\.[0-9]'
expect "gpu_check.sh: the benchmark table is printed" "$work/check.log" '^CNTK-GAP depth 21, us per entry +(failed|skipped)'
expect "gpu_check.sh: the cuBLAS row says why" "$work/check.log" '^one cublasSsyrk 10000 x 3072 \(s\) +(failed|skipped)'
sed -n '/^step  *result$/,$p' "$work/check.log" | sed 's/^/    /'
echo "$pass passed, $failed failed"
[ $failed = 0 ]
