#!/usr/bin/env bash
# scripts/slurm/kernel.sbatch without SLURM, mpirun and scontrol stubbed:
# the ranks it maps on several GPU nodes (docs/GPU.md, "Placement": G + 1 on
# the first node, G on each other one), a requeue that fails (the job must
# not end 0 with the store unfinished), and a USR1 that arrives as the job
# finishes (nothing to requeue), exit 9 requeued 3 times whatever the
# time-limit requeues before; train.sbatch the same requeue rules (exit 9
# only with a [train] snapshot).
# Usage: tests/e2e_slurm_script.sh path/to/ntkd
set -u
NTKD=$(readlink -f "${1:?usage: e2e_slurm_script.sh path/to/ntkd}")
source "$(dirname "$(readlink -f "$0")")/e2e_lib.sh"
SBATCH=$SRC/scripts/slurm/kernel.sbatch
REAL_MPIRUN=$(command -v mpirun)
mkdir -p fakebin
printf '#!/bin/sh\necho "scontrol $*" >> "%s/scontrol.calls"\nexit ${SCONTROL_RC:-0}\n' "$W" > fakebin/scontrol
chmod +x fakebin/scontrol

# Three nodes of 8 GPUs: Open MPI maps onto pretend hosts of 9 slots each
# (--ntasks-per-node=9) and shows its map without starting anything.
cat > fakebin/mpirun <<MPI
#!/bin/sh
exec "$REAL_MPIRUN" --host n1:9,n2:9,n3:9 --display-map --do-not-launch "\$@"
MPI
chmod +x fakebin/mpirun
PATH="$W/fakebin:$PATH" SLURM_JOB_ID=5 SLURM_NTASKS=27 SLURM_JOB_NUM_NODES=3 SLURM_GPUS_PER_NODE=h200:8 \
  NTKD=/bin/true bash "$SBATCH" job.conf > map.log 2>&1
sed -n 's/.*Data for node: \([a-z0-9]*\).*Num procs: \([0-9]*\).*/\1 \2/p' map.log > map.txt
check "3 nodes x 8 GPUs: 9 ranks on the first node, 8 on each other ($(tr '\n' ' ' < map.txt))" \
  bash -c "[ \"\$(tr '\n' ' ' < map.txt)\" = 'n1 9 n2 8 n3 8 ' ]"
check "... rank 0 on the first node" grep -q 'App: 0 Process rank: 0 ' map.log
PATH="$W/fakebin:$PATH" SLURM_JOB_ID=5 SLURM_NTASKS=9 SLURM_JOB_NUM_NODES=1 SLURM_GPUS_PER_NODE=8 \
  NTKD=/bin/true bash "$SBATCH" job.conf > map1.log 2>&1
check "1 node x 8 GPUs: 9 ranks" grep -q 'Data for node: n1.*Num procs: 9' map1.log

# The requeue rules of both scripts. A job step that ntkd stopped (exit 5)
# and a requeue that fails: the batch script must fail too, not end 0 over
# an unfinished store. A USR1 that reaches the batch shell as the step ends
# 0: the job is finished, nothing to requeue.
TRAIN=$SRC/scripts/slurm/train.sbatch
cat > fakebin/usr1-then-0 <<'MPI'
#!/bin/sh
trap '' USR1
kill -USR1 $PPID
sleep 1
exit 0
MPI
chmod +x fakebin/usr1-then-0
id=6
for script in "$SBATCH" "$TRAIN"; do
  name=$(basename "$script")
  printf '#!/bin/sh\nexit 5\n' > fakebin/mpirun
  rm -f scontrol.calls
  PATH="$W/fakebin:$PATH" SLURM_JOB_ID=$id SCONTROL_RC=1 NTKD=/bin/true bash "$script" job.conf > rq.log 2>&1
  rc=$?
  check "$name: exit 5 and scontrol requeue fails: non-zero (exit $rc), says it was not requeued" \
    bash -c "[ $rc != 0 ] && grep -q 'could not requeue' rq.log"
  rm -f scontrol.calls
  PATH="$W/fakebin:$PATH" SLURM_JOB_ID=$id NTKD=/bin/true bash "$script" job.conf > rq2.log 2>&1
  rc=$?
  check "$name: exit 5 and the requeue works: exit 0 (exit $rc), requeued" \
    bash -c "[ $rc = 0 ] && grep -q 'scontrol requeue $id' scontrol.calls"
  cp fakebin/usr1-then-0 fakebin/mpirun
  rm -f scontrol.calls
  PATH="$W/fakebin:$PATH" SLURM_JOB_ID=$((id + 1)) NTKD=/bin/true bash "$script" job.conf > fin.log 2>&1
  rc=$?
  check "$name: USR1 as the step finishes with 0: exit 0 (exit $rc), not requeued" \
    bash -c "[ $rc = 0 ] && [ ! -e scontrol.calls ] && grep -q 'finished with exit 0' fin.log"
  id=$((id + 2))
