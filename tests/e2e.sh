#!/usr/bin/env bash
# End-to-end tests of the ntkd binary: runs, resume after SIGKILL at several
# points, mpirun -np 3 byte-identical to one process, refusals, damage,
# exit codes. Usage: tests/e2e.sh path/to/ntkd
set -u
NTKD=$(readlink -f "${1:?usage: e2e.sh path/to/ntkd}")
source "$(dirname "$(readlink -f "$0")")/e2e_lib.sh"

$PY - <<'PYEOF'
import numpy as np
rng = np.random.default_rng(3)
np.save('small.npy', rng.standard_normal((700, 40)).astype(np.float32))
np.save('big.npy', rng.standard_normal((8192, 784)).astype(np.float32))
x = rng.standard_normal((10, 6)); x[3, 2] = np.nan
np.save('nan.npy', x)
PYEOF

job() { # job NAME DATA TILE PRECISION [extra lines...]
  local name=$1 data=$2 tile=$3 prec=$4; shift 4
  {
    printf '[data]\npath = %s\n[model]\narch = Dense(b_std=0.1) Relu Dense Erf Dense\nw_std = 1.4\nkernel = ntk\n' "$data"
    printf '[compute]\nprecision = %s\ntile = %s\n[output]\npath = %s.ntk\nprogress = 1\n' "$prec" "$tile" "$name"
    for l in "$@"; do printf '%s\n' "$l"; done
  } > "$name.conf"
}

# --- a run, info, verify, export -------------------------------------------
job a small.npy 512 float32
expect_rc 0 "single-process run" "$NTKD" a.conf
check "progress and result path reported" has "result in" err.log
expect_rc 0 "info" "$NTKD" info a.ntk
check "info shows shape and completion" bash -c "grep -q '700 x 700' out.log && grep -q 'complete' out.log && grep -q 'ratio' out.log"
expect_rc 0 "verify" "$NTKD" verify a.ntk
expect_rc 0 "export ntk" "$NTKD" export a.ntk a_ntk.npy --kernel ntk
expect_rc 0 "export nngp" "$NTKD" export a.ntk a_nngp.npy --kernel nngp
check "export is a symmetric float32 700x700 matrix, NTK >= NNGP on the diagonal" $PY -c "
import numpy as np
k = np.load('a_ntk.npy'); g = np.load('a_nngp.npy')
assert k.shape == (700, 700) and k.dtype == np.float32, (k.shape, k.dtype)
assert np.array_equal(k, k.T) and np.array_equal(g, g.T)
assert np.all(np.diag(k) >= np.diag(g)) and np.all(np.isfinite(k))
"

# --- same bits for any tile size and rank count -------------------------------
job b small.npy 100 float32
expect_rc 0 "ragged tiles (100, not dividing 700)" "$NTKD" b.conf
"$NTKD" export b.ntk b_ntk.npy >/dev/null 2>&1
check "tile 100 output byte-identical to tile 512" cmp -s a_ntk.npy b_ntk.npy
job c small.npy 333 float32
expect_rc 0 "mpirun -np 3" mpirun -np 3 "$NTKD" c.conf
"$NTKD" export c.ntk c_ntk.npy >/dev/null 2>&1
check "mpirun -np 3 (tile 333) byte-identical to single process" cmp -s a_ntk.npy c_ntk.npy
job d small.npy 700 float64
expect_rc 0 "float64 run" "$NTKD" d.conf
"$NTKD" export d.ntk d_ntk.npy >/dev/null 2>&1
check "float64 export and agreement with float32 within 1e-5" $PY -c "
import numpy as np
a = np.load('d_ntk.npy'); b = np.load('a_ntk.npy')
assert a.dtype == np.float64
assert np.max(np.abs(a - b) / np.abs(a).max()) < 1e-5
"
job d2 small.npy 64 float64
expect_rc 0 "float64 mpirun -np 3, tile 64" mpirun -np 3 "$NTKD" d2.conf
"$NTKD" export d2.ntk d2_ntk.npy >/dev/null 2>&1
check "float64 mpirun output byte-identical" cmp -s d_ntk.npy d2_ntk.npy
# level = 0: tiles stored raw (no shuffle, no zstd), read back the same by
# ntkd and by the Python reader.
job raw small.npy 256 float32 "level = 0"
expect_rc 0 "mpirun -np 3 with level = 0 (stored raw)" mpirun -np 3 "$NTKD" raw.conf
"$NTKD" export raw.ntk raw_ntk.npy >/dev/null 2>&1
check "... byte-identical to a zstd store" cmp -s a_ntk.npy raw_ntk.npy
check "... a store of the raw size (ratio 1.000)" bash -c "'$NTKD' info raw.ntk | grep -q 'ratio 1.000'"
expect_rc 0 "... verify passes" "$NTKD" verify raw.ntk
check "... the Python reader reads it" env PYTHONPATH="$SRC/python" $PY -c "
import numpy as np, ntkd_store
assert np.array_equal(ntkd_store.open('raw.ntk')['ntk'][:, :], np.load('a_ntk.npy'))"
# Pretend nodes (NTKD_TEST_NODES, docs/CLI.md): the data reach the ranks
# through node leaders and one shared window per node; the multi-node path.
job pn small.npy 128 float32
expect_rc 0 "mpirun -np 5 as 3 pretend nodes" env NTKD_TEST_NODES=3 mpirun -np 5 "$NTKD" pn.conf
check "... says the test setting aloud" has "test setting NTKD_TEST_NODES=3" err.log
check "... reports one copy of the data per node" has "data: one copy per node on 3 nodes" err.log
"$NTKD" export pn.ntk pn_ntk.npy >/dev/null 2>&1
check "... byte-identical to one process" cmp -s a_ntk.npy pn_ntk.npy
expect_rc 0 "... resumed with a test lock heartbeat" env NTKD_TEST_LOCK_HEARTBEAT=1 "$NTKD" pn.conf
check "... which it says aloud, once (docs/CLI.md)" \
  bash -c "[ \"\$(grep -c 'test setting NTKD_TEST_LOCK_HEARTBEAT=1' err.log)\" = 1 ]"
