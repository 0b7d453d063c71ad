#!/usr/bin/env bash
# The worker's pipeline end to end (docs/GPU.md, "The fully-connected
# path"): with compression threads (NTKD_COMPRESS_THREADS, what the CUDA
# backend asks for) tiles are checked and compressed while the next one is
# computed, in a single process (run_solo) and under mpirun, where each
# worker tells the coordinator how many tiles to keep queued at it. The
# stores must hold the same matrix, bit for bit, as the serial engine's; a
# stop in the middle must keep every finished tile and resume to the same
# matrix; a value that is not finite must still end the job with exit 8.
# Usage: tests/e2e_pipeline.sh path/to/ntkd
set -u
NTKD=$(readlink -f "${1:?usage: e2e_pipeline.sh path/to/ntkd}")
export OPENBLAS_NUM_THREADS=1
source "$(dirname "$(readlink -f "$0")")/e2e_lib.sh"
# The stopped jobs need to run for a while: 40 Erf layers here, 4 in the
# sanitizer build (NTKD_TEST_SLOW, ~100x slower).
stop_arch="[Dense Erf]*$([ -n "${NTKD_TEST_SLOW:-}" ] && echo 4 || echo 40) Dense"

$PY - <<'PYEOF'
import numpy as np
r = np.random.default_rng(5)
np.save('x.npy', r.standard_normal((700, 24)))
np.save('big.npy', r.standard_normal((3000, 96)))
PYEOF
job() { # job NAME DATA TILE [ARCH] [PRECISION]
  printf '[data]\npath = %s\n[model]\narch = %s\nkernel = ntk\n[compute]\ntile = %s\nprecision = %s\n[output]\npath = %s.ntk\n' \
    "$2" "${4:-Dense Relu Dense Erf Dense}" "$3" "${5:-float64}" "$1" > "$1.conf"
}
same() { "$NTKD" export "$1.ntk" "$1.npy" >/dev/null 2>&1 && cmp -s ref.npy "$1.npy"; }

job ref x.npy 48
expect_rc 0 "serial engine, one process (reference)" env NTKD_COMPRESS_THREADS=0 "$NTKD" ref.conf
"$NTKD" export ref.ntk ref.npy >/dev/null 2>&1

job solo x.npy 48
expect_rc 0 "one process, 3 compression threads" env NTKD_COMPRESS_THREADS=3 "$NTKD" solo.conf
check "one process, pipelined: the same matrix, bit for bit" same solo
expect_rc 0 "one process, pipelined: the store verifies" "$NTKD" verify solo.ntk

job mpi x.npy 48
expect_rc 0 "mpirun -np 3, 2 compression threads per worker" \
  env NTKD_COMPRESS_THREADS=2 mpirun -np 3 "$NTKD" mpi.conf
check "mpirun, pipelined: the same matrix, bit for bit" same mpi
# Each worker asked for 4 tiles (1 computing + 2 compressing + 1 next):
# both still got work.
check "mpirun, pipelined: both workers got tiles" \
  grep -Eq "tiles per worker: rank 1: [1-9][0-9]*, rank 2: [1-9]" err.log

# Few tiles, deep queues: each worker gets its share, not the first one
# served everything (3 tiles, 2 workers asking for 5 each). With fewer
# tiles than 2 per worker none is queued behind another
# (src/coordinator/coordinator.c, send_next): one each, the third to
# whichever finishes first.
job few x.npy 350
expect_rc 0 "mpirun -np 3, 3 tiles, 3 compression threads per worker" \
  env NTKD_COMPRESS_THREADS=3 mpirun -np 3 "$NTKD" few.conf
check "... the tiles are shared: 2 and 1" grep -Eq "tiles per worker: rank 1: (2, rank 2: 1|1, rank 2: 2)$" err.log

# A stop in the middle: every finished tile kept, the rest on a rerun.
# (One process: SIGTERM, exit 5; then mpirun: SIGUSR1.)
job stopref big.npy 96 "$stop_arch"
NTKD_COMPRESS_THREADS=0 "$NTKD" stopref.conf >/dev/null 2>&1
"$NTKD" export stopref.ntk stopref.npy >/dev/null 2>&1
job solostop big.npy 96 "$stop_arch"
NTKD_COMPRESS_THREADS=3 "$NTKD" solostop.conf >solostop.out 2>solostop.err &
pid=$!
if wait_tiles solostop.ntk 4; then
  kill -TERM $pid
  wait $pid
  rc=$?
  check "SIGTERM to a pipelined single process: exit 5 (got $rc)" test "$rc" = 5
  expect_rc 0 "... the store verifies" "$NTKD" verify solostop.ntk
  expect_rc 0 "... the rerun completes it" env NTKD_COMPRESS_THREADS=3 "$NTKD" solostop.conf
  "$NTKD" export solostop.ntk solostop.npy >/dev/null 2>&1
  check "... to the same matrix as one serial run" cmp -s stopref.npy solostop.npy
else
  kill -KILL $pid 2>/dev/null
  bad "the pipelined single process stored no tiles"
fi
job stop big.npy 96 "$stop_arch"
NTKD_COMPRESS_THREADS=2 mpirun -np 3 "$NTKD" stop.conf >stop.out 2>stop.err &
pid=$!
if wait_tiles stop.ntk 4; then
  kill -USR1 $pid # mpirun forwards SIGUSR1 to every rank (docs/CLI.md)
  wait $pid
  rc=$?
  done_at_stop=$(tiles_done stop.ntk)
  check "SIGUSR1 to a pipelined mpirun job: exit 5 (got $rc), $done_at_stop tiles kept" test "$rc" = 5
  check "... stopped before the end" test "$done_at_stop" -lt "$("$NTKD" info stop.ntk | sed -n 's|^progress: *[0-9]*/\([0-9]*\).*|\1|p')"
  expect_rc 0 "... the store verifies" "$NTKD" verify stop.ntk
  expect_rc 0 "the rerun resumes and completes" env NTKD_COMPRESS_THREADS=2 mpirun -np 3 "$NTKD" stop.conf
  total=$("$NTKD" info stop.ntk | sed -n 's|^progress: *[0-9]*/\([0-9]*\).*|\1|p')
  check "the rerun computed only the $((total - done_at_stop)) missing tiles" \
    has "$((total - done_at_stop)) of $total tiles to compute" err.log
  "$NTKD" export stop.ntk stop.npy >/dev/null 2>&1
  check "stopped and resumed: the same matrix as one serial run" cmp -s stopref.npy stop.npy
else
  kill -KILL $pid 2>/dev/null
  wait $pid 2>/dev/null
  bad "the pipelined job stored no tiles"
fi

# Not finite: the check runs on the compression threads, exit 8 as before.
job deep x.npy 48 "[Dense(W_std=2) Relu]*150 Dense" float32
expect_rc 8 "one process, pipelined: a kernel beyond float32 is exit 8" env NTKD_COMPRESS_THREADS=2 "$NTKD" deep.conf
check "... naming the entry" has "entry (row" err.log
job deepm x.npy 48 "[Dense(W_std=2) Relu]*150 Dense" float32
expect_rc 8 "mpirun, pipelined: exit 8" env NTKD_COMPRESS_THREADS=2 mpirun -np 3 "$NTKD" deepm.conf

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
