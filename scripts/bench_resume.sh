#!/usr/bin/env bash
# Resume and verify at size (issue 13, part 3): the Fashion-MNIST FC job of
# scripts/bench_fc.sh --fashion (N = 60 000, tile 2048, mpirun -np 3) is
# SIGKILLed (every rank) once about 70 % of its tiles are in the store; then,
# each with a cold page cache (as root: sync; echo 3 > drop_caches):
#   - the resume's start-up: from launch to the coordinator's "tiles to
#     compute" line, for each build given (the resumed job is SIGKILLed
#     right after, so every build starts from the same store);
#   - ntkd verify of the store, one process and under mpirun -np 2.
#
#   scripts/bench_resume.sh NEW_BUILD [OLD_BUILD]
# OLD_BUILD: a build from before the index (commit 7836b42), whose resume
# scans and checks the whole store. TMPDIR holds the store (about 8 GB).
# The outputs are checked: every resume must reach its "tiles to compute"
# line and every verify must pass (exit 0: the killed store is intact);
# the script exits 1 otherwise.
set -euo pipefail
source "$(dirname "$0")/args.sh"
script_args 2 -- "$@"
here=$(cd "$(dirname "$0")/.." && pwd)
new=$(readlink -f "${1:?usage: bench_resume.sh NEW_BUILD [OLD_BUILD]}")
old=${2:+$(readlink -f "$2")}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
work=$(mktemp -d "${TMPDIR:-/tmp}/ntkd-resume-XXXXXX")
trap 'pkill -9 -f "ntkd $work/job.conf" 2>/dev/null; rm -rf "$work"' EXIT
images=${NTKD_BENCH_FASHION:-/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz}
cat > "$work/job.conf" <<CONF
[data]
path = $images
count = ${NTKD_BENCH_N:-60000}
[model]
arch = Dense Relu Dense Relu Dense
w_std = 1.4142135623730951
b_std = 0.05
kernel = ntk
[compute]
tile = 2048
[output]
path = $work/job.ntk
progress = 0.1
CONF
drop() {
  sync
  if [ "$(id -u)" = 0 ]; then echo 3 > /proc/sys/vm/drop_caches; else echo "  (not root: page cache not dropped)"; fi
}
tiles() { "$new/ntkd" info "$work/job.ntk" 2>/dev/null | sed -n 's|^progress: *\([0-9]*\)/\([0-9]*\).*|\1 \2|p'; }
# Rank pids of this job (not mpirun): they carry OMPI_COMM_WORLD_RANK.
ranks() {
  for p in $(pgrep -f "ntkd $work/job.conf"); do
    tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -q '^OMPI_COMM_WORLD_RANK=' && echo "$p"
  done
}

mpirun -np 3 "$new/ntkd" "$work/job.conf" >/dev/null 2>"$work/run.log" &
mp=$!
# The coordinator's progress lines ("ntkd: 300/465 tiles (64.5%) ...").
while :; do
  pct=$(grep -o '([0-9.]*%)' "$work/run.log" 2>/dev/null | tail -1 | tr -d '(%)' | cut -d. -f1 || true)
  [ "${pct:-0}" -ge 70 ] && break
  kill -0 $mp 2>/dev/null || { echo "the job ended before 70 %"; exit 1; }
  sleep 0.05
done
kill -9 $(ranks) 2>/dev/null || true
wait $mp 2>/dev/null || true
read -r done total < <(tiles) || true
size=$(stat -c %s "$work/job.ntk")
echo "store after the SIGKILL: $done of $total tiles, $(( size / 1000000 )) MB; uptime: $(uptime)"

# start-up BUILD LABEL: seconds from launch to "tiles to compute".
startup() {
  drop
  local t0 t1
  t0=$(date +%s.%N)
  mpirun -np 3 "$1/ntkd" "$work/job.conf" >/dev/null 2>"$work/resume.log" &
  local m=$!
  until grep -q "tiles to compute" "$work/resume.log" 2>/dev/null; do
    kill -0 $m 2>/dev/null || { echo "  check FAILED: $2: the resume ended early:"; tail -3 "$work/resume.log"; checks=1; return; }
    sleep 0.02
  done
  t1=$(date +%s.%N)
  kill -9 $(ranks) 2>/dev/null || true
  wait $m 2>/dev/null || true
  printf '  resume start-up, %-28s %6.2f s  (%s)\n' "$2:" "$(echo "$t1 - $t0" | bc -l)" \
    "$(grep -m1 -o 'resuming.*' "$work/resume.log" | cut -c1-90)"
}
checks=0
echo "cold page cache each time:"
startup "$new" "this build (index)"
[ -n "$old" ] && startup "$old" "old build (full scan)"
# The old build's resume rewrote nothing the new one needs: its index is
# still the store's (same store id); a second new-build start-up shows it.
[ -n "$old" ] && startup "$new" "this build again"

vtime() { # vtime LABEL CMD...: cold-cache wall time of a verify
  local label=$1; shift
  drop
  local t0 t1 rc=0
  t0=$(date +%s.%N)
  "$@" >"$work/verify.log" 2>&1 || rc=$?
  t1=$(date +%s.%N)
  printf '  verify, %-34s %6.2f s  (exit %d: %s)\n' "$label:" "$(echo "$t1 - $t0" | bc -l)" "$rc" \
    "$(grep -m1 'tiles intact' "$work/verify.log" | sed 's|^.*job.ntk: ||')"
  [ "$rc" = 0 ] || { echo "  check FAILED: $label: verify exit $rc"; checks=1; }
}
vtime "this build, one process" "$new/ntkd" verify "$work/job.ntk"
vtime "this build, mpirun -np 2" mpirun -np 2 "$new/ntkd" verify "$work/job.ntk"
[ -n "$old" ] && vtime "old build, one process" "$old/ntkd" verify "$work/job.ntk"
echo "uptime: $(uptime)"
[ $checks = 0 ] && echo "checks: every resume started, every verify passed"
exit $checks
