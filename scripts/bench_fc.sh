#!/usr/bin/env bash
# FC benchmark (issue "ntkd v1", item 11): the 3-layer ReLU NTK
# (Dense Relu Dense Relu Dense), float32, under mpirun, against one
# cblas_ssyrk of the same N x d (the floor), measured by build/ntkd_bench_syrk
# in the same script run, before and after the job (best of 2 x 2 runs).
#
#   scripts/bench_fc.sh [BUILD_DIR] [N] [d] [RANKS] [TILE]
#       random data: N = 10000, d = 3072, 3 ranks, tile 1024 (target <= 1.5)
#   scripts/bench_fc.sh --fashion [BUILD_DIR] [RANKS] [TILE]
#       the Fashion-MNIST job: the 60 000 training images (d = 784, uint8
#       scaled by 1/255, the [data] and [model] of configs/fc-fashion-full.conf),
#       3 ranks, tile 2048 (target <= 2). The store is about 12 GB.
#
# Then the output is checked (scripts/bench_check.sh): the leading
# 1024 x 1024 block of every kernel in the benchmark's store must equal, byte
# for byte, a one-process job of the first 1024 samples (tile 384: other
# tiles, another rank count); the script exits 1 otherwise. 1024: a multiple
# of the input covariance's 512-row blocks (src/kernels/fc.h), the unit
# whose bits are fixed: a job of 1000 samples ends in a 488-row block, which
# OpenBLAS's Haswell kernels sum in another order at its last 8 columns.
#
# Prints: the machine load (uptime) at start and end and the CPU seconds that
# other processes used during the job (/proc/stat), the ntkd wall time (and
# MPI_Init + MPI_Finalize timed alone under the same mpirun), the
# ssyrk floor, their ratio, per rank the wall, user and system CPU seconds and
# peak RSS (/usr/bin/time around each rank), rank 0's (the coordinator's) CPU
# per tile, ntkd's "times:", "workers spent" and "tiles per worker" lines, and
# the store's size and compression ratio (ntkd info).
#
# Environment:
#   NTKD_BENCH_N=4000          --fashion: only the first N images (a quick check)
#   NTKD_BENCH_FASHION=FILE    --fashion: the IDX images file (default: Debian
#                              package dataset-fashion-mnist)
#   NTKD_BENCH_DROP_CACHES=1   as root: sync and drop the page cache before the job
#   NTKD_BENCH_KEEP=1          keep the scratch folder (data, config, log, store)
#   NTKD_BENCH_LEVEL=0         [output] level (default 1; 0: tiles stored raw)
#   NTKD_BENCH_OUTPUT='K = V'  a line added to the job's [output] (e.g. 'direct_io = no',
#                              to compare the workers' buffered MPI-IO writes)
#   TMPDIR                     where the scratch folder goes (holds the store)
set -euo pipefail
source "$(dirname "$0")/args.sh"
script_args 5 --fashion -- "$@"
here=$(cd "$(dirname "$0")/.." && pwd)
source "$here/scripts/bench_check.sh"
fashion=0
if [ "${1:-}" = --fashion ]; then
  fashion=1
  shift
fi
build=$(readlink -f "${1:-$here/build}")
if [ "$fashion" = 1 ]; then
  images=${NTKD_BENCH_FASHION:-/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz}
  n=${NTKD_BENCH_N:-60000}
  d=784
  ranks=${2:-3}
  tile=${3:-2048}
  target=2
  what="Fashion-MNIST train images"
else
  n=${2:-10000}
  d=${3:-3072}
  ranks=${4:-3}
  tile=${5:-1024}
  target=1.5
  what="random data"
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
work=$(mktemp -d "${TMPDIR:-/tmp}/ntkd-bench-XXXXXX")
if [ "${NTKD_BENCH_KEEP:-0}" = 1 ]; then
  trap 'echo "  scratch kept: $work"' EXIT
else
  trap 'rm -rf "$work"' EXIT
fi
load_start=$(uptime)

if [ "$fashion" = 1 ]; then
  cat > "$work/bench.conf" <<CONF
