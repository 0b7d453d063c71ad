#!/usr/bin/env bash
# End-to-end ScaLAPACK solve ([solve] method = scalapack): the predictions,
# rcond and leave-one-out columns of 1, 4 and 6 ranks (grids 1 x 1, 2 x 2
# and 2 x 3, ragged n, several ridges, both kernels) against the
# one-process LAPACK solve of the same store; the panelled factorisation
# against plain pdpotrf; a ridge that cannot be solved among ones that
# can; a stop signal during the solve; and the refusals (block, grid, no
# mpirun).
# Usage: tests/e2e_scalapack.sh path/to/ntkd
set -u
NTKD=$(readlink -f "${1:?usage: e2e_scalapack.sh path/to/ntkd}")
source "$(dirname "$(readlink -f "$0")")/e2e_lib.sh"

# 3000 train samples (ragged against tile 512 and block 256), 300 test,
# labels that depend on the inputs so the predictions mean something.
$PY -c "
import numpy as np; r = np.random.default_rng(11)
x = r.standard_normal((3300, 12)); w = r.standard_normal((12, 4))
y = np.argmax(x @ w + 0.3 * r.standard_normal((3300, 4)), axis=1)
np.save('xtr.npy', x[:3000]); np.save('xte.npy', x[3000:]); np.save('xytr.npy', y[:3000]); np.save('xyte.npy', y[3000:])
d = x[:600].copy(); d[1] = d[0]; d[7] = d[5]                    # duplicate train samples: singular with ridge 0
np.save('dtr.npy', d); np.save('dte.npy', x[600:700]); np.save('dytr.npy', y[:600]); np.save('dyte.npy', y[600:700])"

# job NAME STORE DATA-PREFIX TILE RIDGES [extra [solve] lines]
job() {
  local name=$1 store=$2 d=$3 tile=$4 ridges=$5; shift 5
  {
    printf '[data]\npath = %str.npy\nlabels = %sytr.npy\n[test]\npath = %ste.npy\nlabels = %syte.npy\n' "$d" "$d" "$d" "$d"
    printf '[model]\narch = Dense Relu Dense Erf Dense\nkernel = ntk\n[compute]\nprecision = float64\ntile = %s\n' "$tile"
    printf '[output]\npath = %s\n[solve]\nridge = %s\npredictions = %s\n' "$store" "$ridges" "$name"
    for l in "$@"; do printf '%s\n' "$l"; done
  } > "$name.conf"
}
RIDGES="1e-4, 1e-2, 1"
# compare A B TOL [RIDGES]: every kernel and ridge's predictions of prefix B
# against A, largest difference relative to A's largest entry
compare() {
  $PY - "$1" "$2" "$3" "${4:-1e-4 1e-2 1}" <<'EOF'
import sys, numpy as np
a, b, tol, ridges = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4].split()
worst = 0
for k in ("nngp", "ntk"):
    for r in ridges:
        r = "%g" % float(r)
        pa, pb = np.load(f"{a}-{k}-ridge{r}.npy"), np.load(f"{b}-{k}-ridge{r}.npy")
        assert pa.shape == pb.shape and pa.shape[0] > 0, (pa.shape, pb.shape)
        worst = max(worst, np.abs(pa - pb).max() / np.abs(pa).max())
print(f"    largest relative difference {worst:.1e} (bound {tol:g})")
sys.exit(0 if worst <= tol else 1)
EOF
}
# table LOG: the table's kernel/ridge rows (rcond, accuracy, MSE, leave-one-out)
table() { grep -E '^(nngp|ntk) ' "$1"; }

# --- the store and the one-process reference ---------------------------------------
job lap k.ntk x 512 "$RIDGES" "method = lapack"
expect_rc 0 "kernel job with [solve] method = lapack (the reference)" mpirun -np 2 "$NTKD" lap.conf
table out.log > lap.table
check "... a table of 6 rows with leave-one-out" bash -c "[ \$(wc -l < lap.table) = 6 ] && [ \$(awk 'NF == 8' lap.table | wc -l) = 6 ]"