done

# kernel.sbatch: a run stopped by the time limit's warning (USR1) that
# added nothing to the store is not requeued: each run dropped its tiles in
# flight, and a limit shorter than one tile requeued for ever (h5). The
# store as the real `ntkd check` names it; absent before and after (a new
# store that got no tile is removed) is no progress either. With a byte
# added, or stopped by preemption (TERM): requeued. Each run in a session
# of its own: the batch shell must leave no process behind (the USR1
# resender's sleep outlived it).
printf '[data]\npath = x.npy\n[model]\narch = Dense Relu Dense\n[output]\npath = np/ns.ntk\n' > np.conf
mkdir -p np
for case in "USR1 none 5 not" "USR1 absent 5 not" "USR1 grow 0 yes" "TERM none 0 yes"; do
  set -- $case
  cat > fakebin/mpirun <<MPI
#!/bin/sh
trap '' USR1 TERM
kill -$1 \$PPID
sleep 3
[ $2 = grow ] && printf x >> "$W/np/ns.ntk"
exit 5
MPI
  chmod +x fakebin/mpirun
  rm -f np/ns.ntk scontrol.calls
  [ "$2" = absent ] || printf 'header' > np/ns.ntk
  PATH="$W/fakebin:$PATH" SLURM_JOB_ID=30 NTKD="$NTKD" setsid bash "$SBATCH" np.conf > np.log 2>&1 &
  sid=$!
  wait $sid
  rc=$?
  sleep 0.5
  left=$(pgrep -s "$sid" | wc -l)
  if [ "$4" = not ]; then
    check "kernel.sbatch: stopped by the warning, store $2 and nothing stored: not requeued, exit $rc, said why" \
      bash -c "[ $rc = 5 ] && [ ! -e scontrol.calls ] && grep -q 'nothing added to np/ns.ntk.*not requeued' np.log"
  else
    check "kernel.sbatch: stopped by $1, store $2: requeued (exit $rc)" \
      bash -c "[ $rc = 0 ] && grep -q 'scontrol requeue 30' scontrol.calls"
  fi
  check "... no process of the batch shell left ($left)" [ "$left" = 0 ]
done

# train.sbatch: a job without [train] snapshot keeps nothing when stopped
# (exit 5): requeued, it would start the training over at every time limit.
# Not requeued, non-zero, said at the start and at the end; with a
# snapshot (the [train] section's, not another section's key) requeued.
printf '#!/bin/sh\nexit 5\n' > fakebin/mpirun
printf '[data]\npath = x.npy\n# snapshot = not.this\n[train]\nlayers = 10\n' > nosnap.conf
printf '[data]\npath = x.npy\n[train]\nlayers = 10\n  snapshot = m.snap   # here\n' > snap.conf
rm -f scontrol.calls
PATH="$W/fakebin:$PATH" SLURM_JOB_ID=20 NTKD=/bin/true bash "$TRAIN" nosnap.conf > ns.log 2>&1
rc=$?
check "train.sbatch: exit 5 without [train] snapshot: not requeued, exit $rc, said so" \
  bash -c "[ $rc = 5 ] && [ ! -e scontrol.calls ] && grep -q 'sets no \[train\] snapshot' ns.log && grep -q 'not requeued' ns.log"
