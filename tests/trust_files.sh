#!/usr/bin/env bash
# One writer per store whatever name reaches it, outputs that never replace
# ntkd's own files, and the writer's last check before it says "done"
# (issue 25, items 1, 2 and 7): a second job through a symbolic link, a
# hard link, a removed, renamed or replaced lock file; exports and job
# outputs over a store, its index, its lock, a snapshot or a temporary
# file; a store replaced, damaged or re-indexed under a running job; lock
# files that are symbolic links; names of 241-255 bytes.
# Usage: tests/trust_files.sh path/to/ntkd
set -u
NTKD=$(readlink -f "${1:?usage: trust_files.sh path/to/ntkd}")
source "$(dirname "$(readlink -f "$0")")/e2e_lib.sh"

$PY - <<'PYEOF'
import numpy as np
rng = np.random.default_rng(25)
np.save('x.npy', rng.standard_normal((1200, 32)).astype(np.float32))
np.save('lab.npy', rng.integers(0, 3, 1200).astype(np.int64))
PYEOF

# job NAME STORE DEPTH: an NNGP job on x.npy, tile 40 (465 tiles).
job() {
  printf '[data]\npath = x.npy\n[model]\narch = [Dense Erf]*%s Dense\nkernel = nngp\n' "$3" > "$1.conf"
  printf '[compute]\ntile = 40\n[output]\npath = %s\nprogress = 1000\n' "$2" >> "$1.conf"
}
mkdir -p real
# Jobs of ~4 s on one core, so that a test can catch one running: the depth
# from this machine's time for 40 layers (machines differ 40x; erf_depth in
# e2e_lib.sh).
job cal cal.ntk 40
"$NTKD" cal.conf >/dev/null 2>cal.log
DEPTH=$(erf_depth 4.0 cal.log 40 1 40 4000)
echo "    calibration: $(sed -n 's/.*\(tiles [0-9.]* s\)$/\1/p' cal.log) for 40 layers: $DEPTH layers below"
job clean clean.ntk "$DEPTH"
"$NTKD" clean.conf >/dev/null 2>&1 && "$NTKD" export clean.ntk clean.npy >/dev/null 2>&1
check "a clean reference run" [ -s clean.npy ]
job a real/st.ntk "$DEPTH"

# hold: start job a on real/st.ntk (under mpirun if $1 = mpi), wait until it
# has stored tiles, and stop every process of it (it keeps its locks).
# release: let it go on and wait for it; $ra is its exit code.
hold() {
  rm -rf real/st.ntk* link.ntk hard.ntk*
  if [ "$1" = mpi ]; then mpirun -np 3 "$NTKD" a.conf >a.log 2>&1 & else "$NTKD" a.conf >a.log 2>&1 & fi
  pa=$!
  wait_tiles real/st.ntk 3 >/dev/null
  held=$(job_pids "$NTKD a.conf")
  stop_procs $held
  sum=$(md5sum < real/st.ntk)
}
release() {
  kill -CONT $held
  wait $pa; ra=$?
}
# The held job finished with exit 0 and its matrix equals the clean run's.
intact() {
  [ "$ra" = 0 ] && "$NTKD" verify real/st.ntk >/dev/null 2>&1 && "$NTKD" export real/st.ntk st.npy >/dev/null 2>&1 &&
    cmp -s st.npy clean.npy
}

# ============================================================================
# 1. The lock belongs to the file
# ============================================================================
for kind in single mpi; do
  hold $kind
  ln -s real/st.ntk link.ntk
  job b link.ntk "$DEPTH"
  expect_rc 7 "$kind: a second job on the store through a symbolic link exits 7" "$NTKD" b.conf
  check "... and touches nothing" [ "$(md5sum < real/st.ntk)" = "$sum" ]
  expect_rc 7 "... also under mpirun" mpirun -np 3 "$NTKD" b.conf
  ln real/st.ntk hard.ntk
  job b hard.ntk "$DEPTH"
  expect_rc 7 "$kind: through a hard link (another name of the same file) it exits 7" "$NTKD" b.conf
  expect_rc 7 "... also with --overwrite" "$NTKD" b.conf --overwrite
  check "... and touches nothing, not even an index or lock file beside the link" \
    bash -c "[ \"\$(md5sum < real/st.ntk)\" = '$sum' ] && [ ! -e hard.ntk.index ] && [ ! -e hard.ntk.lock ]"
  rm -f real/st.ntk.lock
  expect_rc 7 "$kind: with its lock file removed, a second job exits 7" "$NTKD" a.conf
  expect_rc 7 "... also under mpirun" mpirun -np 3 "$NTKD" a.conf
  mv real/st.ntk.lock elsewhere.lock 2>/dev/null
  : > real/st.ntk.lock # an empty file: a lock file a holder had not yet written
  expect_rc 7 "$kind: with its lock file replaced by an empty file, a second job exits 7" "$NTKD" a.conf
  rm -f real/st.ntk.lock
  printf 'not a lock\n' > real/st.ntk.lock # somebody's own file: never rewritten or removed
  expect_rc 2 "$kind: with its lock file replaced by a file that is not a lock, a second job exits 2" "$NTKD" a.conf
  check "... saying so" grep -q 'is not a lock file ntkd may take' err.log
  check "... and the store is untouched" [ "$(md5sum < real/st.ntk)" = "$sum" ]
  "$NTKD" info real/st.ntk > info.log 2>&1
  check "$kind: info still sees the writer" grep -q '^writer:' info.log
  release
  check "$kind: the first job finishes, exit 0, its matrix equal to a clean run's" intact
  check "... and leaves that file as it was" grep -q '^not a lock$' real/st.ntk.lock
  rm -f real/st.ntk.lock
