#!/usr/bin/env bash
# GPU placement end to end without a GPU (docs/GPU.md, "Placement"): the
# test setting NTKD_TEST_GPU_UUIDS gives each rank a made-up list of
# devices, so mpirun -np 4 shows the placement lines, the coordinator
# taking none, the maximum matching and a rank whose driver fails; the
# CUDA backend then cannot start here, `auto` falls back to the CPU and
# says so, and the matrix equals a CPU-only run. backend = cuda refusals
# (a rank without a GPU, a network without GPU code),
# a training job (rank 0 trains too), and a driver too old for this
# build's CUDA (a stand-in libcuda.so.1) end the script.
# Usage: tests/e2e_place.sh path/to/ntkd
set -u
NTKD=$(readlink -f "${1:?usage: e2e_place.sh path/to/ntkd}")
export OPENBLAS_NUM_THREADS=1
source "$(dirname "$(readlink -f "$0")")/e2e_lib.sh"

$PY - <<'PYEOF'
import numpy as np
r = np.random.default_rng(11)
np.save('x.npy', r.standard_normal((240, 16)).astype(np.float32))
np.save('tx.npy', r.standard_normal((200, 8)).astype(np.float32))
np.save('ty.npy', r.integers(0, 3, 200).astype(np.int32))
np.save('vx.npy', r.standard_normal((50, 8)).astype(np.float32))
np.save('vy.npy', r.integers(0, 3, 50).astype(np.int32))
PYEOF
kjob() { # kjob NAME BACKEND
  printf '[data]\npath = x.npy\n[model]\narch = Dense Relu Dense\n[compute]\ntile = 64\nbackend = %s\n[output]\npath = %s.ntk\n' \
    "$2" "$1" > "$1.conf"
}
host=$(hostname)
cuda_build=0
"$NTKD" --version | grep -q "cuda: compiled in" && cuda_build=1

kjob ref cpu
expect_rc 0 "CPU-only reference run" "$NTKD" ref.conf
"$NTKD" export ref.ntk ref.npy >/dev/null 2>&1

# Rank 0 coordinates (sees Z, takes nothing); rank 1 sees A and B, rank 2
# only A, rank 3's driver fails. Greedy alone would give rank 1 A and
# leave rank 2 without; the table moves rank 1 to B (its index 1).
export NTKD_TEST_GPU_UUIDS='Z;A,B;A;!'
kjob mix auto
expect_rc 0 "mpirun -np 4, backend = auto, made-up GPUs" mpirun -np 4 "$NTKD" mix.conf
check "the test setting is announced" has "test setting NTKD_TEST_GPU_UUIDS=Z;A,B;A;!" err.log
check "rank 1 says which GPU: its index 1, B" has "ntkd: rank 1 on $host: GPU 1 of the 2 it sees: test GPU B, GPU-42000000, PCI test" err.log
check "rank 2 says which GPU: its index 0, A" has "ntkd: rank 2 on $host: GPU 0 of the 1 it sees: test GPU A, GPU-41000000" err.log
check "the coordinator takes no GPU" bash -c "! grep -q 'ntkd: rank 0 on' err.log"
check "rank 3 (driver failed) takes no GPU" bash -c "! grep -q 'ntkd: rank 3 on' err.log"
check "... and says why it computes on the CPU" has "ntkd: rank 3 cannot list its GPUs (the driver failed (NTKD_TEST_GPU_UUIDS)): computing on the CPU" err.log
check "each GPU rank falls back to the CPU, saying so" \
  bash -c "[ \$(grep -c 'computing on the CPU instead' err.log) = 2 ] && grep -q 'rank 1: .*computing on the CPU instead' err.log"
check "rank 0 sums the placement up in one line" \
  has "ntkd: placement: 0 of 3 workers on GPUs (CUDA), 3 on the CPU; 2 distinct GPUs seen on 1 node; 2 GPU workers fell back to the CPU" err.log
"$NTKD" export mix.ntk mix.npy >/dev/null 2>&1
check "... and the matrix equals the CPU-only run" cmp -s ref.npy mix.npy

# backend = cuda: the rank without a GPU stops the job before any work.
kjob cu cuda
expect_rc 2 "backend = cuda, a rank whose driver fails" mpirun -np 4 "$NTKD" cu.conf
check "... names the rank and why" has "rank 3 gets no GPU: node $host has 2 distinct GPUs visible to its 3 computing ranks; this rank cannot list its GPUs: the driver failed" err.log
check "... says what to do" has "Start at most one worker per GPU (on the coordinator's node one rank more" err.log
check "... before a store is made" [ ! -e cu.ntk ]
# --gpus-per-node=1 with a coordinator and 2 workers: one GPU for two.
NTKD_TEST_GPU_UUIDS='A;A;A' expect_rc 2 "backend = cuda, one GPU for 2 workers" mpirun -np 3 "$NTKD" cu.conf
check "... rank 2 refused: 1 distinct GPU for 2 computing ranks" \
  has "rank 2 gets no GPU: node $host has 1 distinct GPU visible to its 2 computing ranks; this rank sees 1 of them, all taken" err.log
check "... rank 1 is not refused" bash -c "! grep -q 'rank 1 gets no GPU' err.log"
# --gpus-per-task: each worker its own GPU as index 0; the devices are
# made up, so the CUDA backend fails to start and cuda stops the job.
NTKD_TEST_GPU_UUIDS='A;B;C;D' mpirun -np 4 "$NTKD" cu.conf >out.log 2>err.log
rc=$?
check "backend = cuda, one GPU per task: every worker on its index 0" \
  bash -c "for r in 1 2 3; do grep -q \"ntkd: rank \$r on $host: GPU 0 of the 1 it sees\" err.log || exit 1; done"
