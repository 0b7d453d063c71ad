#!/usr/bin/env bash
# Peak memory per rank of a CNTK-GAP depth-21 job (issue "CNN kernels",
# item 2) with N = 1 000 and N = 10 000 random 32x32x3 images: after
# SECONDS of tile work each rank's peak resident size (VmHWM) is read from
# /proc, then the job is stopped cleanly (SIGUSR1 to mpirun). The output is
# checked: the stop must give exit 5 and the stored tiles must verify; the
# script exits 1 otherwise.
#   scripts/mem_cnn.sh [BUILD_DIR] [SECONDS]
set -euo pipefail
source "$(dirname "$0")/args.sh"
script_args 2 -- "$@"
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(readlink -f "${1:-$here/build}")
secs=${2:-40}
source "$here/scripts/env.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/ntkd-mem-XXXXXX")
trap 'rm -rf "$work"' EXIT
checks=0
for n in 1000 10000; do
  /usr/bin/python3 -c "
import numpy as np
np.save('$work/x$n.npy', np.random.default_rng(2).random(($n, 32, 32, 3), dtype=np.float32))"
  printf '[data]\npath = x%s.npy\n[model]\narch = [Conv(3, 1, SAME) Relu]*20 GlobalAvgPool Dense\n[compute]\ntile = 16\n[output]\npath = x%s.ntk\nprogress = 1000\n' \
    "$n" "$n" > "$work/job$n.conf"
  mpirun -np 3 "$build/ntkd" "$work/job$n.conf" > /dev/null 2> "$work/log$n" &
  pid=$!
  sleep "$secs"
  line="N=$n data $(( n * 3072 * 4 / 1048576 )) MiB, peak RSS:"
  for p in $(pgrep -f "ntkd $work/job$n.conf" | grep -vx "$pid"); do
    rank=$(tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
    hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$p/status" 2>/dev/null)
    [ -n "$rank" ] && [ -n "$hwm" ] && line="$line rank $rank $(( hwm / 1024 )) MiB,"
  done
  kill -USR1 "$pid" 2>/dev/null || true
  rc=0
  wait "$pid" || rc=$?
  tiles=$("$build/ntkd" info "$work/x$n.ntk" | sed -n 's/^progress: *\([0-9]*\/[0-9]*\) tiles.*/\1/p')
  echo "$line $tiles tiles stored when stopped"
  if [ "$rc" != 5 ] || ! "$build/ntkd" verify "$work/x$n.ntk" > "$work/verify$n" 2>&1; then
    echo "  check FAILED: N=$n: exit $rc after SIGUSR1 (want 5), verify: $(tail -1 "$work/verify$n")"
    checks=1
  fi
done
exit $checks
