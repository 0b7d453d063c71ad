#!/usr/bin/env bash
# End-to-end tests that no failure leaves a job hanging or storing bad
# values (issue 11, items 5 and 7), all under mpirun -np 3 unless said:
#   - a kernel value that is not finite stops the job with exit 8 and names
#     the entry (single process and mpirun); the tiles before it are kept;
#   - messages larger than one MPI message travel in pieces (test setting
#     NTKD_TEST_MPI_PIECE makes the workers' small messages do so) and
#     arrive bit-exact;
#   - a worker's failed send and the coordinator's failed receive (test
#     settings NTKD_TEST_FAIL_SEND / NTKD_TEST_FAIL_RECV, src/comm/comm.h)
#     end the job with a message and exit 1; the store verifies;
#   - a worker stopped with SIGSTOP is counted out after [compute]
#     worker_timeout: exit 9, the store verifies, a rerun finishes
#     byte-identical to a clean run;
#   - the coordinator stopped with SIGSTOP for less than worker_timeout
#     counts no worker out, and no worker ends the job: it ends 0;
#   - idle workers wait out a resumed store's audit of 10 s under
#     worker_timeout = 3 (test setting NTKD_TEST_AUDIT_DELAY): rank 0 tells
#     them every second that it is alive, and the job ends 0;
#   - the whole job (mpirun and every rank) stopped with SIGSTOP for longer
#     than worker_timeout, then continued: it ends 0;
#   - the coordinator stopped with SIGSTOP for good: a worker waiting for
#     it ends the job after worker_timeout (exit 9), saying so; the store
#     verifies, a rerun finishes byte-identical to a clean run;
#   - SIGINT and SIGTERM to mpirun, with a kill grace of 10 s (as
#     scripts/slurm/kernel.sbatch sets it): the ranks store the tiles in
#     flight and stop cleanly (mpirun exits 1).
# No check is decided by a clock of the test: every mpirun runs under
# `timeout` only so that a hang fails a check (exit 124) instead of the
# script. Usage: tests/e2e_hangs.sh path/to/ntkd
set -u
NTKD=$(readlink -f "${1:?usage: e2e_hangs.sh path/to/ntkd}")
source "$(dirname "$(readlink -f "$0")")/e2e_lib.sh"
# The settings users get from scripts/env.sh; the tests that are not about
# signals to mpirun use Open MPI's kill grace of 1 s, those that are the
# 10 s of kernel.sbatch.
source "$SRC/scripts/env.sh"
GRACE=10
FAST="env OMPI_MCA_odls_base_sigkill_timeout=1"
# NTKD_TEST_SLOW=K (scripts/test-sanitize.sh: the debug build with ASan
# computes ~100x slower): networks K times shallower, hang guards 10 times
# longer, and the two scenarios built on tiles of seconds (a stalled
# worker against worker_timeout, signals to mpirun) not run.
SLOW=${NTKD_TEST_SLOW:-1}
TSCALE=$([ "$SLOW" -gt 1 ] && echo 10 || echo 1)
# guarded SECONDS CMD...: a hang ends as exit 124 (TERM, then KILL).
guarded() { local s=$(($1 * TSCALE)); shift; timeout -k 15 "$s" "$@"; }
# watchdog PID SECONDS: the same for a job started in the background.
watchdog() {
  (sleep "$2"; kill -TERM "$1" 2>/dev/null; sleep 15; kill -KILL "$1" 2>/dev/null) >/dev/null 2>&1 &
  WD=$!
}
# running NAME TILES: NAME.conf under mpirun -np 3 in the background (its
# pid in mp, stderr in NAME.log, a 300 s watchdog in WD), returning once
# its store holds TILES tiles.
running() {
  $FAST mpirun -np 3 "$NTKD" "$1.conf" >/dev/null 2>"$1.log" &
  mp=$!
  watchdog $mp 300
  wait_tiles "$1.ntk" "$2" 300
}
# no_ranks_left PATTERN: no MPI rank of that job still runs (kills any).
no_ranks_left() {
  local left
  left=$(rank_pids "$1")
  [ -z "$left" ] && return 0
  kill -CONT $left 2>/dev/null; kill -KILL $left 2>/dev/null
  echo "    ranks left running: $left"
  return 1
}