check "... and a GPU that cannot start stops the job (exit $rc)" [ "$rc" != 0 ]
# ElementwiseNumerical has no GPU code: cuda refuses the network before
# any work, auto computes it on the CPU, saying why.
printf '[data]\npath = x.npy\n[model]\narch = Dense ElementwiseNumerical(jnp.tanh, 9) Dense\n[compute]\ntile = 64\nbackend = cuda\n[output]\npath = num.ntk\n' > num.conf
NTKD_TEST_GPU_UUIDS='A' expect_rc 2 "backend = cuda, ElementwiseNumerical" "$NTKD" num.conf
check "... names the layer and why" has "backend = cuda: layer 2, ElementwiseNumerical(Tanh), is computed on CPUs only" err.log
check "... before a store is made" [ ! -e num.ntk ]
sed -i 's/^backend = cuda/backend = auto/' num.conf
NTKD_TEST_GPU_UUIDS='A' expect_rc 0 "backend = auto, ElementwiseNumerical, a made-up GPU" "$NTKD" num.conf
check "... computes on the CPU, saying why" has "ntkd: layer 2, ElementwiseNumerical(Tanh), is computed on CPUs only: computing on the CPU" err.log
unset NTKD_TEST_GPU_UUIDS

# Training: every rank trains, rank 0 too: with one GPU for three ranks,
# rank 0 takes it; its fallback trains on the CPU as device = cpu does.
tjob() { # tjob NAME DEVICE
  printf '[data]\npath = tx.npy\nlabels = ty.npy\n[validation]\npath = vx.npy\nlabels = vy.npy\n' > "$1.conf"
  printf '[train]\nlayers = 8 16 3\nbatch = 20\nepochs = 2\nseed = 5\ndevice = %s\nlog = %s.jsonl\n' "$2" "$1" >> "$1.conf"
}
tjob tcpu cpu
expect_rc 0 "training, device = cpu, 3 ranks" mpirun -np 3 "$NTKD" tcpu.conf
tjob tauto auto
NTKD_TEST_GPU_UUIDS='A;A;!' expect_rc 0 "training, device = auto, 3 ranks, one made-up GPU, a failing driver" mpirun -np 3 "$NTKD" tauto.conf
check "rank 0 trains on the GPU" has "ntkd: rank 0 on $host: GPU 0 of the 1 it sees: test GPU A" err.log
check "ranks 1 and 2 do not" bash -c "! grep -q 'ntkd: rank [12] on' err.log"
check "rank 2 says its driver failed" has "ntkd: rank 2 cannot list its GPUs (the driver failed (NTKD_TEST_GPU_UUIDS)): training on the CPU" err.log
check "the GPU that cannot start leaves rank 0 on the CPU, saying so" has "rank 0, GPU 0: .*training on the CPU instead" err.log
check "rank 0 sums the placement up" has "ntkd: placement: 0 of 3 ranks train on GPUs (CUDA), 3 on the CPU; 1 distinct GPU seen on 1 node; 1 GPU rank fell back to the CPU" err.log
check "... and the same losses and accuracies, bit for bit, as device = cpu" $PY -c "
import json
a, b = ([{k: v for k, v in json.loads(l).items() if k != 'elapsed_time'} for l in open(f)] for f in ('tcpu.jsonl', 'tauto.jsonl'))
assert a == b and len(a) == 2, (a, b)"
tjob tcuda cuda
NTKD_TEST_GPU_UUIDS='A;A' expect_rc 2 "training, device = cuda, 2 ranks, one GPU" mpirun -np 2 "$NTKD" tcuda.conf
check "... rank 1 refused, saying every rank trains" has "rank 1 gets no GPU: node $host has 1 distinct GPU visible to its 2 ranks; this rank sees 1 of them, all taken by the ranks before it. Start at most one rank per GPU (every rank trains, rank 0 too)" err.log

# A driver older than this build's CUDA: a stand-in libcuda.so.1 that
# reports CUDA 12.4 and nothing else.
if [ "$cuda_build" = 1 ] && command -v cc >/dev/null; then
  mkdir -p fakecuda
  printf 'int cuDriverGetVersion(int *v) { *v = 12040; return 0; }\nint cuInit(unsigned f) { (void)f; return 0; }\n' > fakecuda/f.c
  cc -shared -fPIC -o fakecuda/libcuda.so.1 fakecuda/f.c
  LD_LIBRARY_PATH=$W/fakecuda "$NTKD" --version > out.log 2>&1
  check "--version: the runtime carried and the driver's CUDA" has "CUDA runtime [0-9]*\.[0-9] built in, driver supports CUDA 12.4" out.log
  check "--version: the driver is too old, said plainly" \
    has "the NVIDIA driver supports CUDA 12.4, this ntkd needs CUDA [0-9]*\.[0-9]: update the driver or use a build made with an older CUDA (scripts/gpu_bundle.sh)" out.log
  kjob old auto
  LD_LIBRARY_PATH=$W/fakecuda expect_rc 0 "backend = auto with a driver too old" "$NTKD" old.conf
  check "... computes on the CPU, saying why" has "no usable GPU (the NVIDIA driver supports CUDA 12.4, this ntkd needs CUDA" err.log
  "$NTKD" --version > out.log 2>&1
  check "--version without a driver says so" has "no NVIDIA driver" out.log
else
  echo "skipped: the driver-version messages (a build without CUDA or no C compiler)"
fi

echo "e2e_place: $passed passed, $failed failed"
[ "$failed" = 0 ]
