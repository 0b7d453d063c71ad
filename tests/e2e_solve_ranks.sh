#!/usr/bin/env bash
# `ntkd solve` under mpirun when something happens on a rank other than 0:
# a stop signal on rank 1 or 2 (every method: exit 5, nothing claimed
# complete), a damaged tile that rank 1 reads (its message names the tile
# and the store), the store replaced while the ranks open it (refused: the
# ranks would read different stores; `ntkd verify` the same, and a store
# whose tiles differ between the ranks' opens), and the messages of a rank
# that fails (never an empty "ntkd: rank R:" line).
# Usage: tests/e2e_solve_ranks.sh path/to/ntkd
set -u
NTKD=$(readlink -f "${1:?usage: e2e_solve_ranks.sh path/to/ntkd}")
source "$(dirname "$(readlink -f "$0")")/e2e_lib.sh"

$PY -c "
import numpy as np; r = np.random.default_rng(11)
x = r.standard_normal((700, 12)); w = r.standard_normal((12, 4))
y = np.argmax(x @ w, axis=1)
np.save('xtr.npy', x[:600]); np.save('xte.npy', x[600:]); np.save('ytr.npy', y[:600]); np.save('yte.npy', y[600:])"
# job NAME STORE METHOD [extra lines]: a regression job of 600 + 100 samples, tile 128
job() {
  local name=$1 store=$2 method=$3; shift 3
  {
    printf '[data]\npath = xtr.npy\nlabels = ytr.npy\n[test]\npath = xte.npy\nlabels = yte.npy\n'
    printf '[model]\narch = Dense Relu Dense Erf Dense\nkernel = ntk\n[compute]\nprecision = float64\ntile = 128\n'
    printf '[output]\npath = %s\n[solve]\nridge = 1e-4, 1e-2\npredictions = %s\nmethod = %s\n' "$store" "$name" "$method"
    for l in "$@"; do printf '%s\n' "$l"; done
  } > "$name.conf"
}
# wait_file_has TEXT FILE: poll (up to 60 s) until FILE holds TEXT
wait_file_has() { for i in $(seq 1200); do grep -q -- "$1" "$2" 2>/dev/null && return 0; sleep 0.05; done; return 1; }
job k k.ntk lapack
expect_rc 0 "the store (and its lapack solve)" mpirun -np 2 "$NTKD" k.conf

# --- a stop signal on a rank other than 0 -------------------------------------------
# NTKD_TEST_OPEN_LATE holds the ranks other than 0 before they open
# the store: SIGTERM reaches rank R there, while rank 0 waits for it. With
# lapack rank 0 alone computes, and it never saw the signal: the solve
# ended with exit 0 and every file written.
for m in lapack scalapack cg; do
  for np in 2 3; do
    R=$((np - 1))
    job "st$m$np" k.ntk "$m"
    rm -f err.log # the case before's says the same (see wait_file_has)
    NTKD_TEST_OPEN_LATE=4 mpirun -np $np "$NTKD" solve k.ntk "st$m$np.conf" > out.log 2> err.log &
    mp=$!
    # Rank 0 says the setting once every rank has passed the collective
    # before the solve: rank R has its handlers and is asleep or about to be.
    wait_file_has "test setting NTKD_TEST_OPEN_LATE=4" err.log
    kill -TERM $(rank_pids "ntkd solve k.ntk st$m$np.conf" $R)
    wait $mp
    rc=$?
    check "$m, -np $np: SIGTERM on rank $R during the solve: exit 5" [ $rc = 5 ]
    check "... saying so" has "interrupted during the solve (the store is complete)" err.log
    check "... no predictions written" bash -c "! ls st$m$np-*.npy 2>/dev/null"
    check "... no success line" bash -c "! grep -q 'predictions in' err.log"
    check "... no empty rank line" bash -c "! grep -qE '^ntkd: rank [0-9]+: *$' err.log"
    [ $rc = 5 ] || sed 's/^/    /' err.log | tail -5
  done
done