done

# The heartbeat puts a removed lock file back (for info, and for machines
# that do not share locks): every beat (10 s; 1 s here). Waited for as an
# event, however long a beat takes on a loaded machine: under mpirun the
# writer (rank 0, which holds the lock) runs on while its workers are
# stopped, so the job cannot end first.
rm -rf real/st.ntk*
NTKD_TEST_LOCK_HEARTBEAT=1 mpirun -np 3 "$NTKD" a.conf >a.log 2>&1 &
pa=$!
wait_tiles real/st.ntk 3 >/dev/null
writer=$(rank_pids "$NTKD a.conf" 0) workers="$(rank_pids "$NTKD a.conf" 1) $(rank_pids "$NTKD a.conf" 2)"
kill -STOP $workers
rm -f real/st.ntk.lock
# A hang guard only: 6000 polls of 0.05 s (5 minutes) at the least.
back=0
for _ in $(seq 6000); do [ -e real/st.ntk.lock ] && { back=1; break; }; kill -0 $writer 2>/dev/null || break; sleep 0.05; done
check "a removed lock file is put back by the running job" [ $back = 1 ]
check "... naming it" grep -q "pid=$writer" real/st.ntk.lock
kill -CONT $workers
wait $pa

# The writer's last check: a job never says "done" with exit 0 over a
# store that does not hold what it wrote. Three ways around every lock
# (NTKD_NO_LOCK=1, as on a file system without locks).
hold single
job b real/st.ntk $((DEPTH + 1)) # another job: its --overwrite replaces the file
NTKD_NO_LOCK=1 "$NTKD" b.conf --overwrite >/dev/null 2>&1
release
check "a store replaced under a running job: it exits 4, not 0" [ "$ra" = 4 ]
check "... saying the file was replaced" grep -q 'no longer the file this job wrote' a.log
check "... and never 'done'" bash -c "! grep -q '^ntkd: done' a.log"
hold single
# Damage one record this job wrote (a byte of its header).
off=$("$NTKD" info --records real/st.ntk 2>/dev/null | sed -n 's/^record: *[0-9]* \([0-9]*\)$/\1/p' | head -1)
damage real/st.ntk $((off + 20)) # a byte of the store id: random
release
check "a record damaged under a running job: it exits 4" [ "$ra" = 4 ]
check "... naming the tile and offset" grep -q "changed under this job.*offset $off" a.log
expect_rc 0 "... a rerun repairs it" "$NTKD" a.conf
ra=0; check "... to the clean matrix" intact
hold single
cp real/st.ntk.index saved.index
"$NTKD" clean.conf --overwrite >/dev/null 2>&1
cp clean.ntk.index real/st.ntk.index # an index of another store
release
check "an index replaced under a running job: it exits 4" [ "$ra" = 4 ]
check "... saying the index is not its own" grep -q 'index.*is not the one this job wrote' a.log
hold single
: > real/st.ntk # truncated to nothing by another program
release
check "a store truncated to 0 under a running job: it exits 4" [ "$ra" = 4 ]
check "... saying that a rerun cannot repair it (it once said one would) and what to do" \
  grep -q 'no usable copy of its header is there any more.*run the job again with --overwrite' a.log
expect_rc 2 "... and a rerun refuses the file, as it said" "$NTKD" a.conf
rm -rf real/st.ntk*
hold single
# Copy B replaced by another store's intact header: two intact copies that
# disagree, which the opener refuses (the writer's check once took copy A
# and promised a repair)
dd if=clean.ntk of=real/st.ntk bs=4096 skip=1 seek=1 count=1 conv=notrunc 2>/dev/null
release
check "header copy B replaced by another store's under a running job: it exits 4" [ "$ra" = 4 ]
check "... saying that a rerun cannot repair it and what to do" \
  grep -q 'no usable copy of its header is there any more.*run the job again with --overwrite' a.log