$PY - <<'PYEOF'
import numpy as np
rng = np.random.default_rng(11)
np.save('small.npy', rng.standard_normal((700, 40)).astype(np.float32))
np.save('mid.npy', rng.standard_normal((3072, 32)).astype(np.float32))
sig = rng.standard_normal((8192, 32)).astype(np.float32)
np.save('sig.npy', sig)
np.save('sig1.npy', sig[:768])  # one tile of the signal jobs, to time it
np.save('few.npy', rng.standard_normal((10, 5)).astype(np.float32))
np.save('cal.npy', rng.standard_normal((512, 32)).astype(np.float32))
# Samples 0-7 so small that 150 layers of Dense(W_std=2) Relu (x2 per
# layer) keep them inside float32; samples 8-11 overflow.
x = rng.standard_normal((12, 5)); x[:8] *= 1e-5
np.save('mixed.npy', x.astype(np.float32))
PYEOF

job() { # job NAME DATA ARCH TILE [extra lines...]
  local name=$1 data=$2 arch=$3 tile=$4; shift 4
  {
    printf '[data]\npath = %s\n[model]\narch = %s\nkernel = ntk\n' "$data" "$arch"
    printf '[compute]\ntile = %s\n' "$tile"
    for l in "$@"; do printf '%s\n' "$l"; done
    printf '[output]\npath = %s.ntk\nprogress = 1\n' "$name"
  } > "$name.conf"
}
export_cmp() { # export_cmp STORE REFERENCE.npy
  "$NTKD" export "$1" "$1.npy" >/dev/null 2>&1 && cmp -s "$1.npy" "$2"
}

# --- a kernel value that is not finite: exit 8, the entry named ----------------
DEEP='[Dense(W_std=2) Relu]*150 Dense'
NF_MSG='entry (row [0-9]*, column [0-9]*) is \(NaN\|inf\|-inf\): the kernel, or a variance inside the network, exceeds float32; use \[compute\] precision = float64'
job nf1 few.npy "$DEEP" 4
expect_rc 8 "non-finite float32 kernel, single process" guarded 60 "$NTKD" nf1.conf
check "... the message names the entry and says float64" grep -q "error: \(NNGP\|NTK\) $NF_MSG" err.log
job nf3 few.npy "$DEEP" 4
expect_rc 8 "non-finite float32 kernel, mpirun -np 3" guarded 60 mpirun -np 3 "$NTKD" nf3.conf
check "... the message names the worker and the entry and says float64" \
  grep -q "error: worker rank [12]: \(NNGP\|NTK\) $NF_MSG" err.log
job nf64 few.npy "$DEEP" 4 "precision = float64"
expect_rc 0 "... the same network in float64 is finite (the hint is right)" guarded 60 "$NTKD" nf64.conf
# The tiles computed before the bad one stay: tile 1 (rows 4-7 x columns
# 0-3, all small samples) is computed first, then tile 3 (rows 8-11) fails.
job mx1 mixed.npy "$DEEP" 4
expect_rc 8 "non-finite values in the third tile, single process" guarded 60 "$NTKD" mx1.conf
check "... names the first bad entry: row 8, column 0" has "entry (row 8, column 0) is" err.log
n=$(tiles_done mx1.ntk)
check "... the finite tile before it is stored (${n:-none}) and the store verifies" \
  bash -c "[ '${n:-0}' = 1 ] && \"$NTKD\" verify mx1.ntk >/dev/null"
job mx3 mixed.npy "$DEEP" 4
expect_rc 8 "non-finite values in the third tile, mpirun -np 3" guarded 60 mpirun -np 3 "$NTKD" mx3.conf
n=$(tiles_done mx3.ntk)
check "... ${n:-no} finite tiles stored, the store verifies" bash -c "[ '${n:-0}' -ge 1 ] && \"$NTKD\" verify mx3.ntk >/dev/null"