# --- a stop signal on rank 1 while rank 0 solves alone (lapack) ---------------------
# Rank 1 waits in the agreement after the kernel's solve, its stop flag
# given as it was when it began to wait: a SIGTERM there was seen only after
# rank 0 had written every file of the kernel (exit 5 over a new set). It is
# read again before the files. NTKD_TEST_SOLVE_PAUSE makes rank 0's solve
# last 3 s.
job stp k.ntk lapack
rm -f err.log
NTKD_TEST_SOLVE_PAUSE=3 mpirun -np 2 "$NTKD" solve k.ntk stp.conf > out.log 2> err.log &
mp=$!
wait_file_has "test setting NTKD_TEST_SOLVE_PAUSE=3: rank 0 paused in the solve" err.log
sleep 0.5 # rank 1 in the agreement after the solve
kill -TERM $(rank_pids "ntkd solve k.ntk stp.conf" 1)
wait $mp
rc=$?
check "lapack, -np 2: SIGTERM on rank 1 while rank 0 solves alone: exit 5" [ $rc = 5 ]
check "... saying another rank was stopped" has "interrupted during the solve (the store is complete): another rank was stopped by a signal" err.log
check "... no predictions written" bash -c "! ls stp-*.npy 2>/dev/null"
check "... no success line" bash -c "! grep -q 'predictions in' err.log"
[ $rc = 5 ] || sed 's/^/    /' err.log | tail -5