PATH="$W/fakebin:$PATH" SLURM_JOB_ID=21 NTKD=/bin/true bash "$TRAIN" snap.conf > s.log 2>&1
rc=$?
check "train.sbatch: exit 5 with a snapshot: requeued (exit $rc)" \
  bash -c "[ $rc = 0 ] && grep -q 'scontrol requeue 21' scontrol.calls && ! grep -q 'no \[train\] snapshot' s.log"
# ... its header written as ntkd also reads it ("[ train ]", a byte order
# mark and CRLF): it was taken for a job without a snapshot, never requeued
printf '\xef\xbb\xbf[ train ]\r\nlayers = 10\r\nsnapshot = m.snap\r\n[data]\r\npath = x.npy\r\n' > snap2.conf
rm -f scontrol.calls
PATH="$W/fakebin:$PATH" SLURM_JOB_ID=23 NTKD=/bin/true bash "$TRAIN" snap2.conf > s2.log 2>&1
rc=$?
check "train.sbatch: '[ train ]' with a snapshot, CRLF: requeued (exit $rc)" \
  bash -c "[ $rc = 0 ] && grep -q 'scontrol requeue 23' scontrol.calls && ! grep -q 'no \[train\] snapshot' s2.log"

# train.sbatch: a requeued run that finds the snapshot held (exit 7) waits
# and retries, as kernel.sbatch does, rather than fail the job.
cat > fakebin/mpirun <<MPI
#!/bin/sh
n=\$(cat "$W/tries" 2>/dev/null || echo 0); echo \$((n + 1)) > "$W/tries"
[ "\$n" -ge 2 ] && exit 0
exit 7
MPI
rm -f scontrol.calls tries
PATH="$W/fakebin:$PATH" SLURM_JOB_ID=10 NTKD_LOCK_POLL=0 NTKD=/bin/true bash "$TRAIN" job.conf > t7.log 2>&1
rc=$?
check "train.sbatch: exit 7 twice, then 0: retried, exit 0 (exit $rc, $(cat tries) runs)" \
  bash -c "[ $rc = 0 ] && [ \"\$(cat tries)\" = 3 ] && grep -q 'in use by another run (exit 7); retrying' t7.log && [ ! -e scontrol.calls ]"
printf '#!/bin/sh\nexit 7\n' > fakebin/mpirun
PATH="$W/fakebin:$PATH" SLURM_JOB_ID=11 NTKD_LOCK_POLL=1 NTKD_LOCK_WAIT=2 NTKD=/bin/true bash "$TRAIN" job.conf > t7b.log 2>&1
check "train.sbatch: still in use after NTKD_LOCK_WAIT: requeued" bash -c "grep -q 'still in use after' t7b.log && grep -q 'scontrol requeue 11' scontrol.calls"

# kernel.sbatch: exit 9 (a worker stopped answering) is requeued
# NTKD_MAX_REQUEUE (3) times for exit 9 (docs/RELIABILITY.md, "SLURM"),
# whatever the requeues for time limits before: a job resumed over 5 time
# limits (SLURM_RESTART_COUNT=5) still gets its 3, the 4th exit 9 ends it.
printf '#!/bin/sh\nexit 9\n' > fakebin/mpirun
rm -f scontrol.calls .ntkd-slurm-12.exit9
got=
for k in 1 2 3 4; do
  PATH="$W/fakebin:$PATH" SLURM_JOB_ID=12 SLURM_RESTART_COUNT=$((4 + k)) NTKD=/bin/true bash "$SBATCH" job.conf > w9.log 2>&1
  rc=$?
  n=$(grep -c 'scontrol requeue 12' scontrol.calls 2>/dev/null)
  got="$got $rc/${n:-0}"
done
check "kernel.sbatch: exit 9 after 5 time-limit requeues: requeued 3 times, then fails with 9 (exit/requeues:$got)" \
  bash -c "[ '$got' = ' 0/1 0/2 0/3 9/3' ] && grep -q 'after 3 requeues for it' w9.log && grep -q 'finished with exit 9' w9.log"