# --- results in pieces ------------------------------------------------------------
# A PMPI wrapper records the largest message each rank sends. Tiles never
# travel through MPI (the workers write their records themselves), so a
# worker's messages are a few dozen bytes; with 16-byte pieces every one of
# them (result, written, and rank 0's grants) goes as an announcement and
# pieces, which must reassemble exactly.
cat > sendsize.c <<'CEOF'
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
static long long largest, count;
static void note(int n, MPI_Datatype t) {
  int sz = 0;
  PMPI_Type_size(t, &sz);
  if ((long long)n * sz > largest) largest = (long long)n * sz;
  count++;
}
int MPI_Send(const void *b, int n, MPI_Datatype t, int d, int tag, MPI_Comm c) {
  note(n, t);
  return PMPI_Send(b, n, t, d, tag, c);
}
int MPI_Isend(const void *b, int n, MPI_Datatype t, int d, int tag, MPI_Comm c, MPI_Request *r) {
  note(n, t);
  return PMPI_Isend(b, n, t, d, tag, c, r);
}
int MPI_Finalize(void) {
  int rank = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  char path[4096];
  snprintf(path, sizeof path, "%s.%d", getenv("SENDSIZE_OUT"), rank);
  FILE *f = fopen(path, "w");
  if (f) fprintf(f, "%lld %lld\n", largest, count), fclose(f);
  return PMPI_Finalize();
}
CEOF
job pc1 small.npy "Dense(b_std=0.1) Relu Dense Erf Dense" 128
job pc3 small.npy "Dense(b_std=0.1) Relu Dense Erf Dense" 128
expect_rc 0 "reference: single process" guarded 120 "$NTKD" pc1.conf
"$NTKD" export pc1.ntk pc1.npy >/dev/null 2>&1
if ldd "$NTKD" | grep -q libasan; then
  echo "skipped: the message-size check (its LD_PRELOAD wrapper cannot load before ASan's runtime)"
  expect_rc 0 "messages in 16-byte pieces (NTKD_TEST_MPI_PIECE=16), mpirun -np 3" \
    guarded 120 env NTKD_TEST_MPI_PIECE=16 mpirun -np 3 "$NTKD" pc3.conf
elif mpicc -shared -fPIC -O2 sendsize.c -o sendsize.so 2>sendsize.err; then
  expect_rc 0 "messages in 16-byte pieces (NTKD_TEST_MPI_PIECE=16), mpirun -np 3" \
    guarded 120 mpirun -np 3 -x LD_PRELOAD="$W/sendsize.so" -x SENDSIZE_OUT="$W/sent" \
    -x NTKD_TEST_MPI_PIECE=16 "$NTKD" pc3.conf
  check "... every worker message was at most 16 bytes (no tile through MPI)" $PY -c "
big = [int(open('sent.%d' % r).read().split()[0]) for r in (1, 2)]
count = [int(open('sent.%d' % r).read().split()[1]) for r in (1, 2)]
print('    largest worker message: %s bytes, %s messages' % (big, count))
assert max(big) <= 16 and sum(count) >= 9 * 21, (big, count)  # per tile: result 1 + 3 pieces, written 1 + 4
"
else
  echo "skipped: the message-size check (mpicc cannot build a PMPI wrapper: $(head -1 sendsize.err))"
  expect_rc 0 "messages in 16-byte pieces (NTKD_TEST_MPI_PIECE=16), mpirun -np 3" \
    guarded 120 env NTKD_TEST_MPI_PIECE=16 mpirun -np 3 "$NTKD" pc3.conf
fi
check "... byte-identical to the single process" export_cmp pc3.ntk pc1.npy

# --- calibration ------------------------------------------------------------------------
# Sizes, not limits: the 21-tile job's tiles stay far under worker_timeout
# = 3 s (until a tile has come back that is the stall limit; then 3x the
# slowest tile), so that only the stopped worker is counted out, also when
# other load slows this machine down 10x; the signal jobs' tiles take a
# few seconds, more than Open MPI's 1 s kill grace (so that a grace that
# did not reach mpirun would show) and at most a sixth of GRACE, in a job
# that outlasts GRACE several times (mpirun sends SIGTERM GRACE seconds
# after the signal, SIGKILL GRACE seconds later). Layers cost
# ~30x more on some machines than on others (an AVX2 EPYC against a Zen 5:
# the Erf map runs scalar), so the depths come from this machine's time for
# one 512 x 512 tile of 50 [Dense Erf] layers (erf_depth in e2e_lib.sh):
# at most 1000 and 2000 layers (the depths of a fast machine),
# tiles of at most 0.25 s and 1.5 s. Under NTKD_TEST_SLOW those two scenarios
# are not run and the depth is 1000 / SLOW.
if [ "$SLOW" -gt 1 ]; then
  MID_LAYERS=$((1000 / SLOW)) SIG_LAYERS=0
