#!/usr/bin/env bash
# A real single-node SLURM test of scripts/slurm/kernel.sbatch: installs
# and starts munge, slurmctld and slurmd on this machine (as root), submits
# a kernel job, interrupts it as SLURM would before a time limit (USR1 to
# the batch shell), watches it requeue and finish, and checks that the
# matrix is byte-identical to an uninterrupted run.
#   scripts/slurm/test_slurm.sh [BUILD_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
build=$(readlink -f "${1:-$here/build}")
command -v slurmctld >/dev/null || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge; }
host=$(hostname -s)
cpus=4 # declared to SLURM (the job runs 3 ranks; oversubscription is fine for this test)

# munge
if [ ! -s /etc/munge/munge.key ]; then
  mkdir -p /etc/munge
  dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
fi
chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
mkdir -p /run/munge /var/log/munge /var/lib/munge && chown munge:munge /run/munge /var/log/munge /var/lib/munge
pgrep -x munged >/dev/null || runuser -u munge -- /usr/sbin/munged

# slurm
mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
cat > /etc/slurm/slurm.conf <<CONF
ClusterName=ntkdtest
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SlurmdParameters=config_overrides
ReturnToService=2
JobRequeue=1
MpiDefault=none
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
NodeName=$host CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
pgrep -x slurmctld >/dev/null || slurmctld
pgrep -x slurmd >/dev/null || slurmd
for _ in $(seq 30); do sinfo -h -o %t 2>/dev/null | grep -qE 'idle|mix|alloc' && break; sleep 1; done
sinfo

# The job: long enough to be interrupted (a few thousand tiles).
work=$(mktemp -d /tmp/ntkd-slurm-XXXXXX)
cd "$work"
/usr/bin/python3 -c "import numpy as np; np.save('x.npy', np.random.default_rng(4).standard_normal((5000, 600)).astype(np.float32))"
conf() { printf '[data]\npath = x.npy\n[model]\narch = Dense Relu Dense Erf Dense\n[compute]\ntile = 40\n[output]\npath = %s\nprogress = 2\n' "$1"; }
conf clean.ntk > clean.conf
conf job.ntk > job.conf
"$build/ntkd" clean.conf >/dev/null 2>&1 && "$build/ntkd" export clean.ntk clean.npy >/dev/null 2>&1

source "$here/scripts/env.sh"
export NTKD="$build/ntkd"
id=$(sbatch --parsable --ntasks=3 --chdir="$work" --output="$work/slurm-%j.log" "$here/scripts/slurm/kernel.sbatch" job.conf)
echo "submitted job $id"
for _ in $(seq 60); do [ -s job.ntk ] && "$build/ntkd" info job.ntk 2>/dev/null | grep -q 'progress: *[1-9]' && break; sleep 1; done
echo "interrupting job $id as a time limit would (USR1 to the batch shell): $("$build/ntkd" info job.ntk | grep progress)"
scancel --batch --signal=USR1 "$id"
state=""
for _ in $(seq 240); do
  state=$(scontrol show job "$id" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
  restarts=$(scontrol show job "$id" 2>/dev/null | sed -n 's/.*Restarts=\([0-9]*\).*/\1/p')
  # A requeued job may wait for a begin time; start it now.
  if [ "$state" = PENDING ] && [ "${restarts:-0}" -gt 0 ]; then scontrol update jobid="$id" BeginTime=now 2>/dev/null || true; fi
  [ "$state" = COMPLETED ] || [ "$state" = FAILED ] || [ "$state" = CANCELLED ] && break
  sleep 1
done
echo "job $id: state $state after ${restarts:-0} restart(s)"
echo "---- the job's log ----"
cat "$work"/slurm-"$id".log
echo "-----------------------"
"$build/ntkd" export job.ntk job.npy >/dev/null 2>&1 || true
ok=0
[ "$state" = COMPLETED ] && [ "${restarts:-0}" -ge 1 ] && cmp -s clean.npy job.npy && "$build/ntkd" verify job.ntk >/dev/null && ok=1
if [ $ok = 1 ]; then
  echo "slurm test: PASS: interrupted, requeued ${restarts} time(s), finished; matrix byte-identical to an uninterrupted run"
else
  echo "slurm test: FAIL (state $state, restarts ${restarts:-0})"
fi
[ $ok = 1 ]
