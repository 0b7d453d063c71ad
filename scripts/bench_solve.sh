#!/usr/bin/env bash
# The Cholesky solve methods on this machine: method = lapack (one process,
# OpenBLAS's dpotrf on all cores) against method = scalapack (pdpotrf;
# mpirun -np 1, and -np 2 on a 2 x 1 and a 1 x 2 grid), on Fashion-MNIST
# FC NNGP kernels (configs/fc-fashion-solve.conf's network, float32 tiles,
# float64 solve), one ridge, leave-one-out off: per run the Cholesky time,
# GFLOP/s (n^3/3 flops), the whole solve, and the peak memory of each rank
# (/usr/bin/time -v), the ratio ScaLAPACK / LAPACK of this run, and the CPU
# seconds other processes took meanwhile (anything well above 0: rerun).
# Each ScaLAPACK run's predictions are checked against LAPACK's: the
# largest difference relative to the largest prediction must stay under
# 1e-6 (float64 rounding on a kernel of condition number up to ~1e10; the
# two factorisations differ in order, so not byte for byte); the script
# exits 1 otherwise, after the table.
#
# scripts/bench_solve.sh --ridges [BUILD_DIR] [N] instead times the
# quickstart's solve (issue 28, item 5): a sweep of 4 ridges with
# leave-one-out on the N-sample NNGP train kernel (default 10 000), ntkd's
# per-ridge Cholesky against one eigendecomposition (dsyevd) shared by the
# ridges, in one run (build/ntkd_bench_ridges, which checks that both agree
# within 1e-6 and exits 1 otherwise), and prints their ratio.
#
# scripts/bench_solve.sh --cg [BUILD_DIR] [N] [OLD_BUILD_DIR] times method
# = cg (issue 28, item 4) on the N-sample NNGP train kernel (default 20 000),
# 4 ridges, tolerance 1e-8, mpirun -np 3: cg_products = float64 against
# float32 (the default) of the same build, and OLD_BUILD_DIR's solve when
# given; per run the iterations of the slowest ridge, the preconditioner's
# set-up, the products and the preconditioner during the iterations, the
# whole solve and its ratio to float64's; every run's predictions must agree
# with float64's within 1e-6 of their scale (exit 1 otherwise). First, the
# products' own benchmark (build/ntkd_bench_skinny: the one-pass products
# of src/solve/skinny.c against sgemm and dgemm per column count, in the
# same run; exit 1 if they disagree).
#
# Usage: scripts/bench_solve.sh [BUILD_DIR] [N ...]
#   BUILD_DIR  holds ntkd (default: build); N: train sizes (default 20000 30000)
#   NTE=2000   test samples;  GRIDS="1x1 2x1 1x2" ScaLAPACK grids (ranks = R*C)
#   OUT=out/bench-solve  stores, job files and logs (a store is reused when there)
# Needs Debian's dataset-fashion-mnist and `time`; about 8 n^2 bytes of free
# memory (7.2 GB at n = 30 000). Run it alone: the timings are of the whole
# machine.
set -euo pipefail
source "$(dirname "$0")/args.sh"
script_args any --ridges --cg -- "$@"
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RIDGES=0 CG=0
if [ "${1:-}" = --ridges ]; then RIDGES=1; shift; fi
if [ "${1:-}" = --cg ]; then CG=1; shift; fi
BUILD=$(cd "${1:-$ROOT/build}" && pwd)
shift || true
NS=${*:-20000 30000}
RIDGES_N=${1:-10000} # --ridges: one train size
CG_N=${1:-20000}     # --cg: one train size, then the old build
OLD=${2:-}
[ -n "$OLD" ] && OLD=$(cd "$OLD" && pwd)
NTE=${NTE:-2000}
GRIDS=${GRIDS:-1x1 2x1 1x2}
OUT=${OUT:-$ROOT/out/bench-solve}
NTKD=$BUILD/ntkd
FM=/usr/share/datasets/fashion-mnist
source "$ROOT/scripts/env.sh"
[ -x "$NTKD" ] || { echo "bench_solve: no $NTKD (build first)" >&2; exit 1; }
[ -e "$FM/train-images-idx3-ubyte.gz" ] || { echo "bench_solve: no $FM (apt-get install dataset-fashion-mnist)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "bench_solve: no /usr/bin/time (apt-get install time)" >&2; exit 1; }
mkdir -p "$OUT"
cd "$OUT"

# job NAME N [solve lines]: the kernel job; with solve lines, its [solve]
job() {
  local name=$1 n=$2; shift 2
  {
    printf '[data]\npath = %s/train-images-idx3-ubyte.gz\n' "$FM"
    [ $# -gt 0 ] && printf 'labels = %s/train-labels-idx1-ubyte.gz\n' "$FM"
    printf 'count = %s\n[test]\npath = %s/t10k-images-idx3-ubyte.gz\n' "$n" "$FM"
    [ $# -gt 0 ] && printf 'labels = %s/t10k-labels-idx1-ubyte.gz\n' "$FM"
    printf 'count = %s\n[model]\narch = Dense Relu Dense Relu Dense\nw_std = 1.4142135623730951\n' "$NTE"
    printf 'b_std = 0.05\nkernel = nngp\n[compute]\nprecision = float32\ntile = 1024\n[output]\npath = fc%s.ntk\n' "$n"
    if [ $# -gt 0 ]; then
      printf '[solve]\nridge = %s\nloo = no\npredictions = %s\n' "${SOLVE_RIDGES:-1e-3}" "$name"
      for l in "$@"; do printf '%s\n' "$l"; done
    fi
  } > "$name.conf"
}
# busy: CPU seconds the whole machine has spent busy since boot (/proc/stat)
busy() { awk -v hz="$(getconf CLK_TCK)" '/^cpu / {printf "%.1f", ($2 + $3 + $4 + $7 + $8 + $9) / hz}' /proc/stat; }
# others LOG BUSY0: CPU seconds of other processes during the run that wrote
# LOG (/usr/bin/time -v of each rank): the machine's busy time minus the ranks'
others() {
  awk -v b0="$2" -v b1="$(busy)" '/User time|System time/ {mine += $NF}
    END {x = b1 - b0 - mine; printf "%.0f", x < 0 ? 0 : x}' "$1"
}
# kernel_store N: the N + NTE sample kernel fc$N.ntk (computed once, then reused)
kernel_store() {
  job "base$1" "$1"
  if [ ! -e "fc$1.ntk" ]; then
    echo "bench_solve: computing the $1 + $NTE sample kernel (fc$1.ntk)" >&2
    mpirun -np 3 "$NTKD" "base$1.conf" > "base$1.log" 2>&1 || { tail "base$1.log" >&2; exit 1; }
  fi
}
free_gb() { awk '/MemAvailable/ {printf "%.1f", $2 / 1048576}' /proc/meminfo; }
# field LOG REGEX: the number of seconds after REGEX in LOG ("REGEX 12.3 s")
field() { sed -n "s/.*$2 \([0-9.][0-9.]*\) s.*/\1/p" "$1" | head -1; }
# peak LOG: the largest "Maximum resident set size" of the ranks, GB
peak() { awk '/Maximum resident set size/ {if ($6 > m) m = $6} END {printf "%.2f", m / 1048576}' "$1"; }

if [ $RIDGES = 1 ]; then
  n=$RIDGES_N
  kernel_store "$n"
  "$NTKD" export "fc$n.ntk" "k$n.raw" --kernel nngp --rows "0:$n" --cols "0:$n" --format raw >&2
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min)"
  "$BUILD/ntkd_bench_ridges" "k$n.raw" "$n" 4 10 1e-4 1e-3 1e-2 1e-1 || status=$?
  rm -f "k$n.raw"
  exit "${status:-0}"
fi

if [ $CG = 1 ]; then
  n=$CG_N
  status=0
  "$BUILD/ntkd_bench_skinny" || status=1
  kernel_store "$n"
  export SOLVE_RIDGES="1e-4, 1e-3, 1e-2, 1e-1"
  rows=()
  runs="f64:$NTKD:float64 f32:$NTKD:float32"
  [ -n "$OLD" ] && runs="$runs old:$OLD/ntkd:"
  for r in $runs; do
    IFS=: read -r name bin prod <<< "$r"
    if [ -n "$prod" ]; then job "cg$name-$n" "$n" "method = cg" "cg_products = $prod"; else job "cg$name-$n" "$n" "method = cg"; fi
    b0=$(busy)
    mpirun -np 3 /usr/bin/time -v "$bin" solve "fc$n.ntk" "cg$name-$n.conf" > "cg$name-$n.out" 2> "cg$name-$n.log" ||
      { tail "cg$name-$n.log" >&2; exit 1; }
    its=$(sed -n 's/.*cg nngp ridge 0.0001: \([0-9]*\) iterations.*/\1/p' "cg$name-$n.log")
    pre=$(sed -n 's/.*over the tiles, \([0-9.]*\) s.*/\1/p' "cg$name-$n.log" | head -1)
    prod_s=$(sed -n 's/.*(products \([0-9.]*\) s.*/\1/p' "cg$name-$n.log")
    pc_s=$(sed -n 's/.*, preconditioner \([0-9.]*\) s on rank 0.*/\1/p' "cg$name-$n.log")
    wall=$(field "cg$name-$n.log" "solve time")
    [ "$name" = f64 ] && w64=$wall
    ratio=$(awk -v a="$wall" -v b="$w64" 'BEGIN {printf "%.2f", a / b}')
    rows+=("| $n | $name | $its | $pre | $prod_s | $pc_s | $wall | $ratio | $(peak "cg$name-$n.log") | $(others "cg$name-$n.log" "$b0") |")
    echo "${rows[-1]}" >&2
    [ "$name" = f64 ] && continue
    /usr/bin/python3 -c "
import numpy as np, sys
w = 0
for r in ('0.0001', '0.001', '0.01', '0.1'):
    a = np.load('cgf64-$n-nngp-ridge%s.npy' % r); b = np.load('cg$name-$n-nngp-ridge%s.npy' % r)
    w = max(w, np.abs(a - b).max() / np.abs(a).max() if a.shape == b.shape else float('inf'))
print(f'bench_solve: cg$name-$n predictions against float64 products: largest relative difference {w:.1e}'
      + ('' if w < 1e-6 else ' (check FAILED: bound 1e-6)'), file=sys.stderr)
sys.exit(0 if w < 1e-6 else 1)" || status=1
  done
  echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo), OpenBLAS $("$NTKD" --version | sed -n 's/OpenBLAS kernels: //p') kernels; NNGP, ridges $SOLVE_RIDGES, mpirun -np 3"
  echo "| n (train) | run | iterations (ridge 1e-4) | preconditioner set-up s | products s (rank 0) | preconditioner s (rank 0) | whole solve s | / float64's | peak RSS per rank GB | other processes' CPU s |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
  exit $status
fi

rows=()
status=0
for n in $NS; do
  kernel_store "$n"
  need=$(awk -v n="$n" 'BEGIN {printf "%.1f", 8 * n * n * 1.1 / 2^30}')
  echo "bench_solve: n = $n: $(free_gb) GiB available, the one-process solve needs about $need GiB" >&2
  awk -v a="$(free_gb)" -v b="$need" 'BEGIN {exit !(a > b)}' ||
    { echo "bench_solve: not enough free memory for n = $n" >&2; exit 1; }
  job "lapack$n" "$n" "method = lapack"
  b0=$(busy)
  /usr/bin/time -v "$NTKD" solve "fc$n.ntk" "lapack$n.conf" > "lapack$n.out" 2> "lapack$n.log" ||
    { tail "lapack$n.log" >&2; exit 1; }
  t_lap=$(field "lapack$n.log" "ridge 0.001: Cholesky")
  wall=$(field "lapack$n.log" "solve time")
  gf=$(awk -v n="$n" -v t="$t_lap" 'BEGIN {printf "%.1f", n * n * n / 3 / t / 1e9}')
  rows+=("| $n | lapack (dpotrf) | 1 process, all cores | $t_lap | $gf | $wall | $(peak "lapack$n.log") | 1.00 | $(others "lapack$n.log" "$b0") |")
  echo "${rows[-1]}" >&2
  for g in $GRIDS; do
    r=${g%x*} c=${g#*x} np=$((${g%x*} * ${g#*x}))
    job "sl$g-$n" "$n" "method = scalapack" "grid = $r x $c"
    b0=$(busy)
    # Open MPI binds each rank to one core when np <= 2: one rank may use both
    bind=$([ "$np" = 1 ] && echo "--bind-to none" || true)
    mpirun $bind -np "$np" /usr/bin/time -v "$NTKD" solve "fc$n.ntk" "sl$g-$n.conf" > "sl$g-$n.out" 2> "sl$g-$n.log" ||
      { tail "sl$g-$n.log" >&2; exit 1; }
    t=$(field "sl$g-$n.log" "ridge 0.001: Cholesky")
    wall=$(field "sl$g-$n.log" "solve time")
    gf=$(awk -v n="$n" -v t="$t" 'BEGIN {printf "%.1f", n * n * n / 3 / t / 1e9}')
    ratio=$(awk -v a="$t" -v b="$t_lap" 'BEGIN {printf "%.2f", a / b}')
    rows+=("| $n | scalapack (pdpotrf) | $np rank$([ "$np" = 1 ] && echo "" || echo s), grid $r x $c | $t | $gf | $wall | $(peak "sl$g-$n.log") | $ratio | $(others "sl$g-$n.log" "$b0") |")
    echo "${rows[-1]}" >&2
    # the same predictions as lapack (to rounding)
    /usr/bin/python3 -c "
import numpy as np, sys
a = np.load('lapack$n-nngp-ridge0.001.npy'); b = np.load('sl$g-$n-nngp-ridge0.001.npy')
d = np.abs(a - b).max() / np.abs(a).max() if a.shape == b.shape else float('inf')
ok = d < 1e-6
print(f'bench_solve: sl$g-$n predictions against lapack: largest relative difference {d:.1e}'
      + ('' if ok else ' (check FAILED: bound 1e-6)'), file=sys.stderr)
sys.exit(0 if ok else 1)" || status=1
  done
done
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo), OpenBLAS $("$NTKD" --version | sed -n 's/OpenBLAS kernels: //p') kernels"
echo "| n (train) | method | processes | Cholesky s | GFLOP/s (n³/3) | whole solve s | peak RSS per rank GB | Cholesky time / LAPACK's | other processes' CPU s during the run |"
echo "|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
[ $status = 0 ] || echo "bench_solve: a ScaLAPACK solve's predictions differ from LAPACK's (above)" >&2
exit $status
