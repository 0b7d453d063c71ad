#!/usr/bin/env bash
# A stop signal inside a slow tile (issue 27): tiles of seconds each (a
# deep CNN), SIGTERM once the first tile is stored, i.e. while the second
# is being computed:
#   - one process: exit 5, the log says the stop was seen inside the tile
#     (and how many of its entries were done), the store holds only the
#     tile finished before and verifies; a rerun computes the rest and the
#     matrix is byte-identical to a clean run's;
#   - SIGXCPU (a CPU-time limit's warning) stops the same way; a SIGHUP
#     ignored at start (nohup) stays ignored: the job ends 0, complete;
#   - mpirun -np 2, SIGTERM to the worker rank alone: the worker stops
#     inside its tile and hands it back, the job stops with exit 5, the
#     store verifies, a rerun finishes byte-identical.
# How long each stop took (signal to exit) is printed, not checked.
# NTKD_TEST_SLOW=K (the ASan build, scripts/test-sanitize.sh): smaller
# images and fewer layers, so that a tile still takes seconds there.
# Usage: tests/e2e_stop.sh path/to/ntkd
set -u
NTKD=$(readlink -f "${1:?usage: e2e_stop.sh path/to/ntkd}")
source "$(dirname "$(readlink -f "$0")")/e2e_lib.sh"
source "$SRC/scripts/env.sh"
SLOW=${NTKD_TEST_SLOW:-1}
if [ "$SLOW" -gt 1 ]; then side=8 layers=4; else side=16 layers=20; fi
guarded() { local s=$(($1 * (SLOW > 1 ? 10 : 1))); shift; timeout -k 15 "$s" "$@"; }
now() { date +%s.%N; }
since() { $PY -c "import time,sys; print('%.2f' % (time.time() - float(sys.argv[1])))" "$1"; }

$PY -c "
import numpy as np
np.save('img.npy', np.random.default_rng(5).random((64, $side, $side, 3), dtype=np.float32))"
job() { # job NAME: 3 tiles of 32 images, seconds each
  printf '[data]\npath = img.npy\n[model]\narch = [Conv(3, 1, SAME) Relu]*%s GlobalAvgPool Dense\nkernel = ntk\n' \
    "$layers" > "$1.conf"
  printf '[compute]\ntile = 32\n[output]\npath = %s.ntk\nprogress = 1\n' "$1" >> "$1.conf"
}
export_cmp() { "$NTKD" export "$1" "$1.npy" >/dev/null 2>&1 && cmp -s "$1.npy" "$2"; }

job ref
expect_rc 0 "a clean run (3 tiles of 32 images, $side x $side, $layers layers)" guarded 300 "$NTKD" ref.conf
"$NTKD" export ref.ntk ref.npy >/dev/null 2>&1

# --- one process ---------------------------------------------------------------------
job one
"$NTKD" one.conf >/dev/null 2>one.log &
pid=$!
wait_tiles one.ntk 1 300
t0=$(now)
kill -TERM $pid
wait $pid
rc=$?
echo "    one process: SIGTERM to exit in $(since "$t0") s"
check "SIGTERM while the second tile is computed: exit 5 (exit $rc)" [ "$rc" = 5 ]
check "... the log says the stop was seen inside the tile" \
  grep -q "^ntkd: stopped inside tile [0-9]*, [0-9]* of its 1024 entries computed: the tile is dropped" one.log
check "... and the signal, once" bash -c "[ \$(grep -c 'signal 15' one.log) = 1 ]"
n=$(tiles_done one.ntk)
check "... the store holds the one tile finished before (${n:-none}) and verifies" \
  bash -c "[ '${n:-0}' = 1 ] && \"$NTKD\" verify one.ntk >/dev/null"
expect_rc 0 "... a rerun finishes" guarded 300 "$NTKD" one.conf
check "... computing the 2 tiles left" has "2 of 3 tiles to compute" err.log
check "... byte-identical to the clean run" export_cmp one.ntk ref.npy

# signalled NAME SIG [LAUNCHER]: NAME's job (started through LAUNCHER, as
# nohup) sent SIG once its first tile is stored; its exit in rc.
signalled() {
  job "$1"
  ${3:-} "$NTKD" "$1.conf" >/dev/null 2>"$1.log" &
  local pid=$!
  wait_tiles "$1.ntk" 1 300
  kill -"$2" $pid
  wait $pid
  rc=$?
}

# --- SIGXCPU, a CPU-time limit's warning: stops as SIGTERM does ------------------------
signalled xc XCPU
check "SIGXCPU while the second tile is computed: a clean stop, exit 5 (exit $rc; it once died of it, 152)" [ "$rc" = 5 ]
check "... the log says the stop was seen inside the tile" grep -q "^ntkd: stopped inside tile" xc.log
n=$(tiles_done xc.ntk)
check "... the store holds the one tile finished before (${n:-none}) and verifies" \
  bash -c "[ '${n:-0}' = 1 ] && \"$NTKD\" verify xc.ntk >/dev/null"
expect_rc 0 "... a rerun finishes" guarded 300 "$NTKD" xc.conf
check "... byte-identical to the clean run" export_cmp xc.ntk ref.npy

# --- a hangup ignored at start (nohup) stays ignored -----------------------------------
signalled hup HUP nohup
check "SIGHUP to a job started under nohup: the job goes on and ends 0 (exit $rc; it once stopped, 5)" [ "$rc" = 0 ]
check "... byte-identical to the clean run" export_cmp hup.ntk ref.npy

# --- mpirun -np 2: SIGTERM to the worker ---------------------------------------------
job mp
mpirun -np 2 "$NTKD" mp.conf >/dev/null 2>mp.log &
mp=$!
wait_tiles mp.ntk 1 300
worker=$(rank_pids "ntkd mp.conf" 1)
t0=$(now)
kill -TERM $worker
# How long the worker took to see it: until its line is in the log.
for _ in $(seq 6000); do grep -q "rank 1: stopped inside" mp.log && break; kill -0 $mp 2>/dev/null || break; sleep 0.01; done
echo "    mpirun -np 2: SIGTERM to the worker's line in the log in $(since "$t0") s"
wait $mp
rc=$?
echo "    ... to mpirun's exit in $(since "$t0") s"
check "SIGTERM to the worker rank while it computes: exit 5 (exit $rc)" [ "$rc" = 5 ]
check "... the worker says it stopped inside its tile" \
  grep -q "^ntkd: rank 1: stopped inside tile [0-9]*, [0-9]* of its 1024 entries computed: the tile is dropped" mp.log
check "... the coordinator hears of the signal" has "worker rank 1 was signalled" mp.log
n=$(tiles_done mp.ntk)
check "... the store holds the one tile finished before (${n:-none}) and verifies" \
  bash -c "[ '${n:-0}' = 1 ] && \"$NTKD\" verify mp.ntk >/dev/null"
expect_rc 0 "... a rerun finishes" guarded 300 mpirun -np 2 "$NTKD" mp.conf
check "... byte-identical to the clean run" export_cmp mp.ntk ref.npy

echo "e2e_stop: $passed passed, $failed failed"
[ "$failed" = 0 ]