else
  job cal cal.npy "[Dense Erf]*50 Dense" 512
  guarded 300 "$NTKD" cal.conf >/dev/null 2>cal.log
  MID_LAYERS=$(erf_depth 0.25 cal.log 50 1 10 1000)
  SIG_LAYERS=$(erf_depth 1.5 cal.log 50 2.25 10 2000)  # a 768 x 768 tile: 2.25 times the entries
  echo "    calibration: $(sed -n 's/.*\(tiles [0-9.]* s\)$/\1/p' cal.log) for 50 layers of one 512 x 512 tile: $MID_LAYERS and $SIG_LAYERS layers below"
  # The square-root rule extrapolates 4-40x from a 0.02-0.1 s run; one tile
  # of the signal jobs at that depth, timed, corrects it (linearly: the time
  # per layer grows with depth, so a deeper correction overshoots, never
  # under). A 0.4 s tile once let the 66 tiles finish inside GRACE.
  job cal2 sig1.npy "[Dense Erf]*$SIG_LAYERS Dense" 768
  guarded 300 "$NTKD" cal2.conf >/dev/null 2>cal2.log
  SIG_LAYERS=$(erf_depth 1.5 cal2.log "$SIG_LAYERS" 1 10 4000 1)
  echo "    one 768 x 768 tile of the signal jobs: $(sed -n 's/.*\(tiles [0-9.]* s\)$/\1/p' cal2.log): $SIG_LAYERS layers below"
fi

# --- a failed send or receive ends the job ---------------------------------------------
MID="[Dense Erf]*$MID_LAYERS Dense"
job ref mid.npy "$MID" 512
expect_rc 0 "reference: a clean run of the 21-tile job" guarded 300 $FAST mpirun -np 3 "$NTKD" ref.conf
"$NTKD" export ref.ntk ref.npy >/dev/null 2>&1

job fs mid.npy "$MID" 512
expect_rc 1 "a worker's failed send (NTKD_TEST_FAIL_SEND=1:3) ends the job (a hang would give 124)" \
  guarded 300 $FAST mpirun -np 3 -x NTKD_TEST_FAIL_SEND=1:3 "$NTKD" fs.conf
check "... saying which rank and what failed" has "error: worker rank 1: MPI send to rank 0 failed: MPI_ERR_TAG" err.log
check "... and that the store is synced" has "tiles in the store, synced; ending every rank" err.log
n=$(tiles_done fs.ntk)
check "... the store verifies with the ${n:-no} tiles it holds" bash -c "[ '${n:-0}' -ge 1 ] && \"$NTKD\" verify fs.ntk >/dev/null"
check "... no rank left running" no_ranks_left "ntkd fs.conf"

job fr mid.npy "$MID" 512
expect_rc 1 "the coordinator's failed receive (NTKD_TEST_FAIL_RECV=0:4) ends the job (a hang would give 124)" \
  guarded 300 $FAST mpirun -np 3 -x NTKD_TEST_FAIL_RECV=0:4 "$NTKD" fr.conf
check "... saying what failed" has "error: worker rank [12]: MPI receive from rank [12] failed: MPI_ERR_TAG" err.log
n=$(tiles_done fr.ntk)
check "... the store verifies with the ${n:-no} tiles it holds" bash -c "[ -n '$n' ] && \"$NTKD\" verify fr.ntk >/dev/null"
check "... no rank left running" no_ranks_left "ntkd fr.conf"

if [ "$SLOW" -gt 1 ]; then
  echo "not run (NTKD_TEST_SLOW=$SLOW): a stalled worker and signals to mpirun, whose scenarios need tiles of seconds at most"
else
# --- a worker that stops answering --------------------------------------------------
job stl mid.npy "$MID" 512 "worker_timeout = 3"
running stl 2
stopped=$(rank_pids "ntkd stl.conf" 2)
kill -STOP $stopped
wait $mp
rc=$?
kill $WD 2>/dev/null
kill -CONT $stopped 2>/dev/null
check "a SIGSTOPped worker (worker_timeout = 3) ends the job with exit 9, not the watchdog's kill (exit $rc)" [ "$rc" = 9 ]
# ntkd's own account, not the test's clock: silent for longer than its
# limit, and the limit at least worker_timeout.
read -r quiet limit < <(sed -n 's/.*returned nothing for \([0-9.]*\) s while holding [0-9]* tiles\? (limit \([0-9.]*\) s).*/\1 \2/p' stl.log | head -1)
check "... counted out after ${quiet:-?} s of silence, at its limit of ${limit:-?} s (at least worker_timeout)" \
  $PY -c "assert float('${limit:-nan}') >= 3 and float('${quiet:-nan}') >= float('${limit:-nan}')"