# export under mpirun: rank 0 alone writes (every rank once wrote the whole
# file, racing for the rename)
expect_rc 0 "mpirun -np 3 ntkd export" mpirun -np 3 "$NTKD" export pn.ntk pn_mx.npy
check "... one rank wrote it" bash -c "[ \$(grep -c 'wrote pn_mx.npy' err.log) = 1 ]"
check "... byte-identical" cmp -s a_ntk.npy pn_mx.npy
# The pml on one node (src/comm/comm_mpi.c): ob1 alone, unless the user
# chose one. Debian's own parameter file says "pml = ^ucx", an exclusion
# that leaves ob1 in: no choice (Open MPI's own selection, which also
# opens cm, cost 0.2 s of every job). Open MPI's verbose selection shows
# which components it opened.
pml_job() { # NAME SETTING...: the components the job's ranks opened
  job "$1" small.npy 128 float32
  local name=$1; shift
  env "$@" OMPI_MCA_pml_base_verbose=10 mpirun -np 2 "$NTKD" "$name.conf" >/dev/null 2>"$name.pml" || echo failed >>"$name.pml"
  sed -n 's/.*initializing pml component \([a-z0-9]*\).*/\1/p;/^failed$/p' "$name.pml" | sort -u | tr '\n' ' '
}
printf 'pml = ^ucx\n' > pml_excl.conf
printf 'pml = cm\n' > pml_choice.conf
got=$(pml_job pml1 OMPI_MCA_mca_base_param_files="$W/pml_excl.conf")
check "a parameter file's pml = ^ucx: ob1 alone (opened: $got)" [ "$got" = "ob1 " ]
got=$(pml_job pml2 OMPI_MCA_pml=^ucx)
check "OMPI_MCA_pml=^ucx: ob1 alone (opened: $got)" [ "$got" = "ob1 " ]
got=$(pml_job pml3 OMPI_MCA_mca_base_param_files="$W/pml_choice.conf")
check "a parameter file's pml = cm is kept (opened: $got)" [ "$got" = "cm " ]
got=$(pml_job pml4 OMPI_MCA_pml=cm)
check "OMPI_MCA_pml=cm is kept, not replaced by ob1 (opened: $got)" [ "$got" != "ob1 " ]