# --- 1, 4 and 6 ranks --------------------------------------------------------------------
job s1 k.ntk x 512 "$RIDGES" "method = scalapack" "grid = 1 x 1"
expect_rc 0 "mpirun -np 1 ntkd solve, method = scalapack, grid 1 x 1" mpirun -np 1 "$NTKD" solve k.ntk s1.conf
check "... predictions equal lapack's (1e-10)" compare lap s1 1e-10
check "... the same table: rcond, accuracy, MSE, leave-one-out" bash -c "table() { grep -E '^(nngp|ntk) ' \$1; }; table out.log | cmp -s - lap.table"
check "... read with block 256 (the default for tile 512)" has "ScaLAPACK grid 1 x 1, block 256" err.log

job s4 k.ntk x 512 "$RIDGES" "method = scalapack" "grid = 2 x 2"
expect_rc 0 "mpirun -np 4, grid 2 x 2" mpirun --oversubscribe -np 4 "$NTKD" solve k.ntk s4.conf
check "... predictions equal lapack's (1e-10)" compare lap s4 1e-10
check "... the same table" bash -c "grep -E '^(nngp|ntk) ' out.log | cmp -s - lap.table"

job s6 k.ntk x 512 "$RIDGES" "method = scalapack"
expect_rc 0 "mpirun -np 6, grid left out" mpirun --oversubscribe -np 6 "$NTKD" solve k.ntk s6.conf
check "... chooses 2 x 3" has "ScaLAPACK grid 2 x 3, block 256" err.log
check "... predictions equal lapack's (1e-10)" compare lap s6 1e-10
check "... the same table" bash -c "grep -E '^(nngp|ntk) ' out.log | cmp -s - lap.table"

# --- the panelled factorisation (with progress) against plain pdpotrf ---------------
job p64 k.ntk x 512 "$RIDGES" "method = scalapack" "block = 64"
expect_rc 0 "block 64, plain pdpotrf (n = 3000 is below the panel threshold)" mpirun --oversubscribe -np 4 "$NTKD" solve k.ntk p64.conf
check "... no progress lines" bash -c "! grep -q 'Cholesky [0-9]*%' err.log"
job q64 k.ntk x 512 "$RIDGES" "method = scalapack" "block = 64"
export NTKD_TEST_SCALAPACK_PANEL=700
expect_rc 0 "block 64 in panels of 704 columns" mpirun --oversubscribe -np 4 "$NTKD" solve k.ntk q64.conf
check "... announced as a test setting" has "test setting NTKD_TEST_SCALAPACK_PANEL=700" err.log
check "... a progress line per panel" bash -c "[ \$(grep -c 'ntkd: solve: ntk ridge 0.01: Cholesky [0-9]*% ([0-9.]* s, ETA [0-9]* s)' err.log) = 4 ]"
check "... the same predictions as plain pdpotrf, to rounding (1e-10)" compare p64 q64 1e-10
check "... and as lapack (1e-10)" compare lap q64 1e-10

