#!/usr/bin/env bash
# A rerun repairs in one go (found by an adversarial pass): a job with
# [solve] resumed over a damaged store repairs it, recomputes the lost
# tile and solves (it once ended "done" and then exit 4, "run the job
# again to repair it", over the store it had just repaired); a failed
# fsync of the store ends the job with exit 3 and leaves no index that
# disagrees with the store (the entries of the failed sync were dropped and
# the next sync's mark covered their records: verify then said damaged),
# nor says "done" (it did when the sync after the last tile failed, or
# the close's sync after it); a failed fsync of the folder after the
# predictions or an export are renamed into place is exit 3, naming the
# file (it was exit 0); a sparse 20 GB tail is judged without reading it.
# Usage: tests/e2e_repair.sh path/to/ntkd
set -u
NTKD=$(readlink -f "${1:?usage: e2e_repair.sh path/to/ntkd}")
source "$(dirname "$(readlink -f "$0")")/e2e_lib.sh"

# tests/preload.c: FAIL_FDATASYNC=K makes the K-th fdatasync fail (EIO).
PRELOAD=$W/preload.so
mpicc -shared -fPIC -O1 -o "$PRELOAD" "$SRC/tests/preload.c" -ldl 2>preload.err ||
  bad "tests/preload.c does not build: $(head -3 preload.err)"
# ASan (the sanitizer build) wants its run-time first among the libraries.
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0

$PY -c "
import numpy as np
r = np.random.default_rng(5)
np.save('x.npy', r.standard_normal((60, 8)).astype(np.float32))
np.save('xt.npy', r.standard_normal((20, 8)).astype(np.float32))
np.save('y.npy', r.integers(0, 3, 60))
np.save('yt.npy', r.integers(0, 3, 20))
"
# job NAME: a regression on 60 + 20 samples, 14 tiles of 16, a sync after every tile.
job() {
  printf '[data]\npath = x.npy\nlabels = y.npy\n[test]\npath = xt.npy\nlabels = yt.npy\n[model]\narch = Dense Relu Dense\n[compute]\ntile = 16\nprecision = float64\n[output]\npath = %s.ntk\nsync = 0\n[solve]\nridge = 0.01\n' "$1" > "$1.conf"
}
# same NAME: NAME's kernels and predictions are the clean run's, byte for byte.
same() {
  local k
  for k in nngp ntk; do
    "$NTKD" export "$1.ntk" "$1-$k.npy" --kernel $k >/dev/null 2>&1 && cmp -s "$1-$k.npy" "clean-$k.npy" || return 1
    cmp -s "$1-$k-ridge0.01.npy" "clean-$k-ridge0.01.npy" || return 1
  done
}
job clean
"$NTKD" clean.conf >/dev/null 2>&1
for k in nngp ntk; do "$NTKD" export clean.ntk "clean-$k.npy" --kernel $k >/dev/null 2>&1; done
check "a clean reference run" [ -s clean-ntk-ridge0.01.npy ]

# --- a damaged record, then the rerun of a job with [solve] -----------------
job dmg
"$NTKD" dmg.conf >/dev/null 2>&1
off=$("$NTKD" info --records dmg.ntk | awk '$1 == "record:" && $2 == 3 {print $3}')
damage dmg.ntk $((off + 200))
rm -f dmg-*-ridge0.01.npy
expect_rc 4 "a payload byte of tile 3 flipped: verify finds it" "$NTKD" verify dmg.ntk
expect_rc 0 "the rerun of the job (with [solve]) repairs, recomputes and solves" "$NTKD" dmg.conf
check "... saying it recomputes the damaged tile" has "1 damaged tile to recompute" err.log
check "... never 'run the job again'" bash -c "! grep -q 'run the job again' err.log"
check "... the store verifies" bash -c "\"$NTKD\" verify dmg.ntk >/dev/null"
check "... kernels and predictions byte-identical to the clean run's" same dmg
# scripts/storecmp.py (the tool behind compare_builds.sh) steps over the
# dead region the repair wrote: it called the repaired store DIFFERENT.
check "... and scripts/storecmp.py calls it equal to the clean store" \
  "$PY" "$SRC/scripts/storecmp.py" dmg.ntk clean.ntk
# The same with the index removed (the resume rebuilds it from a full scan).
damage dmg.ntk $((off + 200))
rm -f dmg.ntk.index dmg-*-ridge0.01.npy
expect_rc 0 "... and with its index removed too" "$NTKD" dmg.conf
check "... kernels and predictions byte-identical to the clean run's" same dmg