# --- a damaged tile that a rank other than 0 reads ---------------------------------
# A payload byte of tile 1 (train rows 128..255 x columns 0..127) flipped:
# opening the store reads headers only, so the solve meets it when it
# reads the tile. cg deals tile 1 to rank 1 (tiles go in index order to
# the least loaded rank), which alone reads it: rank 0 said only "another
# rank failed (its message names it)" and no rank named it.
cp k.ntk d.ntk && cp k.ntk.index d.ntk.index
off=$("$NTKD" info --records d.ntk | awk '$1 == "record:" && $2 == 1 {print $3}')
damage d.ntk $((off + 200))
for m in "cg" "cg stream" "scalapack"; do
  for np in 2 3; do
    name=d${m// /}$np
    if [ "$m" = "cg stream" ]; then job "$name" d.ntk cg "cg_kernel = stream"; else job "$name" d.ntk "$m"; fi
    expect_rc 4 "$m, -np $np: tile 1 damaged, read by rank 1: exit 4" mpirun -np $np "$NTKD" solve d.ntk "$name.conf"
    check "... the message names the tile and the store" has "d.ntk: tile 1 (offset $off) is damaged: checksum mismatch" err.log
    check "... no predictions written" bash -c "! ls $name-*.npy 2>/dev/null"
    check "... no empty rank line" bash -c "! grep -qE '^ntkd: rank [0-9]+: *$' err.log"
  done
done

# --- the store replaced while the ranks open it ----------------------------------
# Rank 0 opens the store and checks it against the job; the other ranks
# open it by path afterwards (NTKD_TEST_OPEN_LATE holds them 4 s).
# A store of other data (the inputs scaled by 1.01) renamed over it in
# between: the ranks read two stores, and cg and scalapack gave a mix of
# both with exit 0 (at ridges 1 and 10, where the mixed matrix is still
# positive definite; at 1e-4 the mix failed as not positive definite).
$PY -c "
import numpy as np
np.save('otr.npy', np.load('xtr.npy') * 1.01); np.save('ote.npy', np.load('xte.npy') * 1.01)"
job o o.ntk lapack
sed -i -e 's/^path = xtr.npy/path = otr.npy/' -e 's/^path = xte.npy/path = ote.npy/' o.conf
expect_rc 0 "another store of the same shape (other data)" mpirun -np 2 "$NTKD" o.conf
for m in cg scalapack lapack; do
  for np in 2 3; do
    name=r$m$np
    cp k.ntk r.ntk && cp k.ntk.index r.ntk.index && cp o.ntk ro.ntk && cp o.ntk.index ro.ntk.index
    job "$name" r.ntk "$m"
    sed -i 's/^ridge = .*/ridge = 1, 10/' "$name.conf"
    # err.log of the case before says the same: removed first, as the
    # background job may create it after the wait below has begun.
    rm -f err.log
    NTKD_TEST_OPEN_LATE=4 mpirun -np $np "$NTKD" solve r.ntk "$name.conf" > out.log 2> err.log &
    mp=$!
    check "$m, -np $np: rank 0 has opened the store" wait_file_has "test setting NTKD_TEST_OPEN_LATE=4" err.log
    mv ro.ntk.index r.ntk.index && mv ro.ntk r.ntk
    wait $mp
    rc=$?
    check "$m, -np $np: the store replaced before rank 1 opened it: exit 4" [ $rc = 4 ]
    check "... saying it was replaced" has "r.ntk: rank 1 opened another store than rank 0 (of another job): the file was replaced" err.log
    check "... no predictions written" bash -c "! ls $name-*.npy 2>/dev/null"
    check "... no success line" bash -c "! grep -q 'predictions in' err.log"
    [ $rc = 4 ] || sed 's/^/    /' err.log | tail -5
  done
done

# --- ntkd verify under mpirun: the same opens --------------------------------------
# Each rank checks every size-th tile of the list its own open found. A
# store replaced between the opens: exit 4, as the solve. The same store
# with other tiles (a job still writing it; here: cut short before the
# record of the tile at position 1 of the sorted list, which is damaged in
# the copy rank 0 opens): rank 0 left that tile to rank 1, whose list
# lacks it, and verify said the damaged store was fine (exit 0).
cp k.ntk r.ntk && cp k.ntk.index r.ntk.index && cp o.ntk ro.ntk && cp o.ntk.index ro.ntk.index
rm -f err.log
NTKD_TEST_OPEN_LATE=4 mpirun -np 2 "$NTKD" verify r.ntk > out.log 2> err.log &
mp=$!
check "verify, -np 2: rank 0 has opened the store" wait_file_has "test setting NTKD_TEST_OPEN_LATE=4" err.log
mv ro.ntk.index r.ntk.index && mv ro.ntk r.ntk
wait $mp
rc=$?
check "verify, -np 2: the store replaced before rank 1 opened it: exit 4 (exit $rc)" [ $rc = 4 ]
check "... saying it was replaced and nothing was verified" \
  has "r.ntk: rank 1 opened another store than rank 0 (of another job): the file was replaced while the ranks opened it; nothing was verified" err.log
read -r dtile doff < <("$NTKD" info --records k.ntk | awk '$1 == "record:" {print $2, $3}' | sort -n | sed -n 2p)
cp k.ntk r.ntk && cp k.ntk.index r.ntk.index && head -c "$doff" k.ntk > rp.ntk
damage r.ntk $((doff + 200))
expect_rc 4 "verify on one process: tile $dtile of the copy is damaged (exit 4)" "$NTKD" verify r.ntk
rm -f err.log
NTKD_TEST_OPEN_LATE=4 mpirun -np 2 "$NTKD" verify r.ntk > out.log 2> err.log &
mp=$!
check "verify, -np 2: rank 0 has opened the damaged store" wait_file_has "test setting NTKD_TEST_OPEN_LATE=4" err.log
rm -f r.ntk.index && mv rp.ntk r.ntk
wait $mp
rc=$?
check "verify, -np 2: rank 1 opened the store with fewer tiles: exit 7, never 0 over the damaged tile $dtile (exit $rc)" \
  [ $rc = 7 ]
check "... saying a job is writing it and nothing was verified" \
  has "r.ntk: rank 1 found [0-9]* stored tiles, rank 0 [0-9]* (or other ones): a job is writing the store while the ranks open it; nothing was verified" err.log

# --- a rank's own stop inside the ScaLAPACK solve ---------------------------------
# NTKD_TEST_SCALAPACK_STOP=R:K: rank R raises SIGTERM at its K-th stop
# point, inside the method (past the driver's agreement). Rank R passed a
# bare status to the agreement, which printed it as an empty
# "ntkd: rank R:" line.
for np in 2 3; do
  R=$((np - 1))
  for K in 1 2; do
    job "sp$np$K" k.ntk scalapack
    NTKD_TEST_SCALAPACK_STOP=$R:$K expect_rc 5 "scalapack, -np $np: SIGTERM on rank $R at its stop point $K: exit 5" \
      mpirun -np $np "$NTKD" solve k.ntk "sp$np$K.conf"
    check "... saying so" has "interrupted during the solve (the store is complete)" err.log
    check "... rank $R says why it stopped" has "^ntkd: rank $R: stopped by a signal" err.log
    check "... no empty rank line" bash -c "! grep -qE '^ntkd: rank [0-9]+: *$' err.log"
    check "... no predictions written" bash -c "! ls sp$np$K-*.npy 2>/dev/null"
    check "... no table: not even its header (printed before any row, it had none)" bash -c "! grep -q 'test acc' out.log"
  done
done

echo "e2e_solve_ranks: $passed passed, $failed failed"
[ "$failed" = 0 ]