# --- a ridge that cannot be solved, among ones that can -----------------------------
job dlap d.ntk d 128 "0, 0.01" "method = lapack"
expect_rc 2 "duplicate train samples, ridge 0, lapack: refused (the reference)" mpirun -np 2 "$NTKD" dlap.conf
job dsl d.ntk d 128 "0, 0.01" "method = scalapack"
expect_rc 2 "... the same with scalapack on 4 ranks: exit 2" mpirun --oversubscribe -np 4 "$NTKD" solve d.ntk dsl.conf
check "... saying to increase the ridge" has "ridge 0 .*increase the ridge" err.log
check "... as the table says" bash -c "grep -E '^nngp +0 ' out.log | grep -q failed && grep -E '^ntk +0 ' out.log | grep -q failed"
check "... no predictions for ridge 0" bash -c "! ls dsl-*-ridge0.npy 2>/dev/null"
check "... ridge 0.01 solved after the failed factorisation, as lapack" compare dlap dsl 1e-10 0.01
# Ridge 1e-12 on the same duplicates: the factorisation succeeds, and the
# condition estimate must see the near-null directions e0 - e1 and e5 - e7
# (Higham's estimator alone put rcond near 1e-12, the truth near 1e-15:
# solved, exit 0, predictions 3e-4 off)
job dlt d.ntk d 128 "1e-12, 0.01" "method = lapack"
expect_rc 2 "duplicate train samples, ridge 1e-12, lapack: refused as ill-conditioned" "$NTKD" solve d.ntk dlt.conf
check "... as the table says, rcond below 1e-13" bash -c "grep -E '^(nngp|ntk) +1e-12 ' out.log | awk '\$4 >= 1e-13 || !/failed/ { bad = 1 } END { exit bad || NR != 2 }'"
job dst d.ntk d 128 "1e-12, 0.01" "method = scalapack"
expect_rc 2 "... the same with scalapack on 3 ranks" mpirun --oversubscribe -np 3 "$NTKD" solve d.ntk dst.conf
check "... as the table says, rcond below 1e-13" bash -c "grep -E '^(nngp|ntk) +1e-12 ' out.log | awk '\$4 >= 1e-13 || !/failed/ { bad = 1 } END { exit bad || NR != 2 }'"
check "... ridge 0.01 solved by both, alike" compare dlt dst 1e-10 0.01

# --- a stop signal during the solve of a job -------------------------------------
job stop k.ntk x 512 "$RIDGES" "method = scalapack" "block = 64"
export NTKD_TEST_SCALAPACK_STOP=1:3
expect_rc 5 "SIGTERM on rank 1 between two panels of a job's solve: every rank stops, exit 5" \
  mpirun --oversubscribe -np 3 "$NTKD" stop.conf
unset NTKD_TEST_SCALAPACK_PANEL NTKD_TEST_SCALAPACK_STOP
check "... saying so" has "interrupted during the solve (the store is complete)" err.log
check "... no predictions written" bash -c "! ls stop-*.npy 2>/dev/null"
check "... rank 1 says why it stopped, never an empty 'ntkd: rank 1:' line" \
  bash -c "grep -q '^ntkd: rank 1: stopped by a signal' err.log && ! grep -qE '^ntkd: rank [0-9]+: *$' err.log"

# --- a solve stopped after one kernel's files: an earlier solve's files of the
# other kernel are removed and said (beside this solve's they would pass for
# its result; they stayed, unmentioned). The stop point is found by stepping
# it until this solve has written the NNGP files and stopped in the NTK's.
job mix d.ntk d 128 "0.01, 1" "method = scalapack"
expect_rc 0 "a first solve writes every file" mpirun -np 1 "$NTKD" solve d.ntk mix.conf
touch -d '2020-01-01' mix-*.npy && touch mix.mark
for K in $(seq 1 16); do
  NTKD_TEST_SCALAPACK_STOP=0:$K mpirun -np 1 "$NTKD" solve d.ntk mix.conf > out.log 2> err.log
  rc=$?
  [ $rc = 5 ] && [ "$(find . -maxdepth 1 -name 'mix-nngp-*.npy' -newer mix.mark | wc -l)" = 2 ] && break
done
echo "    stopped at stop point $K (exit $rc)"
check "a solve stopped in the NTK's solve after writing the NNGP files: exit 5" test "$rc" = 5
check "... the earlier solve's NTK files are gone" bash -c "! ls mix-ntk-*.npy 2>/dev/null"
check "... and the message says so" has "removed 2 older prediction files this solve did not replace" err.log
check "... its own NNGP files stay" bash -c "[ \$(ls mix-nngp-*.npy | wc -l) = 2 ]"
# The same killed (SIGKILL: Ctrl-C to mpirun, a batch system's kill, the
# OOM killer; no clean-up runs): the older set went before the first new
# file took its name, so nothing of it stays beside this solve's files.
expect_rc 0 "a first solve writes every file again" mpirun -np 1 "$NTKD" solve d.ntk mix.conf
touch -d '2020-01-01' mix-*.npy && touch mix.mark
for K in $(seq 1 16); do
  NTKD_TEST_SCALAPACK_STOP=0:$K:KILL mpirun -np 1 "$NTKD" solve d.ntk mix.conf > out.log 2> err.log
  rc=$?
  [ $rc != 0 ] && [ "$(find . -maxdepth 1 -name 'mix-nngp-*.npy' -newer mix.mark | wc -l)" = 2 ] && break
