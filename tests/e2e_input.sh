#!/usr/bin/env bash
# End-to-end tests of hostile data inputs: a FIFO or /dev/zero as a data
# path, a .npy whose shape wraps around 64 bits, and SIGTERM while a large
# file loads. Each must end quickly with its exit code and leave no store.
# Usage: tests/e2e_input.sh path/to/ntkd
set -u
NTKD=$(readlink -f "${1:?usage: e2e_input.sh path/to/ntkd}")
source "$(dirname "$(readlink -f "$0")")/e2e_lib.sh"

# job NAME ARCH [lines of [data]...]: a kernel job storing NAME.ntk.
job() {
  local name=$1 arch=$2; shift 2
  {
    printf '[data]\n'
    for l in "$@"; do printf '%s\n' "$l"; done
    printf '[model]\narch = %s\n[output]\npath = %s.ntk\n' "$arch" "$name"
  } > "$name.conf"
}
# tests/preload.c: READ_BYTES=FILE gets the bytes a run read, at its exit.
PRELOAD=$W/preload.so
mpicc -shared -fPIC -O1 -o "$PRELOAD" "$SRC/tests/preload.c" -ldl 2>preload.err ||
  bad "tests/preload.c does not build: $(head -3 preload.err)"
# ASan (the sanitizer build) wants its run-time first among the libraries.
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0
# no_store NAME: nothing NAME.ntk* (store, lock, temporary file) exists.
no_store() { ! ls "$1".ntk* >/dev/null 2>&1; }
FC="Dense Relu Dense"

# --- paths that are not files -----------------------------------------------
# `timeout` is only a hang guard: a reader that blocks in open() (a FIFO
# waits for a writer) or never ends (/dev/zero; SIGTERM did not stop it
# either, hence -k) fails with 124 or 137 instead of hanging the suite.
mkfifo fifo.npy
job fifo "$FC" "path = fifo.npy"
expect_rc 2 "FIFO as [data] path refused" timeout -k 5 20 "$NTKD" fifo.conf
check "the message says it is a FIFO" has "fifo.npy is a FIFO, not a regular file" err.log
check "no store for the FIFO job" no_store fifo
job zero "$FC" "path = /dev/zero" "format = cifar10" "count = 10"
expect_rc 2 "/dev/zero as cifar10 with count = 10 refused" timeout -k 5 20 \
  env LD_PRELOAD="$PRELOAD" READ_BYTES=zero.read "$NTKD" zero.conf
check "the message says it is a character device" has "/dev/zero is a character device" err.log
# Counted, not timed: against the same job with a data file that does not
# exist, under one CIFAR-10 record (3073 bytes) more read in all.
job nofile "$FC" "path = nofile.bin" "format = cifar10" "count = 10"
env LD_PRELOAD="$PRELOAD" READ_BYTES=nofile.read "$NTKD" nofile.conf >/dev/null 2>&1
check "... refused before reading it: $(cat zero.read 2>/dev/null) bytes read in all, $(cat nofile.read 2>/dev/null) for a missing file" \
  bash -c "[ \"\$(cat zero.read)\" -lt \$((\$(cat nofile.read) + 3073)) ]"
check "no store for the /dev/zero job" no_store zero

# --- a shape that wraps around 64 bits ---------------------------------------
# 5 * 3 * 12297829382473034411 = 5 (mod 2^64): 20 samples of "5 values",
# once taken as an image too large for anything (the CNN code crashed).
$PY - <<'PYEOF'
import io, numpy as np
h = io.BytesIO()
np.lib.format.write_array_header_1_0(h, {'descr': '<f4', 'fortran_order': False,
                                         'shape': (20, 5, 3, 12297829382473034411)})
open('wrap.npy', 'wb').write(h.getvalue() + bytes(400))
PYEOF
job wrap "Conv(3, 1, SAME) Relu GlobalAvgPool Dense" "path = wrap.npy"
expect_rc 2 "overflowing .npy shape refused" timeout -k 5 20 "$NTKD" wrap.conf
check "the message names the shape" has "shape (20, 5, 3, 12297829382473034411) is too large" err.log
check "no store for the overflowing shape" no_store wrap

# --- SIGTERM while loading ----------------------------------------------------
# A .npy.gz of 1.6 GB of float32 (450 MB compressed: concatenated gzip
# members of one 16 MiB block) that takes seconds to decompress. The signal
# is sent once ntkd has read 32 MB of it, so it is loading; it must end
# with exit 5, before any store exists, having read little more: counted
# (the bytes it read in all, tests/preload.c), not timed.
$PY - <<'PYEOF'
import io, zlib, numpy as np
rows, d, k = 4096, 1024, 96
blk = (np.random.default_rng(1).integers(0, 16, (rows, d)) / 16).astype(np.float32)
def member(b, level):
    c = zlib.compressobj(level, zlib.DEFLATED, 31)
    return c.compress(b) + c.flush()
m = member(blk.tobytes(), 1)
h = io.BytesIO()
np.lib.format.write_array_header_1_0(h, {'descr': '<f4', 'fortran_order': False, 'shape': (rows * k, d)})
with open('big.npy.gz', 'wb') as f:
    f.write(member(h.getvalue(), 6))
    for _ in range(k):
        f.write(m)
PYEOF
job big "$FC" "path = big.npy.gz"
env LD_PRELOAD="$PRELOAD" READ_BYTES=big.read "$NTKD" big.conf >out.log 2>err.log &
pid=$!
read_bytes() { sed -n 's/^rchar: //p' "/proc/$1/io" 2>/dev/null; }
end=$((SECONDS + 60))
while [ $SECONDS -lt $end ] && [ "$(read_bytes $pid)" -lt $((32 << 20)) ] 2>/dev/null; do sleep 0.01; done
# gone PID: PID has ended (a zombie until the wait below reaps it).
gone() { [ ! -e "/proc/$1" ] || [ "$(cut -d' ' -f3 "/proc/$1/stat" 2>/dev/null)" = Z ]; }
at_signal=$(read_bytes $pid)
kill -TERM $pid
# A hang guard only (SIGKILL after 120 s gives exit 137, a failure).
end=$((SECONDS + 120))
until gone $pid || [ $SECONDS -ge $end ]; do sleep 0.01; done
gone $pid || kill -KILL $pid
wait $pid
rc=$?
if [ "$rc" = 5 ]; then ok "SIGTERM while loading (exit 5)"; else bad "SIGTERM while loading: exit $rc, wanted 5"; sed 's/^/    /' err.log | tail -5; fi
size=$(stat -c %s big.npy.gz)
check "stopped after reading $(( $(cat big.read 2>/dev/null || echo 0) >> 20 )) MB ($((${at_signal:-0} >> 20)) MB at the signal) of its $((size >> 20)) MB" \
  bash -c "[ \"\$(cat big.read)\" -lt $((${at_signal:-0} + (64 << 20))) ]"
check "the message says it was reading the data" has "interrupted while reading .*big.npy.gz" err.log
check "no store after SIGTERM while loading" no_store big
rm -f big.npy.gz

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