[data]
path = $images
count = $n

[model]
arch = Dense Relu Dense Relu Dense
w_std = 1.4142135623730951
b_std = 0.05
kernel = ntk
CONF
else
  /usr/bin/python3 -c "
import numpy as np
np.save('$work/x.npy', np.random.default_rng(0).standard_normal(($n, $d), dtype=np.float32))"
  cat > "$work/bench.conf" <<CONF
[data]
path = x.npy

[model]
arch = Dense Relu Dense Relu Dense
kernel = ntk
CONF
fi
cat >> "$work/bench.conf" <<CONF

[compute]
precision = float32
tile = $tile

[output]
path = bench.ntk
level = ${NTKD_BENCH_LEVEL:-1}
progress = 1000
${NTKD_BENCH_OUTPUT:-}
CONF

# The floor; "" when ssyrk could not run (it needs N^2 floats: 14.4 GB at 60 000).
syrk() { "$build/ntkd_bench_syrk" "$n" "$d" 2>>"$work/syrk.log" || true; }
floor=$(syrk)

if [ "${NTKD_BENCH_DROP_CACHES:-0}" = 1 ]; then
  if [ "$(id -u)" = 0 ]; then
    sync
    echo 3 > /proc/sys/vm/drop_caches
    cache="cold (page cache dropped before the job)"
  else
    cache="warm (NTKD_BENCH_DROP_CACHES=1 needs root: not dropped)"
  fi
else
  cache="warm"
fi

# CPU seconds the machine spent busy (user, nice, system, irq, softirq) and
# stolen by the hypervisor, from /proc/stat: what the job did not use of them
# was used by other processes.
cpu_busy() { awk -v hz="$(getconf CLK_TCK)" '$1 == "cpu" { printf "%.2f %.2f\n", ($2 + $3 + $4 + $7 + $8) / hz, $9 / hz }' /proc/stat; }
load_job=$(cut -d' ' -f1-3 /proc/loadavg)
read -r busy0 steal0 < <(cpu_busy)
start=$(date +%s.%N)
status=0
mpirun -np "$ranks" bash -c \
  'exec /usr/bin/time -f "%e %U %S %M" -o "$0.rank$OMPI_COMM_WORLD_RANK" "$1" "$2"' \
  "$work/time" "$build/ntkd" "$work/bench.conf" 2>"$work/log" >/dev/null || status=$?
end=$(date +%s.%N)
read -r busy1 steal1 < <(cpu_busy)
if [ "$status" != 0 ]; then
  echo "bench_fc.sh: mpirun failed (exit $status); the end of its log:" >&2
  tail -n 20 "$work/log" >&2
  exit 1
fi
floor2=$(syrk)
# MPI's own start and end under the same mpirun (ntkd_bench_mpi_start):
# seconds no tile can shorten, printed beside the wall time.
mpi_start=$(mpirun -np "$ranks" "$build/ntkd_bench_mpi_start" 2>/dev/null | tail -n 1 || true)
load_end=$(uptime)

wall=$(echo "$end - $start" | bc -l)
best=""
for f in $floor $floor2; do
  if [ -z "$best" ] || [ "$(echo "$f < $best" | bc -l)" = 1 ]; then best=$f; fi
done
info=$("$build/ntkd" info "$work/bench.ntk")
ntiles=$(echo "$info" | sed -n 's/^tile: *[0-9]* (\([0-9]*\) tiles.*/\1/p')
store_bytes=$(du -sb "$work/bench.ntk" | cut -f1)

printf 'FC benchmark: %s, N=%s d=%s, Dense Relu Dense Relu Dense NTK, float32, mpirun -np %s, tile %s\n' \
  "$what" "$n" "$d" "$ranks" "$tile"
printf '  load at start:           %s\n' "$(echo "$load_start" | sed 's/^ *//')"
printf '  load as the job started: %s (1, 5, 15 min)\n' "$load_job"
printf '  load at end:             %s\n' "$(echo "$load_end" | sed 's/^ *//')"
ours=0
for r in $(seq 0 $((ranks - 1))); do
  read -r e u s m < <(tail -n 1 "$work/time.rank$r")
  ours=$(echo "$ours + $u + $s" | bc -l)
