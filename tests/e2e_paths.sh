#!/usr/bin/env bash
# Long names never reach another file (found by an adversarial pass): a
# store named by a path longer than ntkd's 1023 bytes was opened by its
# first 1023 bytes, so `ntkd info/export/verify DIR/s.ntk.bak` read
# DIR/s.ntk, another store, and exited 0; a job file named by more than
# 1023 bytes escaped the check that no output replaces it. Such names are
# refused (exit 2).
# Usage: tests/e2e_paths.sh path/to/ntkd
set -u
NTKD=$(readlink -f "${1:?usage: e2e_paths.sh path/to/ntkd}")
source "$(dirname "$(readlink -f "$0")")/e2e_lib.sh"

$PY -c "
import numpy as np
r = np.random.default_rng(1)
np.save('x.npy', r.standard_normal((12, 5)))
np.save('tx.npy', r.standard_normal((6, 5)))
np.save('y.npy', r.integers(0, 3, 12))
np.save('ty.npy', r.integers(0, 3, 6))
"
printf '[data]\npath = x.npy\n[model]\narch = Dense Relu Dense\n[output]\npath = s.ntk\n' >job.conf
expect_rc 0 "a small store" "$NTKD" job.conf
expect_rc 2 "a store given for the job file" "$NTKD" s.ntk
check "... is named a store, not a job file" has "s.ntk: is an ntkd store, not a job file" err.log
cp s.ntk big.ntk && truncate -s 17M big.ntk # past the job file's 16 MiB: still named a store
expect_rc 2 "a store of more than 16 MiB given for the job file" "$NTKD" big.ntk
check "... is named a store too" has "big.ntk: is an ntkd store, not a job file" err.log
rm -f big.ntk
# a [test] count past the test data names [test] count (it said "[data] count")
printf '[data]\npath = x.npy\n[test]\npath = tx.npy\ncount = 9\n[model]\narch = Dense Relu Dense\n[output]\npath = tc.ntk\n' >tc.conf
expect_rc 2 "a [test] count past the test data" "$NTKD" tc.conf
check "... names [test] count" has "tc.conf:4: \[test\] path: tx.npy: \[test\] count = 9 but the data hold only 6 samples" err.log
# an [output] path under a file: no lock file can be made there; the key's line says which
printf '[data]\npath = x.npy\n[model]\narch = Dense Relu Dense\n[output]\npath = x.npy/s.ntk\n' >under.conf
expect_rc 3 "an [output] path under a file" "$NTKD" under.conf
check "... names the key's line" has "under.conf:6: \[output\] path: x.npy/s.ntk.lock: cannot open: Not a directory" err.log

