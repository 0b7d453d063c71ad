# Shared by the end-to-end test scripts (sourced): a scratch folder, Open
# MPI settings, and the pass/fail bookkeeping that ends in the plain
# "N passed, N failed" line.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
PY=/usr/bin/python3
# The source tree, found before the cd below (a relative $0 breaks after it).
SRC=$(dirname "$(dirname "$(readlink -f "$0")")")
W=$(mktemp -d "${TMPDIR:-/tmp}/ntkd-e2e-XXXXXX")
trap '[ -n "${KEEP_W:-}" ] || rm -rf "$W"' EXIT
cd "$W" || exit 1
W=$(pwd -P) # as /proc/PID/cwd shows it (job_pids)
passed=0 failed=0
ok() { passed=$((passed + 1)); echo "ok: $*"; }
bad() { failed=$((failed + 1)); echo "FAILED: $*"; }
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }
# expect_rc CODE WHAT CMD...: run CMD, compare its exit code
expect_rc() {
  local want=$1 what=$2; shift 2
  "$@" >out.log 2>err.log
  local rc=$?
  if [ "$rc" = "$want" ]; then ok "$what (exit $rc)"; else bad "$what: exit $rc, wanted $want"; sed 's/^/    /' err.log | tail -5; fi
}
has() { grep -q -- "$1" "$2"; }
# damage FILE OFFSET: change the byte at OFFSET (all 8 bits flipped). Never
# a fixed value: a byte of a random field (a store id) already holds any
# given value one time in 256, and the "damage" would change nothing.
damage() {
  local b
  b=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
  [ -n "$b" ] || { echo "    damage: no byte at $2 in $1"; return 1; }
  printf "\\$(printf %03o $((b ^ 255)))" | dd of="$1" bs=1 seek="$2" conv=notrunc 2>/dev/null
}
# tiles_done STORE: how many tiles STORE holds now (empty if unreadable).
tiles_done() { "$NTKD" info "$1" 2>/dev/null | sed -n 's|^progress: *\([0-9]*\)/.*|\1|p'; }
# wait_tiles STORE MIN [SECONDS]: poll until STORE holds at least MIN tiles.
# Signals in the tests are sent only once a job is really computing: how long
# mpirun takes to start its ranks differs a lot between machines. SECONDS
# (default 300) is a hang guard only: it fails, saying so.
wait_tiles() {
  local n end=$((SECONDS + ${3:-300}))
  while [ $SECONDS -lt $end ]; do
    n=$(tiles_done "$1")
    [ "${n:-0}" -ge "$2" ] && return 0
    sleep 0.05
  done
  echo "    waited ${3:-300}s for $2 tiles in $1"
  return 1
}
# wait_file FILE PID [SECONDS]: poll until FILE exists, giving up early if
# process PID has ended. A fixed bound in steps of sleeps is too short on a
# slow machine (a sanitizer build on CI took over 8 s for the first epoch).
wait_file() {
  local end=$((SECONDS + ${3:-300}))
  while [ $SECONDS -lt $end ]; do
    [ -e "$1" ] && return 0
    kill -0 "$2" 2>/dev/null || { [ -e "$1" ]; return; }
    sleep 0.02
  done
  echo "    waited ${3:-300}s for $1"
  return 1
}
# erf_depth SECONDS LOG LAYERS [ENTRIES MIN MAX POWER]: how many [Dense Erf]
# layers make a job of about SECONDS of tiles, from LOG, ntkd's log of a
# calibration run of LAYERS layers ("tiles X s"), whose job had ENTRIES
# times fewer kernel entries (default 1). A size, not a check: machines
# differ 30x (an AVX2 EPYC's scalar Erf map against a Zen 5). The time per
# layer grows with the depth (one job of 1500 samples here: 200 layers
# 0.5 s, 800 layers 6.2 s, 1637 layers 20.5 s), so the depth follows the
# square root of the time: a linear rule made jobs 5-20x longer than meant
# (trust.sh took 20 minutes instead of 3). POWER 1 (default 0.5): the
# linear rule, to correct a depth from a run of about the size wanted.
erf_depth() {
  $PY - "$1" "$2" "$3" "${4:-1}" "${5:-10}" "${6:-2000}" "${7:-0.5}" <<'PY'
import math, re, sys
target, log, layers, entries, lo, hi, power = sys.argv[1], sys.argv[2], *map(float, sys.argv[3:])
m = re.search(r'tiles ([0-9.]+) s', open(log).read()) if log else None
took = max(float(m.group(1)) if m else 1.0, 1e-3) * entries
print(int(max(lo, min(hi, layers * (float(target) / took) ** power))))
PY
}
# job_pids PATTERN: pids of the processes whose command line matches
# PATTERN and that run in this script's folder ($W): ctest runs tests side
# by side, and another test's jobs may have the same command line.
job_pids() {
  local p
  for p in $(pgrep -f -- "$1"); do
    [ "$(readlink "/proc/$p/cwd" 2>/dev/null)" = "$W" ] && echo "$p"
  done
  return 0
}
# stop_procs PID...: SIGSTOP each and wait until every thread of each has
# stopped (state T) or ended. kill returns before the kernel has stopped a
# thread that is running or inside a system call, so a file read at once may
# still change under a write in flight: trust_files' checksum of a held store
# differed on a loaded CI machine. A guard of 100 s.
stop_procs() {
  local p t s busy _
  kill -STOP "$@" 2>/dev/null
  for _ in $(seq 2000); do
    busy=0
    for p in "$@"; do
      for t in /proc/"$p"/task/*/stat; do
        s=$(sed 's/.*) //' "$t" 2>/dev/null) || continue
        case "${s:0:1}" in T|t|Z|X|'') ;; *) busy=1 ;; esac
      done
    done
    [ $busy = 0 ] && return 0
    sleep 0.05
  done
  echo "    processes $* did not stop within 100 s"
  return 1
}
# rank_pids PATTERN [RANK]: of those, the MPI ranks (processes with
# OMPI_COMM_WORLD_RANK set, so not mpirun itself); only rank RANK if given.
rank_pids() {
  local p r
  for p in $(job_pids "$1"); do
    r=$(tr '\0' '\n' < /proc/$p/environ 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
    [ -n "$r" ] && { [ -z "${2:-}" ] || [ "$r" = "$2" ]; } && echo "$p"
  done
  return 0
}
# stall_rank MATCH RANK MPIRUN_PID: SIGSTOP rank RANK of the job whose
# processes MATCH names (rank_pids), wait for mpirun to end (a guard kills
# it after 120 s: a job that never notices ends as 137), then SIGCONT the
# stopped rank. Sets rc (mpirun's exit) and stopped (the rank's pid).
stall_rank() {
  stopped=$(rank_pids "$1" "$2")
  kill -STOP $stopped 2>/dev/null
  (sleep 120; kill -KILL "$3") >/dev/null 2>&1 &
  local guard=$!
  wait "$3"
  rc=$?
  kill $guard 2>/dev/null
  kill -CONT $stopped 2>/dev/null
  return 0
}
# synced_end STORE: where what STORE.index vouches for ends: its last
# intact sync mark's `covered`, or the end of the furthest record it lists
# before that mark if further (docs/STORE-FORMAT.md, "The index"); empty
# without a mark. A torn write can only tear bytes past it.
synced_end() {
  $PY - "$1" <<'PY'
import struct, sys, xxhash
try:
    b = open(sys.argv[1] + '.index', 'rb').read()
    with open(sys.argv[1], 'rb') as f:
        align = struct.unpack_from('<I', f.read(48), 44)[0]
except (OSError, struct.error):
    sys.exit(0)
end, ends = None, 0
for at in range(64, len(b) - 63, 64):
    e = b[at:at + 64]
    if struct.unpack_from('<Q', e, 56)[0] != xxhash.xxh3_64_intdigest(e[:56]):
        break
    kind = struct.unpack_from('<I', e, 0)[0]
    if kind == 1:
        off, length = struct.unpack_from('<QQ', e, 16)
        ends = max(ends, off + (128 + length + align - 1) // align * align)
    elif kind == 2:
        end = max(struct.unpack_from('<Q', e, 40)[0], ends)
if end is not None:
    print(end)
PY
}