check "... naming the rank and for how long it was silent" \
  grep -q "error: worker rank 2 stopped answering: nothing for [0-9.]* s" stl.log
n=$(tiles_done stl.ntk)
check "... the store verifies with the ${n:-no} tiles it holds" bash -c "[ '${n:-0}' -ge 2 ] && \"$NTKD\" verify stl.ntk >/dev/null"
check "... no rank left running" no_ranks_left "ntkd stl.conf"
expect_rc 0 "... a rerun resumes and finishes" guarded 300 $FAST mpirun -np 3 "$NTKD" stl.conf
check "... computing only the missing tiles" has "$((21 - ${n:-0})) of 21 tiles to compute" err.log
check "... byte-identical to a clean run" export_cmp stl.ntk ref.npy

# --- worker_timeout below one tile's time ------------------------------------------
# Until a tile has come back, worker_timeout alone applies: a healthy worker
# is counted out at every run. The message says so, and what to raise.
job wt mid.npy "$MID" 3072 "worker_timeout = 0.01"
expect_rc 9 "worker_timeout = 0.01, below the one tile's time: exit 9 before it comes back" \
  guarded 300 $FAST mpirun -np 2 "$NTKD" wt.conf
check "... saying worker_timeout alone applies until a tile comes back, and to raise it" \
  has "no tile of this run has come back yet, so worker_timeout alone applies: if one tile takes longer than that, raise \[compute\] worker_timeout" err.log

# --- the coordinator stopped, not a worker ----------------------------------------
# Rank 0 SIGSTOPped for 4 s (worker_timeout = 8): the workers' messages
# wait unread meanwhile, which is nobody's silence, and the workers wait
# for rank 0 less than their limit. The job goes on and ends 0. (Rank 0
# once counted a healthy worker out as soon as it ran again.)
job stc mid.npy "$MID" 512 "worker_timeout = 8"
running stc 1
coord=$(rank_pids "ntkd stc.conf" 0)
kill -STOP $coord
sleep 4
kill -CONT $coord
wait $mp
rc=$?
kill $WD 2>/dev/null
check "the coordinator SIGSTOPped for 4 s (worker_timeout = 8): the job goes on and ends 0 (exit $rc)" [ "$rc" = 0 ]
check "... counting no worker out, no worker ending the job" \
  bash -c "! grep -q 'counting it out\|rank 0 stopped answering' stc.log"
check "... byte-identical to a clean run" export_cmp stc.ntk ref.npy

# The next two jobs: tiles twice as deep (at most about 0.5 s, 5 s for the
# job), so that rank 0 is stopped while tiles are left, also when this
# script is slow to send the signal, and 3 tiles stay under the limit.
ST0="[Dense Erf]*$((2 * MID_LAYERS)) Dense"
job ref0 mid.npy "$ST0" 512
expect_rc 0 "reference: a clean run of the deeper 21-tile job" guarded 300 $FAST mpirun -np 3 "$NTKD" ref0.conf
"$NTKD" export ref0.ntk ref0.npy >/dev/null 2>&1

# A healthy rank 0 busy for longer than the workers' limit: the audit of
# a resumed store (the records below the index's sync mark) held back
# 10 s (NTKD_TEST_AUDIT_DELAY, as on a store of many gigabytes) while the
# workers, their tiles done, wait for the tiles it may give back
# (worker_timeout = 3). Rank 0 tells them every second that it is alive:
# the job ends 0. (Without that a worker ended it: exit 9.)
job au mid.npy "$ST0" 512 "worker_timeout = 3"
running au 2
kill -TERM $(rank_pids "ntkd au.conf" 0)
wait $mp
rc=$?
kill $WD 2>/dev/null
check "SIGTERM to rank 0 stops a job (exit $rc), its store to be resumed from the index" [ "$rc" = 5 ]
expect_rc 0 "... resumed with the audit 10 s late (worker_timeout = 3): the workers wait for it" \
  guarded 300 $FAST mpirun -np 3 -x NTKD_TEST_AUDIT_DELAY=10 "$NTKD" au.conf