# DIR/s.ntk of exactly 1023 bytes, and DIR/s.ntk.bak past the limit.
D=$W/deep
while [ $(( ${#D} + 200 + 6 )) -le 1023 ]; do D=$D/$(printf 'd%.0s' $(seq 200)); done
D=$D/$(printf 'e%.0s' $(seq $((1023 - 6 - ${#D} - 1))))
mkdir -p "$D" && cp s.ntk s.ntk.index "$D/"
check "DIR/s.ntk is 1023 bytes" [ $(( ${#D} + 6 )) = 1023 ]
expect_rc 0 "info of the store at 1023 bytes" "$NTKD" info "$D/s.ntk"
cp s.ntk "$D/s.ntk.bak"
for cmd in info verify; do
  expect_rc 2 "$cmd of a store named by 1027 bytes is refused" "$NTKD" $cmd "$D/s.ntk.bak"
  check "$cmd: the message says why" has "too long" err.log
done
expect_rc 2 "export of a store named by 1027 bytes is refused" "$NTKD" export "$D/s.ntk.bak" out.npy
check "export wrote nothing" [ ! -e out.npy ]
rm "$D/s.ntk.bak"
expect_rc 2 "info of a missing store whose name's first 1023 bytes are a store" "$NTKD" info "$D/s.ntk.bak"
expect_rc 2 "... and through a path that climbs back" "$NTKD" info "$D/s.ntk.bak/../../x"

# A job file named by more than 1023 bytes (here ././... before its
# name): its name was cut for the check that no output replaces an input,
# so a job whose [output] path is the job file itself replaced it with a
# store under --overwrite, exit 0. Refused (exit 2), the file kept.
mkdir jj && cp x.npy jj/
printf '[data]\npath = %s/jj/x.npy\n[model]\narch = Dense Relu Dense\n[output]\npath = %s/jj/job.conf\n' "$W" "$W" >jj/job.conf
cp jj/job.conf jj/job.orig
expect_rc 2 "a job whose store is its own job file is refused" "$NTKD" jj/job.conf --overwrite
# ntkd check said yes to it (and to an output that is the data, another
# store's index, or a log that is the snapshot), which the run refuses.
expect_rc 2 "... and ntkd check refuses it too" "$NTKD" check jj/job.conf
check "... saying why" has "is also the job file: an output never replaces an input" err.log
sed "s|^path = $W/jj/job.conf|path = $W/jj/x.npy|" jj/job.conf >jj/data.conf
expect_rc 2 "ntkd check: [output] path = the data file" "$NTKD" check jj/data.conf
check "... saying why" has "is also \[data\] path" err.log
check "... at the key's line" has "data.conf:6: \[output\] path (" err.log
printf '[data]\npath = x.npy\n[model]\narch = Dense Relu Dense\n[output]\n\npath = odir/\n' >jj/dir.conf
expect_rc 2 "ntkd check: [output] path names a folder" "$NTKD" check jj/dir.conf
check "... saying so at the key's line" has "dir.conf:7: \[output\] path (.*odir/) names a folder" err.log
LP=$W/jj/$(printf './%.0s' $(seq 520))job.conf
for args in "" "--overwrite"; do
  expect_rc 2 "... named by ${#LP} bytes${args:+ with $args} too" "$NTKD" "$LP" $args
  check "... the job file is kept" cmp -s jj/job.conf jj/job.orig
done
expect_rc 2 "check of a job file named by ${#LP} bytes" "$NTKD" check "$LP"

# Two derived names that coincide: the solve locks PREFIX.predictions.lock,
# and with [solve] predictions = sp and the store sp.predictions that is the
# store's own lock file, held by the job: it computed every tile, then said
# its predictions were "in use by another running job" (its own pid), exit 7.
# Refused before anything is computed, by check and by the job.
printf '[data]\npath = x.npy\nlabels = y.npy\n[test]\npath = tx.npy\nlabels = ty.npy\n[model]\narch = Dense Relu Dense\n[solve]\nridge = 1e-3\npredictions = sp\n[output]\npath = sp.predictions\n' >sp.conf
expect_rc 2 "check: predictions whose lock is the store's lock file" "$NTKD" check sp.conf
check "... the message names the lock file" has "sp.predictions.lock" err.log
expect_rc 2 "the job is refused" "$NTKD" sp.conf
check "... at the key's line, the job file named once" has "^ntkd: error: sp.conf:11: \[solve\] predictions: sp: the solve locks" err.log
check "... before it computed anything" [ ! -e sp.predictions ]
sed -i 's/^predictions = sp$/predictions = sq/' sp.conf
expect_rc 0 "another prefix solves" "$NTKD" sp.conf
check "... its predictions written" [ -e sq-ntk-ridge0.001.npy ]

# The same for a training job whose [train] log is SNAPSHOT.lock: it said the
# log was "being written by another running job" (itself), exit 7.
printf '[data]\npath = x.npy\nlabels = y.npy\n[validation]\npath = tx.npy\nlabels = ty.npy\n[train]\nlayers = 5 8 3\nbatch = 4\nepochs = 1\nsnapshot = m.snap\nlog = m.snap.lock\n' >t.conf
expect_rc 2 "a training log that is the snapshot's lock file" "$NTKD" t.conf
expect_rc 2 "... and ntkd check says so" "$NTKD" check t.conf
check "... the message says so" has "is the snapshot's lock file" err.log
check "... nothing written" [ ! -e m.snap ]

# Two names of one file in a folder that does not exist yet: ntk_same_file
# compared them as written ("nd/./m.snap" and "nd/m.snap" differ), so a
# fresh training job with --overwrite renamed its snapshot over its log,
# exit 0, the log lost (without --overwrite: exit 2 only after making the
# log, "not an ntkd training snapshot"); a kernel job computed its store
# before its solve found the predictions file was the store.
sed 's|^snapshot = .*|snapshot = nd/./m.snap|; s|^log = .*|log = nd/m.snap|' t.conf >t2.conf
expect_rc 2 "snapshot nd/./m.snap and log nd/m.snap, nd absent, --overwrite" "$NTKD" t2.conf --overwrite
check "... the message says they are one file" has "two outputs cannot share a file" err.log
check "... nothing made" [ ! -e nd ]
sed 's|^snapshot = .*|snapshot = nd/x/../m.snap|; s|^log = .*|log = nd/m.snap|' t.conf >t3.conf
expect_rc 2 "... and nd/x/../m.snap" "$NTKD" t3.conf --overwrite
sed 's|^snapshot = .*|snapshot = nd/a/m.snap|; s|^log = .*|log = nd/b/m.snap|' t.conf >t4.conf
expect_rc 0 "nd/a/m.snap and nd/b/m.snap are two files" "$NTKD" t4.conf
rm -rf nd
sed 's|^predictions = .*|predictions = nd/p|; s|^path = sp.predictions|path = nd/./p-ntk-ridge0.001.npy|' sp.conf >nd.conf
expect_rc 2 "check: a predictions file that is the store, in a new folder" "$NTKD" check nd.conf
expect_rc 2 "... the job" "$NTKD" nd.conf
check "... refused before the store was made" [ ! -e nd ]
check "... at the job file's predictions line" has "nd.conf:11: \[solve\] predictions: the ntk predictions file of ridge 0.001" err.log

# Under mpirun a store path of 245 bytes or more aborted every worker in
# Open MPI 4.1's sharedfp/lockedfile component (a fixed buffer for the
# name), exit 134: ntkd leaves that component out.
M=$W/mpi/$(printf 'p%.0s' $(seq 200))
mkdir -p "$M"
M=$M/$(printf 'z%.0s' $(seq $((300 - ${#M} - 5)))).ntk
printf '[data]\npath = %s/x.npy\n[model]\narch = Dense Relu Dense\n[output]\npath = %s\n' "$W" "$M" >m.conf
expect_rc 0 "mpirun -np 3 with a store path of ${#M} bytes" mpirun -np 3 "$NTKD" m.conf
expect_rc 0 "... the store is whole (verify)" "$NTKD" verify "$M"

# A store whose index is another store: the job of x.ntk wrote its index
# over the store x.ntk.index, exit 0, that store lost. Refused (exit 2).
mkdir cl && cp x.npy cl/
printf '[data]\npath = x.npy\n[model]\narch = Dense Relu Dense\n[output]\npath = x.ntk.index\n' >cl/a.conf
printf '[data]\npath = x.npy\n[model]\narch = Dense Relu Dense\n[output]\npath = x.ntk\n' >cl/b.conf
expect_rc 0 "a store named x.ntk.index" "$NTKD" cl/a.conf
cp cl/x.ntk.index cl/a.saved
expect_rc 2 "the store x.ntk, whose index would replace it" "$NTKD" cl/b.conf
check "... the message names it" has "the store's index, .*x.ntk.index, is an ntkd store" err.log
check "... the store x.ntk.index is kept" cmp -s cl/x.ntk.index cl/a.saved

# A job's data named as a temporary file of its store (STORE.tmp.HOST.PID,
# PID gone): the clean-up of a killed run's temporary files removed it, the
# job's own input, exit 0. Only files that are empty or start as that
# writer's file does (a store's header) are removed now.
mkdir tmpc
sh -c 'exit 0' & dead=$!
wait $dead
H=$(hostname)
cp x.npy "tmpc/s.ntk.tmp.$H.$dead"
printf '[data]\npath = s.ntk.tmp.%s.%s\nformat = npy\n[model]\narch = Dense Relu Dense\n[output]\npath = s.ntk\n' "$H" "$dead" >tmpc/j.conf
expect_rc 0 "a job whose data is named STORE.tmp.HOST.PID" "$NTKD" tmpc/j.conf
check "... its data file is kept" cmp -s x.npy "tmpc/s.ntk.tmp.$H.$dead"
rm -f tmpc/s.ntk tmpc/s.ntk.index
# PIDs of processes that have exited (dead + 1 and + 2 were taken by other
# tests' processes under ctest -j: still alive, their files were kept)
sh -c 'exit 0' & dead1=$!
wait $dead1
sh -c 'exit 0' & dead2=$!
wait $dead2
printf 'NTKDSTOR torn' >"tmpc/s.ntk.tmp.$H.$dead1"
: >"tmpc/s.ntk.tmp.$H.$dead2"
expect_rc 0 "... and with a killed run's temporary stores beside it" "$NTKD" tmpc/j.conf
check "... those are removed" [ ! -e "tmpc/s.ntk.tmp.$H.$dead1" -a ! -e "tmpc/s.ntk.tmp.$H.$dead2" ]
check "... the data file is kept" cmp -s x.npy "tmpc/s.ntk.tmp.$H.$dead"

# An empty argument names no file: said so, not ": cannot open".
for cmd in info verify; do
  expect_rc 2 "$cmd ''" "$NTKD" $cmd ''
  check "... the message says the path is empty" has "an empty path was given (store)" err.log
done
expect_rc 2 "export '' OUT" "$NTKD" export '' out.npy
check "... the message says the path is empty" has "an empty path was given (store)" err.log

# A store in a folder that takes no new files (/proc): the message named
# the lock file ntkd makes beside it ("/proc/s.ntk.lock: cannot open: No
# such file or directory"), a file the user never wrote; it names the folder.
sed 's|^path = s.ntk|path = /proc/s.ntk|' job.conf > proc.conf
expect_rc 2 "a store in /proc exits 2" "$NTKD" proc.conf
check "... naming the folder, not a lock file" has "/proc: cannot create the lock file there" err.log

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