# A stop signal while the rerun checks the records below the index's sync
# mark (held back 3 s by NTKD_TEST_AUDIT_DELAY, as on a large store), the
# job without its [solve]: the check did not finish, so the job stops
# (exit 5), never "done" over the damaged tile it had not reached; the
# next rerun repairs. (It ended "done: 14/14", exit 0, the store still
# damaged; with [solve] it said "done" and stopped before solving.)
damage dmg.ntk $((off + 200))
rm -f dmg-*-ridge0.01.npy
sed '/^\[solve\]$/,$d' dmg.conf > dmgk.conf
NTKD_TEST_AUDIT_DELAY=3 "$NTKD" dmgk.conf > au.out 2> au.err & aj=$!
for _ in $(seq 300); do grep -q "test setting NTKD_TEST_AUDIT_DELAY" au.err && break; sleep 0.1; done
kill -USR1 $aj
wait $aj; rc=$?
check "a stop signal during the resume check of a damaged store: exit 5 ($rc)" [ "$rc" = 5 ]
check "... never 'done'" bash -c "! grep -q '^ntkd: done' au.err"
check "... saying the check had not finished" has "before the check of the resumed store's records finished" au.err
expect_rc 0 "... the next rerun repairs, recomputes and solves" "$NTKD" dmg.conf
check "... kernels and predictions byte-identical to the clean run's" same dmg

# --- a failed fsync ----------------------------------------------------------
# The job syncs after every tile; the 3rd fdatasync fails. Later syncs
# (the end of the job, the close) must not write an index past it.
job fs
expect_rc 3 "the 3rd fdatasync of the store fails (EIO): exit 3" env LD_PRELOAD="$PRELOAD" FAIL_FDATASYNC=3 "$NTKD" fs.conf
check "... saying the fsync failed" has "fs.ntk: fsync failed; the store may have lost recent tiles" err.log
check "... and never 'done'" bash -c "! grep -q '^ntkd: done' err.log"
expect_rc 0 "... verify finds no damage (an unfinished store, not a damaged one)" "$NTKD" verify fs.ntk
check "... no index that disagrees with the store" bash -c "! grep -q 'disagrees' out.log err.log"
expect_rc 0 "... the rerun finishes" "$NTKD" fs.conf
check "... without a damaged index to rebuild" bash -c "! grep -q 'disagrees' err.log"
check "... kernels and predictions byte-identical to the clean run's" same fs

# An append to the index fails (a disk quota met there): the entries it
# held had left the list of fresh ones, and the close's sync appended only
# its mark, which covered records the index did not list: the store was
# reported damaged (verify 4) where it was unfinished. Every such failure
# of a run ends it with exit 3 and an intact store that the rerun finishes.
job fi
bad_rc= damaged= wrong=
for k in 1 2 3 5 8; do
  rm -f fi.ntk* fi-*
  env LD_PRELOAD="$PRELOAD" FAIL_INDEX_WRITE=$k "$NTKD" fi.conf >/dev/null 2>fi.log
  rc=$?
  [ $rc = 3 ] || bad_rc="$bad_rc k=$k:$rc"
  "$NTKD" verify fi.ntk >/dev/null 2>&1 || damaged="$damaged k=$k"
  "$NTKD" fi.conf >/dev/null 2>&1 && same fi || wrong="$wrong k=$k"
done
check "a failed append to the index ends the run with exit 3 (${bad_rc:-all 3})" [ -z "$bad_rc" ]
check "... verify finds the store unfinished, not damaged (${damaged:-every one})" [ -z "$damaged" ]
check "... the rerun finishes it to the clean run's kernels and predictions (${wrong:-every one})" [ -z "$wrong" ]

# The sync of the folder after a rename fails: the predictions and an
# export are then not reported written (their new names may not last a
# crash): exit 3 naming the file. Both once exited 0.
rm -f fs-*-ridge0.01.npy
expect_rc 3 "the fsync of the predictions' folder fails: ntkd solve exits 3" \
  env LD_PRELOAD="$PRELOAD" FAIL_FOLDER_FSYNC=1 "$NTKD" solve fs.ntk fs.conf
check "... naming the predictions file" has "fs-nngp-ridge0.01.npy: written, but .: fsync of folder failed" err.log
check "... and no table line for that ridge (the table lists what was written)" bash -c "! grep -qE '^nngp ' out.log"
expect_rc 3 "... ntkd export exits 3 too" env LD_PRELOAD="$PRELOAD" FAIL_FOLDER_FSYNC=1 "$NTKD" export fs.ntk fs-e.npy
check "... naming the exported file" has "fs-e.npy: written, but .: fsync of folder failed" err.log
# The same over an earlier solve's files: the NNGP file is this solve's (in
# place, its name perhaps not synced), so the earlier NTK file beside it
# would pass for this solve's: it is removed and said; the new file stays.
# (Counted as unwritten, the new file was removed as "older", or, the first,
# nothing was.)
"$NTKD" solve fs.ntk fs.conf > /dev/null 2>&1
ls -i fs-nngp-ridge0.01.npy fs-ntk-ridge0.01.npy > fs.ino
expect_rc 3 "an earlier solve's files, then the folder's fsync fails after the first new file" \
  env LD_PRELOAD="$PRELOAD" FAIL_FOLDER_FSYNC=1 "$NTKD" solve fs.ntk fs.conf