check "... saying the test setting aloud (docs/CLI.md)" has "test setting NTKD_TEST_AUDIT_DELAY=10" err.log
check "... the audit ran, after the tiles" has "resume check of the records below the index's sync mark: all intact" err.log
check "... no worker took rank 0 for stopped" bash -c "! grep -q 'rank 0 stopped answering' err.log"
check "... byte-identical to a clean run" export_cmp au.ntk ref0.npy

# The whole job suspended (mpirun and every rank SIGSTOPped together, as
# SLURM's `scontrol suspend` or a gang scheduler does) for 8 s, past
# worker_timeout = 3: no rank ran meanwhile, so nobody was silent. The
# job goes on and ends 0. (A worker once took the time for rank 0's
# silence when it ran again: exit 9, in 3 of 4 runs of this job before the
# fix.) Tiles of 64 through 5 layers, 1 176 of them: the workers spend
# most of the job waiting for rank 0's grants, where the suspend finds
# them.
job susref mid.npy "[Dense Erf]*4 Dense" 64
expect_rc 0 "reference: a clean run of the 1 176-tile job" guarded 300 $FAST mpirun -np 3 "$NTKD" susref.conf
"$NTKD" export susref.ntk susref.npy >/dev/null 2>&1
# suspend_job NAME SECONDS: mpirun and every rank of NAME.conf SIGSTOPped
# together for SECONDS, then continued.
suspend_job() {
  local all
  all="$mp $(rank_pids "ntkd $1.conf")"
  kill -STOP $all
  sleep "$2"
  kill -CONT $all
}
job sus mid.npy "[Dense Erf]*4 Dense" 64 "worker_timeout = 3"
running sus 200
suspend_job sus 8
wait $mp
rc=$?
kill $WD 2>/dev/null
check "the whole job SIGSTOPped for 8 s (worker_timeout = 3): it goes on and ends 0 (exit $rc)" [ "$rc" = 0 ]
check "... counting no worker out, no worker ending the job" \
  bash -c "! grep -q 'counting it out\|rank 0 stopped answering' sus.log"
check "... byte-identical to a clean run" export_cmp sus.ntk susref.npy
# The suspend is no measure of rank 0's pace either: after it, rank 0
# stopped for good is found at worker_timeout, not at 3 times the suspend
# (the stretch across it counted, the limit was 24 s for the rest of the run).
job sus2 mid.npy "[Dense Erf]*$((4 * MID_LAYERS)) Dense" 64 "worker_timeout = 3"
running sus2 100
suspend_job sus2 8
sleep 1
coord=$(rank_pids "ntkd sus2.conf" 0)
kill -STOP $coord
wait $mp
rc=$?
kill $WD 2>/dev/null
check "after that suspend, rank 0 stopped for good ends the job with exit 9 (exit $rc)" [ "$rc" = 9 ]
read -r limit < <(sed -n 's/.*rank [12]: waited [0-9.]* s for rank 0 .*(limit \([0-9.]*\) s: .*/\1/p' sus2.log | head -1)
check "... at a limit of ${limit:-?} s: worker_timeout, not 3x the 8 s suspend" \
  $PY -c "assert 3 <= float('${limit:-nan}') < 8"
kill -CONT $coord 2>/dev/null
kill -KILL $coord 2>/dev/null
check "... no rank left running" no_ranks_left "ntkd sus2.conf"