expect_rc 2 "... and a rerun refuses the file, as it said" "$NTKD" a.conf
check "... naming why" grep -q 'the two copies of the store header disagree' err.log
rm -rf real/st.ntk*
hold single
# 200 bytes across the end of header copy A and the start of copy B: both
# damaged, in different bytes; the opener splices one whole header from the
# two (a review found the advice above given here, where a rerun repairs)
head -c 200 /dev/zero | tr '\0' '\377' | dd of=real/st.ntk bs=1 seek=4000 conv=notrunc 2>/dev/null
release
check "both header copies damaged (in different bytes) under a running job: it exits 4" [ "$ra" = 4 ]
check "... saying that a rerun repairs it" grep -q 'run the job again to repair it' a.log
expect_rc 0 "... and a rerun does" "$NTKD" a.conf
ra=0; check "... to the clean matrix" intact

# ============================================================================
# 2. Outputs never replace a store's own files
# ============================================================================
"$NTKD" a.conf >/dev/null 2>&1
cp real/st.ntk other.ntk
cp other.ntk other.keep
hold single
for out in real/st.ntk.index real/st.ntk.lock real/st.ntk other.ntk x.ntk.tmp.$(hostname).123; do
  [ -e "$out" ] && before=$(md5sum < "$out") || before=none
  expect_rc 2 "export over $out (a store's own file) exits 2" "$NTKD" export clean.ntk "$out"
  check "... with the reason" grep -q "never replaces one of ntkd's own files\|is also the store" err.log
  [ -e "$out" ] && after=$(md5sum < "$out") || after=none
  check "... and leaves it as it was" [ "$before" = "$after" ]
done
expect_rc 7 "the store's lock file is still the job's: a second job exits 7" "$NTKD" a.conf
release
check "the job finishes, its matrix equal to a clean run's" intact
# Outputs of a job: the store path, the training snapshot and log.
job o real/st.ntk.index 2
expect_rc 2 "[output] path = another store's index exits 2" "$NTKD" o.conf
expect_rc 2 "... also with --overwrite" "$NTKD" o.conf --overwrite
check "... and the index is untouched" "$NTKD" verify real/st.ntk
cp clean.ntk snap.bin
train() {
  printf '[data]\npath = x.npy\nlabels = lab.npy\n[train]\nlayers = 8\nepochs = 1\nbatch = 100\n' > t.conf
  printf 'snapshot = %s\nlog = %s\n' "$1" "$2" >> t.conf
}
train snap.bin t.json
expect_rc 2 "[train] snapshot = a store exits 2" "$NTKD" t.conf
train t.snap other.ntk
expect_rc 2 "[train] log = a store exits 2" "$NTKD" t.conf
train t.snap real/st.ntk.index
expect_rc 2 "[train] log = a store's index exits 2" "$NTKD" t.conf
check "... none of them touched" bash -c "cmp -s snap.bin clean.ntk && cmp -s other.ntk other.keep"
# Predictions of a regression: never over a store.
printf '[data]\npath = x.npy\nlabels = lab.npy\ncount = 1000\n[test]\npath = x.npy\nlabels = lab.npy\ncount = 1000\n' > r.conf
printf '[model]\narch = Dense Relu Dense\n[output]\npath = r.ntk\n[solve]\nridge = 0.1\npredictions = p\n' >> r.conf
"$NTKD" r.conf >/dev/null 2>&1
cp r.ntk p-nngp-ridge0.1.npy
expect_rc 2 "predictions over a store (ntkd solve) exit 2" "$NTKD" solve r.ntk r.conf
check "... and the store is untouched" cmp -s r.ntk p-nngp-ridge0.1.npy

# ============================================================================
# 7. Clear answers: the lock file as a symbolic link; names of 241-255 bytes
# ============================================================================
rm -rf real/st.ntk*
printf 'keep me\n' > precious.txt
ln -s "$W/precious.txt" real/st.ntk.lock
expect_rc 2 "a lock file that is a symbolic link (to a file) exits 2" "$NTKD" a.conf
check "... saying so" grep -q 'is a symbolic link, not a regular file' err.log
check "... and the file it points to is untouched" grep -q 'keep me' precious.txt
rm real/st.ntk.lock
ln -s "$W/nowhere" real/st.ntk.lock
expect_rc 2 "a dangling symbolic link as lock file exits 2" "$NTKD" a.conf
rm real/st.ntk.lock
name() { printf "%${1}s" | tr ' ' n; }
for len in 241 249; do
  job l "$(name $((len - 4))).ntk" 2
  expect_rc 0 "a store name of $len bytes works (its temporary file's name is shortened)" "$NTKD" l.conf
  expect_rc 0 "... and resumes" "$NTKD" l.conf
  rm -f nnnn*
done
for len in 250 255; do
  job l "$(name $((len - 4))).ntk" 2
  expect_rc 2 "a store name of $len bytes exits 2 (no room for NAME.index)" "$NTKD" l.conf
  check "... saying the limit" grep -q 'at most 249 bytes' err.log
done
for len in 241 255; do
  expect_rc 0 "an export name of $len bytes works" "$NTKD" export clean.ntk "$(name $((len - 4))).npy"
  check "... and holds the matrix" cmp -s "$(name $((len - 4))).npy" clean.npy
  rm -f nnnn*
done

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
