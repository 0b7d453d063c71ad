#!/usr/bin/env bash
# Crash test (issue "Survive preemption", item 3): an mpirun -np 3 job is
# SIGKILLed at random moments -- the coordinator, a worker, or every rank --
# at least KILLS times, with fsync after every tile so that writes are
# frequent, and every fifth time the store's tail is also cut at a random
# byte past what the index vouches for (a torn write). After each kill the job is rerun. The final matrix
# must be byte-identical to an uninterrupted run and `ntkd verify` must pass.
# The workers write their own records (docs/SCALING.md); every other run
# splits the ranks into two pretend nodes (NTKD_TEST_NODES=2), so worker 2
# syncs its own records and the data reach it through its node's leader.
# After every kill `ntkd verify` must not call the holes and half-written
# records past the index's sync mark damage.
# Usage: tests/crash.sh path/to/ntkd [KILLS] [SEED]
set -u
NTKD=$(readlink -f "${1:?usage: crash.sh path/to/ntkd [KILLS] [SEED]}")
KILLS=${2:-20}
RANDOM=${3:-$$}
echo "crash: seed ${3:-$$} (rerun with: tests/crash.sh $NTKD $KILLS ${3:-$$})"
source "$(dirname "$(readlink -f "$0")")/e2e_lib.sh"

$PY -c "import numpy as np; np.save('x.npy', np.random.default_rng(4).standard_normal((5000, 600)).astype(np.float32))"
conf() { printf '[data]\npath = x.npy\n[model]\narch = Dense Relu Dense Erf Dense\n[compute]\ntile = 40\n[output]\npath = %s\nsync = 0\nprogress = 1000\n' "$1"; }
conf clean.ntk > clean.conf
conf job.ntk > job.conf
"$NTKD" clean.conf >/dev/null 2>&1 && "$NTKD" export clean.ntk clean.npy >/dev/null 2>&1
check "uninterrupted reference run" [ -s clean.npy ]

kills=0 coord=0 workers=0 all=0 torn=0 runs=0 verify_bad=0
while [ "$kills" -lt "$KILLS" ]; do
  nodes=$(( runs % 2 + 1 ))
  NTKD_TEST_NODES=$nodes mpirun -np 3 "$NTKD" job.conf >/dev/null 2>run.log &
  mp=$!
  runs=$((runs + 1))
  if [ "$runs" -gt $((3 * KILLS + 10)) ]; then
    bad "$runs runs but only $kills kills: the job ends before it can be killed"
    break
  fi
  # Wait until the ranks exist (mpirun may take seconds to start them on a
  # fresh machine), then kill at a random moment: in set-up or mid-job.
  for _ in $(seq 1200); do
    [ "$(rank_pids "ntkd job.conf" | wc -l)" -ge 3 ] || ! kill -0 $mp 2>/dev/null && break
    sleep 0.05
  done
  sleep "0.$(( RANDOM % 9 ))$(( RANDOM % 10 ))"
  pids=$(rank_pids "ntkd job.conf")
  if [ -z "$pids" ]; then
    # Finished before the kill: check this round's matrix, start a new one.
    wait $mp
    "$NTKD" export job.ntk round.npy >/dev/null 2>&1
    check "a completed round (after $kills kills so far) is byte-identical" cmp -s clean.npy round.npy
    rm -f job.ntk round.npy
    continue
  fi
  choice=$(( RANDOM % 4 ))
  if [ $choice = 3 ]; then
    kill -9 $pids 2>/dev/null; all=$((all + 1))
  else
    want=$(( choice == 0 ? 0 : 1 + RANDOM % 2 ))
    kill -9 $(rank_pids "ntkd job.conf" "$want") 2>/dev/null
    if [ "$want" = 0 ]; then coord=$((coord + 1)); else workers=$((workers + 1)); fi
  fi
  kills=$((kills + 1))
  wait $mp 2>/dev/null
  kill -9 $(job_pids "ntkd job.conf") 2>/dev/null; sleep 0.1
  if [ -s job.ntk ] && ! "$NTKD" verify job.ntk >verify.log 2>&1; then
    verify_bad=$((verify_bad + 1)); echo "    after kill $kills: verify says"; tail -3 verify.log | sed 's/^/      /'
  fi
  if [ $(( kills % 5 )) = 0 ] && [ -s job.ntk ]; then
    # A torn write tears only what was not yet synced: bytes past what the
    # index vouches for (its sync mark and the records it lists; cutting
    # those loses synced records, which verify rightly reports as damage).
    size=$(stat -c %s job.ntk)
    mark=$(synced_end job.ntk)
    room=$(( size - ${mark:-$size} ))
    [ "$room" -gt 0 ] && cut=$(( RANDOM % (room < 4000 ? room : 4000) + 1 )) &&
      truncate -s $((size - cut)) job.ntk && torn=$((torn + 1))
  fi
done
expect_rc 0 "final resume completes" "$NTKD" job.conf
"$NTKD" export job.ntk job.npy >/dev/null 2>&1
check "after $kills kills ($coord coordinator, $workers worker, $all all ranks) and $torn torn tails: matrix byte-identical" cmp -s clean.npy job.npy
check "verify after each kill finds no damage (unfinished writes are not damage)" [ "$verify_bad" = 0 ]
expect_rc 0 "ntkd verify passes" "$NTKD" verify job.ntk
expect_rc 0 "ntkd verify passes under mpirun -np 2 (each rank a share of the tiles)" mpirun -np 2 "$NTKD" verify job.ntk
check "... checked by 2 ranks" has "checked by 2 ranks" out.log
echo "crash: $kills kills in $runs runs: $coord of the coordinator, $workers of a worker, $all of every rank; $torn torn tails"
echo "crash: $passed passed, $failed failed"
[ "$failed" = 0 ]