# Rank 0 SIGSTOPped and left so (worker_timeout = 3), while the workers
# wait for its grants: a worker ends the job after its limit (exit 9)
# instead of waiting until the allocation's time limit; what the workers
# wrote stays, and a rerun resumes. A hang is ended by the watchdog (60 s;
# the job needs the limit, a tile and MPI_Abort), and fails the check.
job st0 mid.npy "$ST0" 512 "worker_timeout = 3"
running st0 1
kill $WD 2>/dev/null
coord=$(rank_pids "ntkd st0.conf" 0)
kill -STOP $coord
watchdog $mp 60
stopped_at=$SECONDS
wait $mp
rc=$?
kill $WD 2>/dev/null
check "the coordinator SIGSTOPped for good (worker_timeout = 3): a worker ends the job with exit 9 after $((SECONDS - stopped_at)) s, not the watchdog's kill at 60 s (exit $rc)" [ "$rc" = 9 ]
check "... no rank left running, the stopped rank 0 included" no_ranks_left "ntkd st0.conf"
kill -CONT $coord 2>/dev/null
kill -KILL $coord 2>/dev/null
# ntkd's own account: how long the worker waited, against its limit.
read -r waited limit < <(sed -n 's/.*rank [12]: waited \([0-9.]*\) s for rank 0 to send .*(limit \([0-9.]*\) s: .*/\1 \2/p' st0.log | head -1)
check "... a worker waited ${waited:-?} s for rank 0, at its limit of ${limit:-?} s (at least worker_timeout)" \
  $PY -c "assert float('${limit:-nan}') >= 3 and float('${waited:-nan}') >= float('${limit:-nan}')"
check "... saying so on one line: the rank, the limit and its key, the store kept, rerun to resume" \
  grep -q "^ntkd: rank [12]: waited [0-9.]* s for rank 0 to send \(the grant for tile [0-9]*\|this rank's next tile or the end\): rank 0 stopped answering (limit [0-9.]* s: \[compute\] worker_timeout, at least 3x the longest stretch between two of its messages); ending the job: the store keeps every tile written so far; rerun the same command to resume$" st0.log
check "... counting no worker out" bash -c "! grep -q 'counting it out' st0.log"
n=$(tiles_done st0.ntk)
check "... the store verifies with the ${n:-no} tiles it holds" bash -c "[ '${n:-0}' -ge 1 ] && \"$NTKD\" verify st0.ntk >/dev/null"
expect_rc 0 "... a rerun resumes and finishes" guarded 300 $FAST mpirun -np 3 "$NTKD" st0.conf
check "... computing only the missing tiles" has "$((21 - ${n:-0})) of 21 tiles to compute" err.log
check "... byte-identical to a clean run" export_cmp st0.ntk ref0.npy

# --- SIGINT and SIGTERM to mpirun ---------------------------------------------------------
# Tiles of 1.5 s: more than Open MPI's default grace (1 s), a sixth of
# GRACE; 66 of them, 50 s of work for two workers. mpirun sends the ranks
# SIGTERM GRACE seconds after the signal and SIGKILL GRACE seconds later;
# every tile they then hold must still reach the store.
echo "    kill grace: OMPI_MCA_odls_base_sigkill_timeout=$GRACE (as scripts/slurm/kernel.sbatch sets it)"
for sig in INT TERM; do
  job "sg$sig" sig.npy "[Dense Erf]*$SIG_LAYERS Dense" 768
  OMPI_MCA_odls_base_sigkill_timeout=$GRACE mpirun -np 3 "$NTKD" "sg$sig.conf" >/dev/null 2>"sg$sig.log" &
  mp=$!
  watchdog $mp 600
  wait_tiles "sg$sig.ntk" 1 300
  kill -$sig $mp
  wait $mp
  rc=$?
  kill $WD 2>/dev/null
  check "SIG$sig to mpirun: mpirun exits 1, as Open MPI does after that signal (exit $rc)" [ "$rc" = 1 ]
  check "... the ranks were asked to stop (SIGTERM from mpirun)" has "signal 15: finishing the tiles in flight" "sg$sig.log"
  check "... and stopped cleanly before mpirun's SIGKILL" has "interrupted with [0-9]* of 66 tiles stored" "sg$sig.log"
  check "... every tile a worker returned is in the store" $PY -c "
import re
log = open('sg$sig.log').read()
back = sum(int(c) for c in re.findall(r'rank \d+: (\d+)', re.search(r'tiles per worker:.*', log).group(0)))
stored = int('$(tiles_done "sg$sig.ntk")' or -1)
print('    returned %d, stored %d of 66' % (back, stored))
assert stored == back and back >= 1
"
  check "... the store verifies" bash -c "\"$NTKD\" verify sg$sig.ntk >/dev/null"
  check "... no rank left running" no_ranks_left "ntkd sg$sig.conf"
done

fi

echo "e2e_hangs: $passed passed, $failed failed"
[ "$failed" = 0 ]
