#!/usr/bin/env bash
# End-to-end tests of hostile data inputs: a FIFO or /dev/zero as a data
# path, a .npy whose shape wraps around 64 bits, and SIGTERM while a large
# file loads. Each must end quickly with its exit code and leave no store.
# Then the data's ways into the node's window under mpirun.
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
# same_as A B: B.ntk exported equals A.npy, byte for byte.
same_as() { "$NTKD" export "$2.ntk" "$2.npy" >/dev/null 2>&1 && cmp -s "$1.npy" "$2.npy"; }

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
check "... at the job file's line" has "wrap.conf:2: \[data\] path: wrap.npy: " err.log
check "no store for the overflowing shape" no_store wrap
# ... and the folders made for its store go again (one that was there stays)
mkdir -p kept
sed 's#^path = wrap.ntk#path = kept/new1/new2/wrap.ntk#' wrap.conf > wrapdir.conf
expect_rc 2 "overflowing .npy shape refused, its store in new folders" timeout -k 5 20 "$NTKD" wrapdir.conf
check "... the new folders removed, the old one kept" bash -c '[ ! -e kept/new1 ] && [ -d kept ]'
# ... by what it made, not by name: new/../was_empty names an empty folder that was there
mkdir -p was_empty
sed 's#^path = wrap.ntk#path = new3/../was_empty/wrap.ntk#' wrap.conf > wrapup.conf
expect_rc 2 "... its store through new/../ into an empty folder that was there" timeout -k 5 20 "$NTKD" wrapup.conf
check "... that folder kept" [ -d was_empty ]
# a store folder that is a dangling symbolic link: the open's error, not taken for a folder
# removed by another job and retried into "the lock file keeps being replaced"
ln -s /nonexistent/ntkd-e2e dangling
sed 's#^path = wrap.ntk#path = dangling/wrap.ntk#' wrap.conf > wrapdang.conf
expect_rc 2 "a store in a folder that is a dangling link" timeout -k 5 20 "$NTKD" wrapdang.conf
check "... says it cannot open the lock file there" has "dangling/wrap.ntk.lock: cannot open: No such file" err.log
# a mkdir on the way in that fails (a name over 255 bytes): the folder made
# before it goes too (it stayed: the removal stopped at the one never made)
long=$(printf 'L%.0s' $(seq 300))
sed "s#^path = wrap.ntk#path = new4/$long/wrap.ntk#" wrap.conf > wraplong.conf
expect_rc 2 "a store folder whose name is too long" timeout -k 5 20 "$NTKD" wraplong.conf
check "... says so" has "cannot create folder: File name too long" err.log
check "... the folder made before it removed" [ ! -e new4 ]
# umask 0777 (a non-root user; root reads any mode): the job once computed
# every tile, then ended with exit 4 blaming "another writer or damage" on
# an index it could not read back, and no rerun could open its store; in
# new folders, nothing could be created. Files and folders ntkd makes keep
# their owner's access (the umask decides the rest, as mkdir -p does).
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null &&
  setpriv --reuid=65534 --regid=65534 --clear-groups test -x "$NTKD"; then
  mkdir -p shut && chmod 777 shut
  $PY -c "import numpy as np; np.save('shut/small.npy', np.random.default_rng(0).standard_normal((6, 3)))"
  chmod 644 shut/small.npy
  job shut/um "$FC" "path = small.npy"
  sed -i 's#^path = shut/um.ntk#path = new5/sub/um.ntk#' shut/um.conf
  as_nobody() { (umask 777 && cd shut && setpriv --reuid=65534 --regid=65534 --clear-groups "$@"); }
  expect_rc 0 "a job under umask 0777 (uid 65534)" as_nobody timeout -k 5 30 "$NTKD" um.conf
  expect_rc 0 "... its rerun opens the store" as_nobody timeout -k 5 30 "$NTKD" um.conf
  expect_rc 0 "... and verify reads it, index included" as_nobody timeout -k 5 30 "$NTKD" verify new5/sub/um.ntk
  check "... with its index" bash -c '! grep -q "no usable index" err.log'
  check "... its files readable by their owner only" bash -c \
    '[ "$(stat -c %a shut/new5/sub/um.ntk shut/new5/sub/um.ntk.index shut/new5/sub)" = "$(printf "600\n600\n700")" ]'
else
  echo "skipped: umask 0777 as uid 65534 (needs root, setpriv, and $NTKD reachable by uid 65534)"
fi