check "... the new NNGP file stays (another file than the earlier one)" \
  bash -c "[ -s fs-nngp-ridge0.01.npy ] && ! grep -q \"^\$(ls -i fs-nngp-ridge0.01.npy)\\$\" fs.ino"
check "... the earlier solve's NTK file is removed" bash -c "! [ -e fs-ntk-ridge0.01.npy ]"
check "... and said" has "removed 1 older prediction file this solve did not replace" err.log

# The predictions' lock file removed under a running solve (held stopped as
# it creates its first predictions file, lock taken): a second solve, with
# other labels, takes a lock file of its own and writes every file; the
# first, continued, writes none and exits 7. Both exited 0 before, the
# files a mix of the two labellings.
rm -f fs-*-ridge0.01.npy lk.mark
$PY -c "import numpy as np; np.save('y2.npy', np.load('y.npy')[::-1].copy())"
sed 's/^labels = y.npy$/labels = y2.npy/' fs.conf > fs2.conf
env LD_PRELOAD="$PRELOAD" STOPAT=open_prefix STOPAT_PATH=fs-nngp-ridge0.01.npy.tmp. STOPAT_SIGNAL=19 \
  STOPAT_MARK=lk.mark "$NTKD" solve fs.ntk fs.conf > lka.out 2> lka.err & lka=$!
for _ in $(seq 600); do [ -e lk.mark ] && break; sleep 0.1; done
check "a solve held stopped with the predictions' lock" bash -c "[ -e lk.mark ] && [ -e fs.predictions.lock ]"
rm -f fs.predictions.lock
expect_rc 0 "... its lock file removed, a second solve (other labels) runs" "$NTKD" solve fs.ntk fs2.conf
cp fs-nngp-ridge0.01.npy second-nngp.npy; cp fs-ntk-ridge0.01.npy second-ntk.npy
kill -CONT $lka
wait $lka; rc=$?
check "... the first, continued, exits 7" [ "$rc" = 7 ]
check "... saying its lock was taken and that it wrote nothing" \
  bash -c "grep -q 'fs.predictions.lock was removed or replaced while this job held it' lka.err && grep -q 'no file is written' lka.err"
check "... no table line from it" bash -c "! grep -qE '^(nngp|ntk) |^kernel' lka.out"
check "... the files are the second solve's, all of them" \
  bash -c "cmp -s fs-nngp-ridge0.01.npy second-nngp.npy && cmp -s fs-ntk-ridge0.01.npy second-ntk.npy"

# Each fdatasync of a run in turn fails: whenever one fails after the last
# tile was stored, the job says "failed: 14/14", never "done" (a "done" is
# said only after the store was synced and checked: ntk_store_check_final).
job fk
all_failed=0 bad_rc= said_done=
for k in $(seq 1 60); do
  rm -f fk.ntk* fk-*
  env LD_PRELOAD="$PRELOAD" FAIL_FDATASYNC=$k "$NTKD" fk.conf >/dev/null 2>fk.log
  rc=$?
  [ $rc = 0 ] && break
  [ $rc = 3 ] || bad_rc="$bad_rc k=$k:$rc"
  grep -q '^ntkd: failed: 14/14 tiles' fk.log && all_failed=$((all_failed + 1))
  grep -q '^ntkd: done:' fk.log && said_done="$said_done k=$k"
done
check "every failed fdatasync of a run ends it with exit 3 (${bad_rc:-all 3} up to k=$k)" [ -z "$bad_rc" ]
check "... one after the last tile says 'failed: 14/14', not 'done' ($all_failed runs)" [ $all_failed -ge 1 ]
# The store's close added an fdatasync after the coordinator's last one:
# its failure came after "done". A store with nothing new is not synced.
check "... none of them said 'done' (${said_done:-none did})" [ -z "$said_done" ]

# A store extended by a sparse tail of nothing (truncate -s +20G): the scan
# skips holes (SEEK_DATA) instead of reading 20 GB of zeros (43 s on the
# development VM, minutes at 100 GB). The same verdicts: info says the tail
# is damaged, verify fails, the rerun cuts it and the store is whole again.
job hole
"$NTKD" hole.conf >/dev/null 2>&1
truncate -s +20G hole.ntk
if [ "$(du -k hole.ntk | cut -f1)" -lt 1024 ]; then
  expect_rc 0 "a store with a 20 GB sparse tail: info answers at once" timeout 15 "$NTKD" info hole.ntk
  check "... and calls the tail damaged" grep -q "^tail: .*21474836480 bytes after the last intact record (damaged" out.log
  expect_rc 4 "... verify says damaged, at once" timeout 15 "$NTKD" verify hole.ntk
  expect_rc 0 "... the rerun cuts the tail" timeout 30 "$NTKD" hole.conf
  check "... to its records, and the store verifies" bash -c "[ \$(stat -c %s hole.ntk) -lt 1048576 ] && \"$NTKD\" verify hole.ntk >/dev/null"
else
  echo "skip: this file system does not keep hole.ntk sparse ($(du -k hole.ntk | cut -f1) KB)"
fi
rm -f hole.ntk*

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
