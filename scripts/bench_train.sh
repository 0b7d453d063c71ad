#!/usr/bin/env bash
# Training benchmark (issue 6, item 6): MLP 784-1000-1000-10, Adam, batch
# 50, Fashion-MNIST (Debian's dataset-fashion-mnist), one OpenBLAS thread
# per rank. For flush_denormals = true and false, on 1 rank and then on 2:
# each epoch's time (differences of elapsed_time, validation included) and
# the ratio of the slowest epoch to the first (target <= 1.05 with the
# flush), and the final validation accuracy. Times PyTorch on the same
# model, batch and data if `import torch` works. The outputs are checked:
# with each flush setting, 2 ranks must give 1 rank's loss curve within
# float32 rounding (1e-5 relative, as tests/e2e_train.sh); exit 1 otherwise.
#   scripts/bench_train.sh [BUILD_DIR] [EPOCHS] [EPOCHS_WITHOUT_FLUSH]
set -euo pipefail
source "$(dirname "$0")/args.sh"
script_args 3 -- "$@"
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(readlink -f "${1:-$here/build}")
epochs=${2:-5}
epochs_off=${3:-$epochs}
fm=/usr/share/datasets/fashion-mnist
source "$here/scripts/env.sh"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
work=$(mktemp -d "${TMPDIR:-/tmp}/ntkd-bench-train-XXXXXX")
trap 'rm -rf "$work"' EXIT

job() { # job NAME FLUSH EPOCHS
  cat > "$work/$1.conf" <<CONF
[data]
path = $fm/train-images-idx3-ubyte.gz
labels = $fm/train-labels-idx1-ubyte.gz
[validation]
path = $fm/t10k-images-idx3-ubyte.gz
labels = $fm/t10k-labels-idx1-ubyte.gz
[train]
layers = 784 1000 1000 10
batch = 50
epochs = $3
seed = 1
flush_denormals = $2
log = $1.jsonl
CONF
}

report() { # report NAME LABEL
  /usr/bin/python3 - "$work/$1.jsonl" "$2" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
t = [r["elapsed_time"] for r in rows]
ep = [t[0]] + [b - a for a, b in zip(t, t[1:])]
print("%-34s epochs (s): %s" % (sys.argv[2], " ".join("%.2f" % e for e in ep)))
print("%-34s slowest/first = %.3f   final validation accuracy = %.4f   final loss = %.4f"
      % ("", max(ep) / ep[0], rows[-1]["validation/main/accuracy"], rows[-1]["main/loss"]))
PY
}

echo "Training benchmark: MLP 784-1000-1000-10, Adam, batch 50, Fashion-MNIST 60000/10000, $(nproc --all) cores,"
echo "OpenBLAS $("$build/ntkd" --version | sed -n 's/^OpenBLAS kernels: //p'), OPENBLAS_NUM_THREADS=1"
for ranks in 1 2; do
  for flush in true false; do
    n=$epochs
    [ "$flush" = false ] && n=$epochs_off
    name="r${ranks}_${flush}"
    job "$name" "$flush" "$n"
    if [ "$ranks" = 1 ]; then
      (cd "$work" && "$build/ntkd" "$name.conf" >"$name.out" 2>"$name.err")
    else
      (cd "$work" && mpirun -np "$ranks" "$build/ntkd" "$name.conf" >"$name.out" 2>"$name.err")
    fi
    report "$name" "$ranks rank(s), flush_denormals=$flush:"
  done
done

checks=0
for flush in true false; do
  /usr/bin/python3 - "$work/r1_$flush.jsonl" "$work/r2_$flush.jsonl" "$flush" <<'PY' || checks=1
import json, sys
a, b = ([json.loads(l) for l in open(f)] for f in sys.argv[1:3])
keys = ("main/loss", "validation/main/loss", "main/accuracy", "validation/main/accuracy")
worst = max((abs(x[k] - y[k]) / abs(x[k]) for x, y in zip(a, b) for k in keys), default=float("inf"))
ok = len(a) == len(b) > 0 and worst <= 1e-5
print("check%s: flush_denormals=%s: 2 ranks against 1, %d epochs, largest relative difference %.1e (bound 1e-5)"
      % ("" if ok else " FAILED", sys.argv[3], len(b), worst))
sys.exit(0 if ok else 1)
PY
done

if /usr/bin/python3 -c "import torch" 2>/dev/null; then
  /usr/bin/python3 - "$epochs" "$work/r1_true.jsonl" <<'PY'
import gzip, json, sys, time
import numpy as np, torch
torch.set_num_threads(1)
fm = "/usr/share/datasets/fashion-mnist/"
def idx(p, off):
    return np.frombuffer(gzip.open(fm + p).read()[off:], np.uint8)
x = torch.tensor(idx("train-images-idx3-ubyte.gz", 16).reshape(-1, 784) / 255.0, dtype=torch.float32)
y = torch.tensor(idx("train-labels-idx1-ubyte.gz", 8).astype(np.int64))
model = torch.nn.Sequential(torch.nn.Linear(784, 1000), torch.nn.ReLU(), torch.nn.Linear(1000, 1000),
                            torch.nn.ReLU(), torch.nn.Linear(1000, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
loss_fn = torch.nn.CrossEntropyLoss()
times = []
for e in range(int(sys.argv[1])):
    t0 = time.time()
    perm = torch.randperm(60000)
    for s in range(1200):
        i = perm[s * 50:(s + 1) * 50]
        opt.zero_grad()
        loss_fn(model(x[i]), y[i]).backward()
        opt.step()
    times.append(time.time() - t0)
t = [r["elapsed_time"] for r in map(json.loads, open(sys.argv[2]))]
ours = [t[0]] + [b - a for a, b in zip(t, t[1:])]
print("PyTorch %s, 1 thread, epochs (s): %s" % (torch.__version__, " ".join("%.2f" % v for v in times)))
print("ntkd / PyTorch mean epoch time: %.2f" % (sum(ours) / len(ours) / (sum(times) / len(times))))
PY
else
  echo "PyTorch: not installed (import torch failed); not timed"
fi
exit $checks