done
echo "    killed at stop point $K (exit $rc)"
check "a solve killed in the NTK's solve after writing the NNGP files: not 0" test "$rc" != 0
check "... no earlier solve's file beside its own" bash -c "! find . -maxdepth 1 -name 'mix-*.npy' ! -newer mix.mark | grep -q ."
check "... its own NNGP files stay" bash -c "[ \$(ls mix-nngp-*.npy | wc -l) = 2 ]"

# --- refusals ------------------------------------------------------------------------
job b48 k.ntk x 512 "$RIDGES" "method = scalapack" "block = 48"
expect_rc 2 "block 48 with tile 512 is refused" mpirun --oversubscribe -np 2 "$NTKD" solve k.ntk b48.conf
check "... saying the block must divide the tile, at the job file's line" \
  bash -c "grep -q 'b48.conf:$(grep -n '^block' b48.conf | cut -d: -f1): \[solve\] block = 48 does not divide the store.s tile edge 512' err.log"
check "... before any prediction" bash -c "! ls b48-*.npy 2>/dev/null"
job g22 k.ntk x 512 "$RIDGES" "method = scalapack" "grid = 2 x 2"
expect_rc 2 "grid 2 x 2 on 6 ranks is refused" mpirun --oversubscribe -np 6 "$NTKD" solve k.ntk g22.conf
check "... saying the grid must use every rank" has "grid = 2 x 2 is 4 processes, but the job runs on 6 ranks" err.log
expect_rc 2 "method = scalapack without mpirun is refused" "$NTKD" solve k.ntk s1.conf
check "... saying it runs under mpirun" has "runs under mpirun" err.log
# In a kernel job the grid is checked before the tiles (it was refused
# after every tile had been computed).
job gk gk.ntk x 512 "$RIDGES" "method = scalapack" "grid = 2 x 2"
expect_rc 2 "a kernel job whose grid 2 x 2 does not fit its 3 ranks is refused" mpirun -np 3 "$NTKD" gk.conf
check "... saying so, before any tile" bash -c "grep -q 'grid = 2 x 2 is 4 processes, but the job runs on 3 ranks' err.log && [ ! -e gk.ntk ]"
# So is a block that does not divide the store's tile, at its line (it was
# refused after every tile); the store's, not the job file's: a store made
# at tile 512 and resumed by a job file without a tile line (1024) is
# solved with block = 256 (refused once against the 1024 it never used).
job bk bk.ntk x 512 "$RIDGES" "method = scalapack" "block = 48"
expect_rc 2 "a kernel job whose block 48 does not divide its tile 512 is refused" mpirun -np 2 "$NTKD" bk.conf
check "... at its line, before any tile" bash -c "grep -q 'bk.conf:$(grep -n '^block' bk.conf | cut -d: -f1): \[solve\] block = 48 does not divide the store.s tile edge 512' err.log && [ ! -e bk.ntk ]"
job b256 k.ntk x 512 "$RIDGES" "method = scalapack" "block = 256"
sed -i '/^tile = /d' b256.conf
expect_rc 0 "a job file without a tile line, block 256, over the store of tile 512" mpirun -np 2 "$NTKD" b256.conf
check "... solved" bash -c "ls b256-*.npy >/dev/null"

echo "e2e_scalapack: $passed passed, $failed failed"
[ "$failed" = 0 ]