check "... and its exit-9 count is removed as it ends (it stayed after any exit but 0)" [ ! -e .ntkd-slurm-12.exit9 ]
printf '#!/bin/sh\nexit 0\n' > fakebin/mpirun
echo 1 > .ntkd-slurm-12.exit9 # requeued once for exit 9, and now it finishes
PATH="$W/fakebin:$PATH" SLURM_JOB_ID=12 NTKD=/bin/true bash "$SBATCH" job.conf > w0.log 2>&1
check "kernel.sbatch: the job's exit-9 count is removed when it finishes" bash -c "[ ! -e .ntkd-slurm-12.exit9 ]"
# ... and when a requeue for exit 9 fails (the count just raised stayed)
printf '#!/bin/sh\nexit 9\n' > fakebin/mpirun
rm -f .ntkd-slurm-16.exit9
PATH="$W/fakebin:$PATH" SCONTROL_RC=1 SLURM_JOB_ID=16 NTKD=/bin/true bash "$SBATCH" job.conf > w9f.log 2>&1
rc=$?
check "kernel.sbatch: a failed requeue for exit 9 ends 9 and removes the count (exit $rc)" \
  bash -c "[ $rc = 9 ] && grep -q 'could not requeue' w9f.log && [ ! -e .ntkd-slurm-16.exit9 ]"

# train.sbatch: exit 9 (a rank stopped answering) the same, with a
# snapshot; without one a requeue would start over: not requeued.
printf '#!/bin/sh\nexit 9\n' > fakebin/mpirun
rm -f scontrol.calls .ntkd-slurm-13.exit9
got=
for k in 1 2 3 4; do
  PATH="$W/fakebin:$PATH" SLURM_JOB_ID=13 SLURM_RESTART_COUNT=$((4 + k)) NTKD=/bin/true bash "$TRAIN" snap.conf > t9.log 2>&1
  rc=$?
  n=$(grep -c 'scontrol requeue 13' scontrol.calls 2>/dev/null)
  got="$got $rc/${n:-0}"
done
check "train.sbatch: exit 9: requeued 3 times, then fails with 9 (exit/requeues:$got)" \
  bash -c "[ '$got' = ' 0/1 0/2 0/3 9/3' ] && grep -q 'rank stopped answering (exit 9) after 3 requeues' t9.log"
check "... and its exit-9 count is removed as it ends" [ ! -e .ntkd-slurm-13.exit9 ]
rm -f scontrol.calls .ntkd-slurm-14.exit9
PATH="$W/fakebin:$PATH" SLURM_JOB_ID=14 NTKD=/bin/true bash "$TRAIN" nosnap.conf > t9n.log 2>&1
rc=$?
check "train.sbatch: exit 9 without [train] snapshot: not requeued, exit $rc" bash -c "[ $rc = 9 ] && [ ! -e scontrol.calls ]"
printf '#!/bin/sh\nexit 5\n' > fakebin/mpirun
echo 1 > .ntkd-slurm-17.exit9
PATH="$W/fakebin:$PATH" SLURM_JOB_ID=17 NTKD=/bin/true bash "$TRAIN" nosnap.conf > t5n.log 2>&1
rc=$?
check "train.sbatch: exit 5 without a snapshot, not requeued (exit $rc): its exit-9 count removed" \
  bash -c "[ $rc = 5 ] && [ ! -e .ntkd-slurm-17.exit9 ]"

# A step that ends at once (a bad job: exit 2) is reaped by bash before
# the scripts look with `kill -0`: its exit code was lost and the job ended
# 0 (seen once under ctest). BASH_ENV slows each `kill` down by 0.2 s, so
# that the step is surely reaped first: both scripts must end with 2.
printf 'kill() { sleep 0.2; builtin kill "$@"; }\n' > slowkill.sh
printf '#!/bin/sh\nexit 2\n' > fakebin/mpirun
for script in "$SBATCH" "$TRAIN"; do
  rm -f scontrol.calls
  PATH="$W/fakebin:$PATH" BASH_ENV="$W/slowkill.sh" SLURM_JOB_ID=15 NTKD=/bin/true bash "$script" snap.conf > fast.log 2>&1
  rc=$?
  check "$(basename "$script"): a step that exits 2 at once: the job exits 2, not requeued (exit $rc)" \
    bash -c "[ $rc = 2 ] && [ ! -e scontrol.calls ] && grep -q 'finished with exit 2' fast.log"
done

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
