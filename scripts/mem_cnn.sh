#!/usr/bin/env bash
# Peak memory per rank of a CNTK-GAP depth-21 job (issue "CNN kernels",
# item 2) with N = 1 000 and N = 10 000 random 32x32x3 images, each stopped
# (SIGUSR1 to mpirun: a clean, resumable stop) after SECONDS of tile work.
#   scripts/mem_cnn.sh [BUILD_DIR] [SECONDS]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(readlink -f "${1:-$here/build}")
secs=${2:-40}
source "$here/scripts/env.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/ntkd-mem-XXXXXX")
trap 'rm -rf "$work"' EXIT
for n in 1000 10000; do
  /usr/bin/python3 -c "
import numpy as np
np.save('$work/x$n.npy', np.random.default_rng(2).random(($n, 32, 32, 3), dtype=np.float32))"
  printf '[data]\npath = x%s.npy\n[model]\narch = [Conv(3, 1, SAME) Relu]*20 GlobalAvgPool Dense\n[compute]\ntile = 16\n[output]\npath = x%s.ntk\nprogress = 1000\n' \
    "$n" "$n" > "$work/job$n.conf"
  mpirun -np 3 bash -c 'exec /usr/bin/time -f "%M" -o "$0.$OMPI_COMM_WORLD_RANK" "$1" "$2"' \
    "$work/mem$n" "$build/ntkd" "$work/job$n.conf" > /dev/null 2> "$work/log$n" &
  pid=$!
  sleep "$secs"
  pkill -USR1 -x mpirun || true
  wait $pid || true
  tiles=$("$build/ntkd" info "$work/x$n.ntk" | sed -n 's/^progress: *\([0-9]*\/[0-9]*\) tiles.*/\1/p')
  printf 'N=%-6s data %4d MiB   peak RSS: rank 0 %4d MiB, worker 1 %4d MiB, worker 2 %4d MiB   (%s tiles when stopped)\n' \
    "$n" $(( n * 3072 * 4 / 1048576 )) $(( $(cat "$work/mem$n.0") / 1024 )) $(( $(cat "$work/mem$n.1") / 1024 )) \
    $(( $(cat "$work/mem$n.2") / 1024 )) "$tiles"
done