# A job storing into folders that another (refused) job takes back meanwhile
# (tests/preload.c, TAKE_FOLDERS): its mkdir -p finds a folder that is gone
# at the next step, or its lock file's folder gone before the open; it
# makes them again (before: "cannot create folder", exit 3).
$PY -c "import numpy as np; np.save('small.npy', np.random.default_rng(0).standard_normal((6, 3)))"
job beside "$FC" "path = small.npy"
sed -i 's#^path = beside.ntk#path = kept/new1/new2/beside.ntk#' beside.conf
mkdir -p kept/new1
expect_rc 0 "a store whose folder is taken back between two mkdirs" env LD_PRELOAD="$PRELOAD" TAKE_FOLDERS=mkdir \
  "$NTKD" beside.conf
check "... is made" [ -f kept/new1/new2/beside.ntk ]
rm -rf kept/new1
mkdir -p kept/new1/new2
expect_rc 0 "a store whose folder is taken back before its lock file is made" env LD_PRELOAD="$PRELOAD" \
  TAKE_FOLDERS=lock "$NTKD" beside.conf
check "... is made" [ -f kept/new1/new2/beside.ntk ]

# --- (N, L, C) sequences and 2-D layers ---------------------------------------
# [data] layout = NLC holds sequences as L x 1 images: a 2-D filter or
# window wider than 1 ran as a 2-D layer over them, exit 0 (NNGP 0.25 for
# a 3 x 3 SAME filter where the 1-D (3,) gives 0.75; stax refuses it).
# Refused before any store exists, naming the layer and its 1-D form; a
# (3, 1) filter is the 1-D one and stores its bytes.
$PY -c "
import numpy as np
np.save('seq.npy', np.random.default_rng(5).standard_normal((6, 9, 3)))"
SEQ=("path = seq.npy" "layout = NLC")
job seq2d "Conv(8, (3, 3), padding='SAME') Relu GlobalAvgPool Dense(1)" "${SEQ[@]}"
expect_rc 2 "NLC data, a 3 x 3 Conv refused" "$NTKD" seq2d.conf
check "... naming the layer" has "layer 1: Conv is 2-D (filter (3, 3), strides (1, 1)) on (N, L, C) data" err.log
check "... and its 1-D form" has "write the 1-D form, Conv(8, (3,), padding='SAME')" err.log
check "... no store" no_store seq2d
# ntkd check reads no data, but the layout says the axes: it refused
# nothing here (exit 0) while the run refused the job.
expect_rc 2 "ntkd check: NLC data, a 3 x 3 Conv refused" "$NTKD" check seq2d.conf
check "... naming the file, line and layer" has "seq2d.conf:5: \[model\] arch, layer 1: Conv is 2-D" err.log
job seqpool "Conv(8, (3,), padding='SAME') AvgPool((2, 2)) Relu GlobalAvgPool Dense(1)" "${SEQ[@]}"
expect_rc 2 "NLC data, a 2 x 2 AvgPool refused" "$NTKD" seqpool.conf
check "... naming the layer and its 1-D form" has "layer 2: AvgPool is 2-D .*AvgPool((2,), strides=(1,), padding='VALID')" err.log
check "... no store" no_store seqpool
job seq1d "Conv(8, (3,), padding='SAME') Relu Conv(8, (1,)) AvgPool((2,)) Relu GlobalAvgPool Dense(1)" "${SEQ[@]}"
expect_rc 0 "NLC data, the 1-D network" "$NTKD" seq1d.conf
expect_rc 0 "ntkd check: NLC data, the 1-D network" "$NTKD" check seq1d.conf
job seqf1 "Conv(8, (3, 1), padding='SAME') Relu Conv(8, (1, 1)) AvgPool((2, 1)) Relu GlobalAvgPool Dense(1)" "${SEQ[@]}"
expect_rc 0 "NLC data, (3, 1), 1 x 1 and (2, 1) sizes" "$NTKD" seqf1.conf
"$NTKD" export seq1d.ntk seq1d.npy >/dev/null 2>&1
check "... the 1-D network's bytes" same_as seq1d seqf1

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

# --- under mpirun: rank 0 reads a plain file straight into the node's window -
# (src/job/data_share.c). Whatever the path (into the window, a compressed
# file or a [test] set copied in, a rank copy each where a node cannot
# share), the same bits as one process; a load that fails after the window
# is open fails on every rank, once, with no store.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
$PY - <<'PYEOF'
import gzip, shutil, numpy as np
r = np.random.default_rng(3)
x = r.standard_normal((60, 1024)).astype(np.float32)
np.save('w.npy', x)
with open('w.npy', 'rb') as f, gzip.open('wg.npy.gz', 'wb') as g:
    shutil.copyfileobj(f, g)
