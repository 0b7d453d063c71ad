#!/usr/bin/env bash
# Per-node memory of a job's ranks as PSS (proportional set size: a page
# mapped by k processes counts 1/k to each, so the sum over the ranks counts
# shared memory once). Runs a Fashion-MNIST job (60 000 x 784 training
# images, 188 MB as float32) with mpirun -np R for each R, samples every
# rank's /proc/PID/smaps_rollup while the tile phase runs (from ntkd's
# "tiles to compute" line to its "done:" line), and prints the peak of the
# per-sample sum over the ranks and each rank's own peak (Pss, with its
# Pss_Anon / Pss_File / Pss_Shmem split at the summed peak). The input is one
# copy per node since commit 6ec9064 (an MPI shared-memory window), one per
# rank before it: expect about 1 x 188 MB of data against R x 188 MB.
#
#   scripts/bench_pss.sh [BUILD_DIR] [RANKS...]      (default ranks: 3 9)
#
# The job: [data] of configs/fc-fashion-full.conf, Dense Relu Dense Relu
# Dense, float32, kernel nngp (the store is about 7 GB at 60 000), tile 1024.
# Environment:
#   NTKD_PSS_N=60000           images (the first N)
#   NTKD_PSS_KERNEL=nngp       kernel = nngp or ntk
#   NTKD_PSS_TILE=1024         tile
#   NTKD_PSS_INTERVAL=0.2      seconds between samples
#   NTKD_BENCH_FASHION=FILE    the IDX images file (default: Debian package
#                              dataset-fashion-mnist)
#   TMPDIR                     where the scratch folder (with the store) goes;
#                              it is deleted after each job
# Rank processes are found as /proc/PID whose environ holds
# OMPI_COMM_WORLD_RANK and this run's NTKD_PSS_TAG and whose argv[0] is ntkd.
# Each job's output is checked (scripts/bench_check.sh): the leading
# 1024 x 1024 block of its store must equal, byte for byte, a one-process
# job of the first 1024 images (a multiple of the 512-row blocks of the input
# covariance: scripts/bench_fc.sh says why); the script exits 1 otherwise.
set -euo pipefail
source "$(dirname "$0")/args.sh"
script_args any -- "$@"
here=$(cd "$(dirname "$0")/.." && pwd)
source "$here/scripts/bench_check.sh"
build=$(readlink -f "${1:-$here/build}")
shift || true
rank_list=("$@")
[ ${#rank_list[@]} -gt 0 ] || rank_list=(3 9)
images=${NTKD_BENCH_FASHION:-/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz}
n=${NTKD_PSS_N:-60000}
kernel=${NTKD_PSS_KERNEL:-nngp}
tile=${NTKD_PSS_TILE:-1024}
interval=${NTKD_PSS_INTERVAL:-0.2}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
work=""
sampler=""
cleanup() {
  if [ -n "$sampler" ]; then kill "$sampler" 2>/dev/null || true; fi
  if [ -n "$work" ]; then rm -rf "$work"; fi
}
trap cleanup EXIT

checks=0
echo "PSS benchmark: $build/ntkd, Fashion-MNIST N=$n d=784 float32, $kernel, tile $tile"
echo "  load at start: $(uptime | sed 's/^ *//')"
for ranks in "${rank_list[@]}"; do
  work=$(mktemp -d "${TMPDIR:-/tmp}/ntkd-pss-XXXXXX")
  cat > "$work/job.conf" <<CONF
[data]
path = $images
count = $n

[model]
arch = Dense Relu Dense Relu Dense
w_std = 1.4142135623730951
b_std = 0.05
kernel = $kernel

[compute]
precision = float32
tile = $tile

[output]
path = job.ntk
level = 1
progress = 1000
CONF
  tag="$$-$ranks-$RANDOM"
  /usr/bin/python3 - "$tag" "$ranks" "$work/log" "$work/stop" "$interval" > "$work/pss" <<'PY' &
import os, sys, time
tag, ranks, log, stop, interval = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], float(sys.argv[5])
mark = ("NTKD_PSS_TAG=" + tag).encode()
keys = ("Pss", "Pss_Anon", "Pss_File", "Pss_Shmem")
pids = {}  # rank -> pid

def find():
    for p in os.listdir("/proc"):
        if not p.isdigit() or int(p) in pids.values():
            continue
        try:
            env = open(f"/proc/{p}/environ", "rb").read().split(b"\0")
            argv0 = open(f"/proc/{p}/cmdline", "rb").read().split(b"\0")[0]
        except OSError:
            continue
        if mark not in env or os.path.basename(argv0) != b"ntkd":
            continue
        for e in env:
            if e.startswith(b"OMPI_COMM_WORLD_RANK="):
                pids[int(e.split(b"=")[1])] = int(p)

def rollup(pid):
    v = {}
    try:
        for line in open(f"/proc/{pid}/smaps_rollup"):
            k, _, rest = line.partition(":")
            if k in keys:
                v[k] = int(rest.split()[0])
    except OSError:
        return None
    return v if "Pss" in v else None

def phase():
    try:
        s = open(log).read()
    except OSError:
        return 0
    return 2 if "ntkd: done:" in s else 1 if "tiles to compute" in s else 0

best = {"tile": None, "all": None}  # (sum, {rank: rollup})
rank_peak = {"tile": {}, "all": {}}
samples = {"tile": 0, "all": 0}
while not os.path.exists(stop):
    if len(pids) < ranks:
        find()
    ph = phase()
    vals = {r: rollup(p) for r, p in pids.items()}
    if len(pids) == ranks and all(vals.values()):
        total = sum(v["Pss"] for v in vals.values())
        for w in ("tile", "all") if ph == 1 else ("all",):
            samples[w] += 1
            if best[w] is None or total > best[w][0]:
                best[w] = (total, vals)
            for r, v in vals.items():
                rank_peak[w][r] = max(rank_peak[w].get(r, 0), v["Pss"])
    time.sleep(interval)

mb = lambda kb: kb * 1024 / 1e6
for w, title in (("tile", "tile phase"), ("all", "whole run ")):
    if best[w] is None:
        print(f"    {title}: no complete sample")
        continue
    total, vals = best[w]
    split = {k: sum(v.get(k, 0) for v in vals.values()) for k in keys[1:]}
    print(f"    {title}: peak summed PSS {mb(total):8.1f} MB over {ranks} ranks "
          f"(anon {mb(split['Pss_Anon']):.1f}, file {mb(split['Pss_File']):.1f}, "
          f"shmem {mb(split['Pss_Shmem']):.1f} MB; {samples[w]} samples)")
    print(f"      peak per rank (MB): " +
          ", ".join(f"{r}: {mb(rank_peak[w][r]):.1f}" for r in sorted(rank_peak[w])))
PY
  sampler=$!
  start=$(date +%s.%N)
  status=0
  NTKD_PSS_TAG=$tag mpirun -np "$ranks" "$build/ntkd" "$work/job.conf" 2>"$work/log" >/dev/null || status=$?
  end=$(date +%s.%N)
  touch "$work/stop"
  wait "$sampler" || true
  sampler=""
  printf '  mpirun -np %s: %.1f s wall, load %s\n' "$ranks" "$(echo "$end - $start" | bc -l)" \
    "$(cut -d' ' -f1-3 /proc/loadavg)"
  if [ "$status" != 0 ]; then
    echo "bench_pss.sh: mpirun -np $ranks failed (exit $status); the end of its log:" >&2
    tail -n 20 "$work/log" >&2
    exit 1
  fi
  grep -E "ntkd: data:|times:" "$work/log" | sed 's/^/    /' || true
  cat "$work/pss"
  m=$(( n < 1024 ? n : 1024 ))
  sed "s/^count = .*/count = $m/; s/^path = job.ntk\$/path = small.ntk/" "$work/job.conf" > "$work/small.conf"
  if ! "$build/ntkd" "$work/small.conf" >/dev/null 2>"$work/small.log"; then
    echo "    check FAILED: the one-process job of the first $m images failed"; checks=1
  elif ! same_block "mpirun -np $ranks against one process" "$build" "$work/job.ntk" "$work/small.ntk" "$m" > "$work/check"; then
    checks=1
  fi
  sed 's/^/    /' "$work/check" 2>/dev/null || true
  rm -rf "$work"
  work=""
done
echo "  load at end:   $(uptime | sed 's/^ *//')"
exit $checks