done
others=$(echo "$busy1 - $busy0 - $ours" | bc -l)
printf '  CPU during the job:      ranks %.1f s, other processes %.1f s (%.0f%% of %s cores), stolen %.1f s\n' \
  "$ours" "$others" "$(echo "100 * $others / ($wall * $(nproc))" | bc -l)" "$(nproc)" "$(echo "$steal1 - $steal0" | bc -l)"
printf '  page cache:              %s\n' "$cache"
printf '  ntkd wall time:          %.3f s\n' "$wall"
if [ -n "$mpi_start" ]; then
  read -r mpi_init mpi_fin <<< "$mpi_start"
  printf '  of which MPI itself:     ~%.3f s (MPI_Init %.3f s + MPI_Finalize %.3f s, timed alone under the same mpirun)\n' \
    "$(echo "$mpi_init + $mpi_fin" | bc -l)" "$mpi_init" "$mpi_fin"
else
  printf '  of which MPI itself:     not measured (ntkd_bench_mpi_start failed)\n'
fi
if [ -n "$best" ]; then
  printf '  cblas_ssyrk (floor):     %.3f s (best of 2x2 runs, before: %s s, after: %s s)\n' \
    "$best" "${floor:-failed}" "${floor2:-failed}"
  printf '  ratio ntkd / ssyrk:      %.2f   (target <= %s)\n' "$(echo "$wall / $best" | bc -l)" "$target"
else
  printf '  cblas_ssyrk (floor):     failed (see below)\n'
fi
sed 's/^/    /' "$work/syrk.log"
printf '  per rank (/usr/bin/time): wall s, user s, system s, peak RSS\n'
for r in $(seq 0 $((ranks - 1))); do
  read -r e u s m < <(tail -n 1 "$work/time.rank$r")
  role=worker
  [ "$r" = 0 ] && role=coordinator
  printf '    rank %d (%s): %8.2f %8.2f %8.2f %7d MiB\n' "$r" "$role" "$e" "$u" "$s" "$((m / 1024))"
done
read -r e0 u0 s0 m0 < <(tail -n 1 "$work/time.rank0")
if [ -n "$ntiles" ] && [ "$ntiles" -gt 0 ]; then
  printf '  rank 0 CPU per tile:     %.2f ms user + %.2f ms system = %.2f ms (%s tiles; %.0f%% of one core over the job)\n' \
    "$(echo "1000 * $u0 / $ntiles" | bc -l)" "$(echo "1000 * $s0 / $ntiles" | bc -l)" \
    "$(echo "1000 * ($u0 + $s0) / $ntiles" | bc -l)" "$ntiles" "$(echo "100 * ($u0 + $s0) / $wall" | bc -l)"
fi
grep -E "times:|workers spent|tiles per worker" "$work/log" | sed "s/^/  /"
printf '  store size:              %s bytes (%.2f GB)\n' "$store_bytes" "$(echo "$store_bytes / 1000000000" | bc -l)"
echo "$info" | grep -E 'compression|progress' | sed 's/^/  /'

# The output: the first samples again, one process, other tiles.
m=$(( n < 1024 ? n : 1024 ))
awk -v m="$m" '/^count = / {next} {print} /^\[data\]$/ {print "count = " m}' "$work/bench.conf" |
  sed 's/^path = bench.ntk$/path = small.ntk/; s/^tile = .*/tile = 384/' > "$work/small.conf"
if "$build/ntkd" "$work/small.conf" >/dev/null 2>"$work/small.log"; then
  status=0
  same_block "the store against one process" "$build" "$work/bench.ntk" "$work/small.ntk" "$m" > "$work/check" || status=1
  sed 's/^/  /' "$work/check"
else
  echo "  check FAILED: the one-process job of the first $m samples failed:"; tail -n 5 "$work/small.log" | sed 's/^/    /'
  status=1
fi
exit "$status"