# --- CNN jobs: same bits for any rank count and tile size ---------------------
$PY -c "import numpy as np; np.save('img.npy', np.random.default_rng(9).standard_normal((37, 8, 8, 3)).astype(np.float32))"
cnn_job() { # NAME TILE ARCH
  printf '[data]\npath = img.npy\n[model]\narch = %s\nw_std = 1.4\nb_std = 0.1\n[compute]\ntile = %s\n[output]\npath = %s.ntk\n' "$3" "$2" "$1" > "$1.conf"
}
for spec in "gap|[Conv(3, 1, SAME) Relu]*3 GlobalAvgPool Dense" \
            "flat|Conv(3, 1, SAME) Erf Conv(3, 2, VALID) Relu Flatten Dense" \
            "pool|Conv(3, 1, SAME) Relu AvgPool(2) Conv(3, 1, SAME) Relu GlobalAvgPool Dense Relu Dense"; do
  name=${spec%%|*} arch=${spec#*|}
  cnn_job "c1$name" 37 "$arch"
  cnn_job "c3$name" 5 "$arch"
  expect_rc 0 "CNN ($name) single process" "$NTKD" "c1$name.conf"
  expect_rc 0 "CNN ($name) mpirun -np 3, tile 5" mpirun -np 3 "$NTKD" "c3$name.conf"
  "$NTKD" export "c1$name.ntk" "c1$name.npy" >/dev/null 2>&1
  "$NTKD" export "c3$name.ntk" "c3$name.npy" >/dev/null 2>&1
  check "CNN ($name): mpirun with tile 5 byte-identical to one tile" cmp -s "c1$name.npy" "c3$name.npy"
done

# --- resume after SIGKILL at several moments ----------------------------------
job clean big.npy 256 float32 "sync = 0"
"$NTKD" clean.conf >/dev/null 2>&1
"$NTKD" export clean.ntk clean.npy >/dev/null 2>&1
job k big.npy 256 float32 "sync = 0"
# Killed at events, not after delays (a loaded machine stretches any
# delay): once the store exists (set-up), then once it holds 10, 60, 120,
# 180 and 240 of its 528 tiles; each run resumes the one before.
prev=0
for n in 0 10 60 120 180 240; do
  "$NTKD" k.conf >/dev/null 2>&1 &
  pid=$!
  if [ $n = 0 ]; then wait_file k.ntk $pid; else wait_tiles k.ntk $n; fi
  kill -KILL $pid 2>/dev/null
  wait $pid 2>/dev/null
  done_now=$(tiles_done k.ntk)
  echo "    killed at ${n} tiles or more: ${done_now:-no store yet} tiles stored"
  [ -n "$done_now" ] && prev=$done_now
done
"$NTKD" k.conf >resume.log 2>&1
rc=$?
total=$("$NTKD" info k.ntk | sed -n 's/^progress: *[0-9]*\/\([0-9]*\) .*/\1/p')
check "resume after kills finishes (exit $rc)" [ "$rc" = 0 ]
check "resume computes only the missing tiles" bash -c "grep -q '$((total - prev)) of $total tiles to compute' resume.log || [ $prev = $total ]"
"$NTKD" export k.ntk k.npy >/dev/null 2>&1
check "killed-and-resumed matrix byte-identical to a clean run" cmp -s clean.npy k.npy
expect_rc 0 "verify after resume" "$NTKD" verify k.ntk

# Kill every rank of an mpirun job, then resume.
job km big.npy 256 float32 "sync = 0"
mpirun -np 3 "$NTKD" km.conf >/dev/null 2>&1 &
wait_tiles km.ntk 20
kill -KILL $(rank_pids "ntkd km.conf") 2>/dev/null
wait
expect_rc 0 "resume of an mpirun job whose ranks were all SIGKILLed" mpirun -np 3 "$NTKD" km.conf
"$NTKD" export km.ntk km.npy >/dev/null 2>&1
check "... and the matrix is byte-identical to a clean run" cmp -s clean.npy km.npy

# SIGTERM to a single process: clean stop, exit 5, resumable.
job st big.npy 256 float32
"$NTKD" st.conf >/dev/null 2>st.log &
pid=$!
wait_tiles st.ntk 20
kill -TERM $pid
wait $pid
rc=$?
check "SIGTERM gives exit 5 (interrupted, resumable)" [ "$rc" = 5 ]
check "SIGTERM message says how to resume" has "rerun the same command to resume" st.log
expect_rc 0 "store verifies after SIGTERM" "$NTKD" verify st.ntk
expect_rc 6 "export of an incomplete store refused" "$NTKD" export st.ntk st.npy
# docs/CLI.md: exit 6 names the first tile missing and how many are.
first=$("$NTKD" info --records st.ntk | awk '$1 == "record:" {have[$2] = 1} END {for (i = 0; i in have; i++); print i}')
check "... naming the first missing tile ($first) and the count: $(cat err.log)" \
  grep -Eq "is not complete \([0-9]+ of 528 tiles\), the first missing tile $first \(rows [0-9]+:[0-9]+, cols [0-9]+:[0-9]+\)" err.log
check "no partial export left behind" bash -c "! ls st.npy* >/dev/null 2>&1"
expect_rc 0 "resume after SIGTERM" "$NTKD" st.conf
"$NTKD" export st.ntk st.npy >/dev/null 2>&1
check "matrix after SIGTERM+resume byte-identical" cmp -s clean.npy st.npy

# SIGTERM to one worker rank only: it stops inside its tile (dropped, a
# rerun computes it), tells the coordinator, and the whole job stops
# cleanly with exit 5.
job wt big.npy 256 float32
mpirun -np 3 "$NTKD" wt.conf >/dev/null 2>wt.log &
mp=$!
wait_tiles wt.ntk 20
kill -TERM $(rank_pids "ntkd wt.conf" 2)
wait $mp
rc=$?
check "SIGTERM to a worker stops the whole job with exit 5 (exit $rc)" [ "$rc" = 5 ]
check "... the coordinator says which rank was signalled" has "worker rank 2 was signalled" wt.log
expect_rc 0 "... and the job resumes" mpirun -np 3 "$NTKD" wt.conf
"$NTKD" export wt.ntk wt.npy >/dev/null 2>&1
check "... byte-identical to a clean run" cmp -s clean.npy wt.npy
# The same signal to a worker that is idle, waiting for rank 0's check of
# the resumed store's records (held back 4 s, as on a large store): the
# worker tells the coordinator at once, the check stops, exit 5 (the
# signal was ignored: the job ran on to "done", exit 0).
NTKD_TEST_AUDIT_DELAY=4 mpirun -np 3 "$NTKD" wt.conf >/dev/null 2>wi.log &
mp=$!
for _ in $(seq 300); do grep -q "test setting NTKD_TEST_AUDIT_DELAY" wi.log && break; sleep 0.1; done
sleep 0.5
kill -TERM $(rank_pids "ntkd wt.conf" 2)
wait $mp
rc=$?
check "SIGTERM to a worker idle during the resume check stops the job with exit 5 (exit $rc)" [ "$rc" = 5 ]
check "... the check did not finish, and the job says so" bash -c "grep -q 'worker rank 2 was signalled' wi.log &&
  grep -q \"before the check of the resumed store's records finished\" wi.log && ! grep -q '^ntkd: done' wi.log"
expect_rc 0 "... and the rerun checks and ends done" mpirun -np 3 "$NTKD" wt.conf

# SLURM's batch script (scripts/slurm/kernel.sbatch) with scontrol stubbed:
# USR1 to the batch shell stops ntkd cleanly and requeues; the requeued run finishes.
# With Open MPI's 1 s kill grace: kernel.sbatch's 10 s would make mpirun
# wait 20 s after the ranks' exit 5 (e2e_hangs.sh tests the grace).
mkdir -p fakebin
printf '#!/bin/sh\necho "scontrol $*" >> "%s/scontrol.calls"\n' "$W" > fakebin/scontrol
chmod +x fakebin/scontrol
SBATCH=$SRC/scripts/slurm/kernel.sbatch
job sl big.npy 256 float32
PATH="$W/fakebin:$PATH" SLURM_JOB_ID=42 SLURM_NTASKS=3 NTKD="$NTKD" OMPI_MCA_odls_base_sigkill_timeout=1 bash "$SBATCH" sl.conf > sl1.log 2>&1 &
sb=$!
wait_tiles sl.ntk 20
kill -USR1 $sb
wait $sb
check "SLURM script: USR1 stops ntkd cleanly and requeues the job" bash -c "grep -q 'exit 5; requeueing' sl1.log && grep -q 'scontrol requeue 42' scontrol.calls"
rm -f scontrol.calls
PATH="$W/fakebin:$PATH" SLURM_JOB_ID=42 SLURM_NTASKS=3 SLURM_RESTART_COUNT=1 NTKD="$NTKD" OMPI_MCA_odls_base_sigkill_timeout=1 bash "$SBATCH" sl.conf > sl2.log 2>&1
check "SLURM script: the requeued run resumes and finishes without requeueing" bash -c "grep -q 'finished with exit 0' sl2.log && [ ! -e scontrol.calls ]"
"$NTKD" export sl.ntk sl.npy >/dev/null 2>&1
check "... byte-identical to a clean run" cmp -s clean.npy sl.npy

# --- damage --------------------------------------------------------------------
cp a.ntk dmg.ntk
size=$(stat -c %s dmg.ntk)
# A payload byte of the first record (its offset from `info --records`).
first=$("$NTKD" info --records dmg.ntk | sed -n 's/^record: *0 \([0-9]*\)$/\1/p')
damage dmg.ntk $((first + 128 + 100))
expect_rc 4 "verify finds a flipped byte" "$NTKD" verify dmg.ntk
check "verify names the damaged tile" has "damaged: tile" out.log
expect_rc 4 "export refuses a damaged store" "$NTKD" export dmg.ntk dmg.npy
check "no export written from a damaged store" [ ! -e dmg.npy ]
job dmg small.npy 512 float32
expect_rc 0 "rerun recomputes the damaged tile" "$NTKD" dmg.conf
check "rerun reported the damaged tile" has "damaged tiles to recompute" err.log
expect_rc 0 "verify after the recompute" "$NTKD" verify dmg.ntk
"$NTKD" export dmg.ntk dmg.npy >/dev/null 2>&1
check "recomputed matrix byte-identical" cmp -s a_ntk.npy dmg.npy
cp a.ntk torn.ntk
truncate -s $((size - 50)) torn.ntk
printf 'garbage' >> torn.ntk
job torn small.npy 512 float32
expect_rc 0 "resume from a truncated + garbage tail" "$NTKD" torn.conf
"$NTKD" export torn.ntk torn.npy >/dev/null 2>&1
check "matrix after torn tail byte-identical" cmp -s a_ntk.npy torn.npy
# Cut to half under its index: the tiles past the cut are lost, and the
# messages say so (they said "no tile is lost"); a rerun computes them.
cp a.ntk cut.ntk
cp a.ntk.index cut.ntk.index
truncate -s $((size / 2)) cut.ntk
expect_rc 4 "export of a store cut short under its index exits 4" "$NTKD" export cut.ntk cut.npy
check "... saying tiles are lost" has "cut short: the tiles the index places past its end are lost" err.log
check "... never that none is" bash -c "! grep -q 'no tile is lost' err.log"
expect_rc 4 "verify of it exits 4, saying the same" "$NTKD" verify cut.ntk
check "... saying the same" has "cut short: the tiles the index places past its end are lost" out.log
check "... and the Python reader too (it said no tile is lost)" env PYTHONPATH="$SRC/python" $PY -c "
import ntkd_store
try:
    ntkd_store.open('cut.ntk')['ntk'][:, :]
    raise SystemExit('read a store cut short')
except ntkd_store.DamagedStoreError as e:
    assert 'cut short: the tiles the index places past its end are lost' in str(e), e
    assert 'no tile is lost' not in str(e), e
r = ntkd_store.open('cut.ntk').verify(raise_on_damage=False)
assert any('cut short: the tiles the index' in p for p in r.problems), r.problems"
# Cut to its first records: the index is then longer than the store can
# need and is not read; the messages said "no tile is lost" there, all lost.
cp b.ntk cut2.ntk
cp b.ntk.index cut2.ntk.index
truncate -s 20000 cut2.ntk
expect_rc 4 "export of a store cut to 20 kB under its index exits 4" "$NTKD" export cut2.ntk cut2.npy
check "... saying tiles may be lost, never that none is" bash -c "grep -q 'more than this store can need' err.log &&
  grep -q 'unless the store was cut short under it: then the tiles past its end are lost' err.log &&
  ! grep -q 'no tile is lost' err.log"
check "... and the Python reader the same" env PYTHONPATH="$SRC/python" $PY -c "
import ntkd_store
try:
    ntkd_store.open('cut2.ntk')['ntk'][:, :]
    raise SystemExit('read a store cut short')
except ntkd_store.DamagedStoreError as e:
    assert 'unless the store was cut short under it: then the tiles past its end are lost' in str(e), e"
job cut2 small.npy 100 float32
expect_rc 0 "the rerun computes them again" "$NTKD" cut2.conf
"$NTKD" export cut2.ntk cut2.npy >/dev/null 2>&1
check "... to the matrix byte-identical" cmp -s b_ntk.npy cut2.npy
job cut small.npy 512 float32
expect_rc 0 "the rerun computes them again" "$NTKD" cut.conf
"$NTKD" export cut.ntk cut.npy >/dev/null 2>&1
check "... to the matrix byte-identical" cmp -s a_ntk.npy cut.npy

# --- a full disk (file-size limit) ---------------------------------------------
job fd big.npy 256 float32 "sync = 0"
(ulimit -f 20000; exec "$NTKD" fd.conf) >/dev/null 2>fd.log
rc=$?
check "a full disk stops the job with exit 3 (exit $rc)" [ "$rc" = 3 ]
check "... saying finished tiles are kept" has "finished tiles are kept" fd.log
check "... naming the file-size limit, as the workers' writes do" has "a file-size limit (ulimit -f: 20480000 bytes)" fd.log
kept=$("$NTKD" info fd.ntk 2>/dev/null | sed -n 's/^progress: *\([0-9]*\)\/.*/\1/p')
check "... with ${kept:-no} intact tiles in the store" bash -c "[ '${kept:-0}' -gt 0 ] && \"$NTKD\" verify fd.ntk >/dev/null"
expect_rc 0 "with room again, the job resumes and finishes" "$NTKD" fd.conf
"$NTKD" export fd.ntk fd.npy >/dev/null 2>&1
check "... byte-identical to a clean run" cmp -s clean.npy fd.npy
# The same with the workers writing (their MPI-IO write fails; rank 0 marks
# the place dead and stops the job).
job fdm big.npy 256 float32 "sync = 0"
(ulimit -f 20000; exec mpirun -np 3 "$NTKD" fdm.conf) >/dev/null 2>fdm.log
rc=$?
check "mpirun: a full disk under the workers' writes stops the job with exit 3 (exit $rc)" [ "$rc" = 3 ]
check "... saying finished tiles are kept" has "finished tiles are kept" fdm.log
check "... naming the file-size limit" has "a file-size limit (ulimit -f: 20480000 bytes)" fdm.log
check "... and the store verifies" "$NTKD" verify fdm.ntk
expect_rc 0 "with room again, the mpirun job resumes and finishes" mpirun -np 3 "$NTKD" fdm.conf
"$NTKD" export fdm.ntk fdm.npy >/dev/null 2>&1
check "... byte-identical to a clean run" cmp -s clean.npy fdm.npy

# --- refusals ------------------------------------------------------------------
cp a.ntk other.ntk
sed 's/w_std = 1.4/w_std = 1.5/; s/a.ntk/other.ntk/' a.conf > other.conf
expect_rc 2 "store of another job refused" "$NTKD" other.conf
check "refusal explains and mentions --overwrite" bash -c "grep -q 'another job' err.log && grep -q -- '--overwrite' err.log"
check "refused store untouched" cmp -s a.ntk other.ntk
expect_rc 0 "--overwrite replaces it" "$NTKD" other.conf --overwrite
echo "not a store at all" > notstore.ntk
sed 's/a.ntk/notstore.ntk/' a.conf > notstore.conf
expect_rc 2 "a foreign output file is refused" "$NTKD" notstore.conf
check "foreign file untouched" bash -c "[ \"\$(cat notstore.ntk)\" = 'not a store at all' ]"
expect_rc 2 "info on a non-store" "$NTKD" info notstore.ntk

# --- bad input ---------------------------------------------------------------
printf '[data]\npath = small.npy\n[model]\narch = Dense\n[compute]\ntiel = 5\n[output]\npath = x.ntk\n' > badkey.conf
expect_rc 2 "unknown key" "$NTKD" badkey.conf
check "message names file, line and key" has "badkey.conf:6: \[compute\] tiel: unknown key" err.log
printf '[data]\npath = small.npy\n[model]\narch = Relu Dense\n[output]\npath = x.ntk\n' > badarch.conf
expect_rc 2 "nonlinearity first" mpirun -np 3 "$NTKD" badarch.conf
check "... refused once with a clear message" has "cannot be the first layer" err.log
printf '[data]\npath = small.npy\n[model]\narch = Conv(3) Relu GlobalAvgPool Dense\n[output]\npath = x.ntk\n' > cnn.conf
expect_rc 2 "CNN layers on flat (N, d) data refused" "$NTKD" cnn.conf
check "... saying they need images" has "need image data" err.log
check "... naming file, line, [model] arch and the layer" has "cnn.conf:4: \[model\] arch, layer 1 (Conv): Conv, AvgPool" err.log
$PY -c "import numpy as np; np.save('px.npy', np.ones((2, 1, 1, 1), np.float32))"
printf '[data]\npath = px.npy\n[model]\narch = Conv(2, (3, 3), (1, 1), VALID) Relu Flatten Dense\n[output]\npath = x.ntk\n' > valid.conf
expect_rc 2 "a 3 x 3 VALID convolution on 1 x 1 images refused" "$NTKD" valid.conf
check "... naming file, line and layer once ([model] arch, layer 1, not 'arch: arch')" \
  has "valid.conf:4: \[model\] arch, layer 1: Conv(3 x 3) VALID on a 1 x 1 input" err.log
job nan nan.npy 4 float32
expect_rc 2 "NaN in data refused" mpirun -np 3 "$NTKD" nan.conf
check "... naming sample and feature" has "sample 3, feature 2 is NaN" err.log
job missing nothere.npy 4 float32
expect_rc 2 "missing data file" "$NTKD" missing.conf
check "no store created for bad input" [ ! -e missing.ntk ]
expect_rc 2 "missing job file" "$NTKD" nothere.conf
expect_rc 2 "no arguments" "$NTKD"
expect_rc 2 "unknown option" "$NTKD" --frobnicate
check "... naming it" has "unknown option '--frobnicate' for ntkd" err.log
# Tiles far too small for mpirun (0.1 ms of compute, about a millisecond of
# messages and a write each): the run says so, with the cure (a helper
# measured 28.5 s under mpirun -np 2 where one process took 1.35 s).
$PY -c "import numpy as np; np.save('tiny.npy', np.random.default_rng(3).standard_normal((1500, 4)).astype(np.float32))"
printf '[data]\npath = tiny.npy\n[model]\narch = Dense\nkernel = nngp\n[compute]\ntile = 16\n[output]\npath = tiny.ntk\n' > tiny.conf
expect_rc 0 "4465 tiles of 16 x 16 under mpirun -np 2" mpirun -np 2 "$NTKD" tiny.conf
# (said where the worker waited 75 % of the time or more: as this machine measures it)
busy=$(sed -n 's/^ntkd: workers spent .* computing tiles: \([0-9]*\)% of .*/\1/p' err.log)
# ntkd's rule has a second condition, a mean tile under 2 ms (a loaded
# machine can stretch it), decided on the unrounded time: within 5 % of
# that bound the test cannot tell, and checks neither way.
mean_us=$(sed -n 's/^ntkd: workers spent \([0-9.]*\) s computing tiles.*/\1/p' err.log | awk '{printf "%d", $1 * 1e6 / 4465}')
if [ "${busy:-100}" -lt 25 ] && [ "${mean_us:-0}" -lt 1900 ]; then
  check "... the run says the tile is too small for mpirun (worker busy $busy %, tile $mean_us us)" \
    has "ntkd: note: a tile took .* a larger \[compute\] tile (now 16), or one process, is faster" err.log
elif [ "${busy:-100}" -ge 25 ] || [ "${mean_us:-0}" -gt 2100 ]; then
  check "... no note where the worker was busy $busy % of the time (tile ${mean_us:-?} us)" \
    bash -c "! grep -q 'ntkd: note: a tile took' err.log"
else
  echo "    (a mean tile of $mean_us us, at the note's 2 ms bound: not checked)"
fi
# A job file whose name begins with '-': named, and taken after --
mkdir -p ./-dash && job dash small.npy 512 float32 && sed 's#^path = small.npy#path = ../small.npy#' dash.conf \
  > ./-dash/j.conf
expect_rc 2 "a job file named -dash/j.conf taken for an option" "$NTKD" -dash/j.conf
check "... naming it and the way round" has "unknown option '-dash/j.conf' for ntkd (a file whose name begins with '-': ./-dash/j.conf, or -- before it)" err.log
expect_rc 0 "... and run after --" "$NTKD" -- -dash/j.conf
expect_rc 0 "ntkd check -- -dash/j.conf" "$NTKD" check -- -dash/j.conf
expect_rc 0 "ntkd export -- -dash/dash.ntk OUT" "$NTKD" export -- -dash/dash.ntk dash.npy
# ... info, verify and solve too (they took '--' for bad usage and '--bogus' for a store)
expect_rc 0 "ntkd info -- -dash/dash.ntk" "$NTKD" info -- -dash/dash.ntk
expect_rc 0 "ntkd info --records -- -dash/dash.ntk" "$NTKD" info --records -- -dash/dash.ntk
expect_rc 0 "ntkd verify -- -dash/dash.ntk" "$NTKD" verify -- -dash/dash.ntk
for c in info verify "solve dash.ntk"; do
  expect_rc 2 "ntkd $c with an unknown option" "$NTKD" $c --bogus
  check "... naming it" has "unknown option '--bogus' for ${c%% *}" err.log
done
expect_rc 2 "ntkd info --records without a store" "$NTKD" info --records
check "... saying what info takes" has "info takes one store path" err.log
expect_rc 2 "bad export kernel" "$NTKD" export a.ntk x.npy --kernel cntk
# [compute] backend (GPU placement): on a machine without a usable GPU.
job bk small.npy 512 float32 "[compute]" "backend = cuda"
job ba small.npy 512 float32 "[compute]" "backend = auto"
if "$NTKD" --version | grep -q "cuda: compiled in; no usable GPU"; then
  expect_rc 2 "backend = cuda without a GPU is refused" mpirun -np 3 "$NTKD" bk.conf
  check "... saying there is no usable GPU" has "backend = cuda, but there is no usable GPU" err.log
  check "... before a store is made" [ ! -e bk.ntk ]
  expect_rc 0 "backend = auto without a GPU computes on the CPU" mpirun -np 3 "$NTKD" ba.conf
  check "... and says so once" [ "$(grep -c 'no usable GPU' err.log)" = 1 ]
  "$NTKD" export ba.ntk ba.npy >/dev/null 2>&1
  check "... the same matrix as backend = cpu" cmp -s ba.npy a_ntk.npy
elif "$NTKD" --version | grep -q "cuda: not compiled in"; then
  expect_rc 2 "backend = cuda in a build without CUDA is refused" "$NTKD" bk.conf
  check "... saying why" has "built without CUDA" err.log
else
  echo "skipped: backend = cuda refusals (this machine has a GPU; scripts/gpu_check.sh)"
fi
# A CNN (here Dense before Flatten on images, which acts per position) with
# backend = cuda and no GPU: refused like a fully-connected network.
if ! "$NTKD" --version | grep -q "cuda: compiled in; [0-9]"; then
  printf '[data]\npath = img.npy\n[model]\narch = Dense Relu Flatten Dense\n[compute]\nbackend = cuda\n[output]\npath = pf.ntk\n' > pf.conf
  expect_rc 2 "backend = cuda for a CNN without a GPU is refused" "$NTKD" pf.conf
  check "... saying why" bash -c "grep -q 'no usable GPU' err.log || grep -q 'built without CUDA' err.log"
  check "... before a store is made" [ ! -e pf.ntk ]
fi
job bx small.npy 512 float32 "[compute]" "backend = opencl"
expect_rc 2 "an unknown backend is refused" "$NTKD" bx.conf
check "... naming file, line and key" has "bx.conf:14: \[compute\] backend: 'opencl' is not auto, cpu or cuda" err.log
expect_rc 0 "--help" "$NTKD" --help
expect_rc 0 "--version" "$NTKD" --version
check "--version lists the cpu backend" has "backends: cpu" out.log
# an argument after them is refused: `ntkd --version job.conf` printed and exited 0, no job run
expect_rc 2 "--version with a job file after it" "$NTKD" --version bx.conf
check "... saying it takes no argument" has "--version takes no argument" err.log
expect_rc 2 "help with a command after it" "$NTKD" help check

# --- an idle coordinator does not spin -------------------------------------------
# A deep network: seconds of work per worker, little data for rank 0 to move.
# Compared within the run, not against the clock: a coordinator that spins
# gets its share of the cores like each worker (about as much CPU time as
# one); an idle one uses a small fraction of a worker's.
$PY -c "import numpy as np; np.save('deep.npy', np.random.default_rng(5).standard_normal((2048, 64)).astype(np.float32))"
printf '[data]\npath = deep.npy\n[model]\narch = [Dense Erf]*600 Dense\n[compute]\ntile = 512\n[output]\npath = spin.ntk\n' > spin.conf
mpirun -np 3 bash -c 'exec /usr/bin/time -f "%U %S %e %M" -o "rank.$OMPI_COMM_WORLD_RANK" "$0" "$1"' "$NTKD" spin.conf >/dev/null 2>&1
check "rank 0 uses under a quarter of the CPU time of each worker" $PY -c "
cpu = [sum(map(float, open('rank.%d' % r).read().split()[-4:-2])) for r in (0, 1, 2)]
print('    cpu seconds: rank 0 %.2f, workers %.2f and %.2f' % tuple(cpu))
assert cpu[0] < 0.25 * min(cpu[1:]), cpu
"

# --- on-demand scheduling: a slower worker gets fewer tiles ------------------------
# Rank 2 stops (SIGSTOP) once the job has stored a tile, like a worker far
# slower than the other: it holds the tiles it was given (at most a few:
# the queue of each worker), and the fast worker must compute all the
# others meanwhile. Waited for as a count of stored tiles; a scheduler
# that gave each worker a fixed share would stop at about half.
printf '[data]\npath = deep.npy\n[model]\narch = [Dense Erf]*300 Dense\n[compute]\ntile = 128\n[output]\npath = slow.ntk\n' > slow.conf
mpirun -np 3 "$NTKD" slow.conf >/dev/null 2>slow.log &
mp=$!
wait_tiles slow.ntk 1
held=$(rank_pids "ntkd slow.conf" 2)
stop_procs $held # stopped for sure before the count below
at_stop=$(tiles_done slow.ntk)
# 136 tiles; rank 2 holds at most 16 (its queue: 2, one more per compression thread).
wait_tiles slow.ntk $((136 - 16)) 600
reached=$?
done_while_stopped=$(tiles_done slow.ntk)
kill -CONT $held
wait $mp
rc=$?
check "a job with one stopped worker: the other stored $done_while_stopped of 136 tiles meanwhile, then the job finished (exit $rc)" \
  bash -c "[ $reached = 0 ] && [ $rc = 0 ]"
check "... the fast worker returned all tiles but those the slow one held" $PY -c "
import re
line = [l for l in open('slow.log') if 'tiles per worker' in l][-1]
n = dict((int(r), int(c)) for r, c in re.findall(r'rank (\d+): (\d+)', line))
print('    ' + line.strip() + ' (${at_stop:-0} stored when rank 2 stopped)')
assert n[1] + n[2] == 136 and n[2] <= ${at_stop:-0} + 16, n
"

# The scripts a user runs refuse arguments they cannot take, before doing
# anything: fuzz.sh took "abc" seconds as no limit (libFuzzer ran until
# killed), leak-check.sh "abc" rounds as 0 and said "no leak", test.sh ran
# the short stage for "--lnog", storecmp.py called two files of zeros equal.
expect_rc 2 "scripts/fuzz.sh abc: refused" bash "$SRC/scripts/fuzz.sh" abc
check "... saying what SECONDS must be" has "SECONDS must be a whole number" err.log
expect_rc 2 "scripts/leak-check.sh BUILD abc: refused" bash "$SRC/scripts/leak-check.sh" "$(dirname "$NTKD")" abc
expect_rc 2 "scripts/test.sh --lnog: refused" bash "$SRC/scripts/test.sh" --lnog
head -c 8192 /dev/zero > zeros.bin
expect_rc 2 "scripts/storecmp.py on two files that are not stores: refused" "$PY" "$SRC/scripts/storecmp.py" zeros.bin zeros.bin
check "... saying so" has "is not an ntkd store" err.log

echo "e2e: $passed passed, $failed failed"
[ "$failed" = 0 ]