y = x.copy(); y[37, 5] = np.nan; np.save('wnan.npy', y)
np.save('wtest.npy', r.standard_normal((7, 1024)).astype(np.float32))
PYEOF
wjob() { # NAME PATH [line of [data]]
  printf '[data]\npath = %s\n%s\n[model]\narch = %s\nkernel = ntk\n[compute]\ntile = 16\n[output]\npath = %s.ntk\n' \
    "$2" "${3:-}" "$FC" "$1" > "$1.conf"
}
wjob w1 w.npy
expect_rc 0 "one process: the reference" "$NTKD" w1.conf
"$NTKD" export w1.ntk w1.npy >/dev/null 2>&1
sed 's#^path = w1.ntk#path = newf/w1.ntk#' w1.conf > w1dir.conf
expect_rc 0 "... its store in a new folder" "$NTKD" w1dir.conf
check "... the folder and the store kept" same_as w1 newf/w1
wjob w3 w.npy
expect_rc 0 "mpirun -np 3, a plain .npy read into the window" timeout -k 5 120 mpirun -np 3 "$NTKD" w3.conf
check "... one copy on the node" has "data: one copy per node on 1 node" err.log
check "... the same bits as one process" same_as w1 w3
wjob wn w.npy
expect_rc 0 "mpirun -np 4 as 2 pretend nodes" timeout -k 5 120 env NTKD_TEST_NODES=2 mpirun -np 4 "$NTKD" wn.conf
check "... the same bits" same_as w1 wn
wjob wg wg.npy.gz
expect_rc 0 "mpirun -np 3, a compressed .npy (copied into the window)" timeout -k 5 120 mpirun -np 3 "$NTKD" wg.conf
check "... the same bits" same_as w1 wg
wjob wf w.npy
expect_rc 0 "mpirun -np 3 under ulimit -f 150 (KB): no window, a copy per rank" \
  timeout -k 5 120 mpirun -np 3 bash -c "ulimit -f 150; exec '$NTKD' wf.conf"
check "... says the data cannot be shared" has "cannot be shared in node memory" err.log
check "... the same bits" same_as w1 wf
wjob wt1 w.npy "[test]
path = wtest.npy"
wjob wt3 w.npy "[test]
path = wtest.npy"
expect_rc 0 "a [test] set, one process" "$NTKD" wt1.conf
expect_rc 0 "a [test] set, mpirun -np 3" timeout -k 5 120 mpirun -np 3 "$NTKD" wt3.conf
"$NTKD" export wt1.ntk wt1.npy >/dev/null 2>&1
check "... the same bits" same_as wt1 wt3
wjob wnan wnan.npy
expect_rc 2 "mpirun -np 3, a NaN found after the window opened" timeout -k 5 120 mpirun -np 3 "$NTKD" wnan.conf
check "... named once" bash -c "[ \$(grep -c 'sample 37, feature 5 is NaN' err.log) = 1 ]"
check "... at the job file's line" has "wnan.conf:2: \[data\] path: wnan.npy: sample 37" err.log
check "... no store" no_store wnan
# a [test] file's error names the [test] path's line
wjob wtbad w.npy "[test]
path = wrap.npy"
expect_rc 2 "a [test] file refused" "$NTKD" wtbad.conf
check "... at the [test] path's line" has "wtbad.conf:4: \[test\] path: wrap.npy: " err.log
head -c 100000 w.npy > wcut.npy
wjob wcut wcut.npy
expect_rc 2 "mpirun -np 3, a cut .npy (no window asked for)" timeout -k 5 120 mpirun -np 3 "$NTKD" wcut.conf
check "... says truncated" has "wcut.npy: file is truncated" err.log

# A data file written while it is read: the values read may be of two
# versions (a slow file system's reads, the file rewritten between two of
# them: a kernel of data that never existed, stored and said done). The
# test pause holds the read after the header; the file is rewritten in
# place meanwhile, same size, other values.
cp w.npy wchg.npy
wjob wchg wchg.npy
NTKD_TEST_READ_PAUSE=3 "$NTKD" wchg.conf > /dev/null 2> err.log &
pid=$!
for _ in $(seq 1 100); do grep -q "NTKD_TEST_READ_PAUSE=3: paused before the values of wchg.npy" err.log && break; sleep 0.1; done
$PY -c "
import numpy as np
a = np.load('wchg.npy', mmap_mode='r+'); a[:] = -a; a.flush()"
wait "$pid"
rc=$?
check "a data file rewritten while it was read refused (exit $rc, wanted 2)" [ "$rc" = 2 ]
check "... saying so" has "wchg.npy changed while it was read (its modification time)" err.log
check "... no store" no_store wchg

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
