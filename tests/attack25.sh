#!/usr/bin/env bash
# Issue 25, the adversarial pass: attacks on what issue 25 changed, as a
# hostile user would make them (the writer locks through every alias, lock
# files replaced before and during the heartbeat, the store and its index
# changed under a running job, kills during a resume that rebuilds the
# index and at the final check, exports to odd places, forged indexes and
# snapshots, training constants, labels and arch integers at their limits,
# names of 249..256 bytes of multibyte characters, FIFOs and sockets, a
# full disk). None of them is run by trust.sh, trust_files.sh,
# store_corpus.* or e2e*.sh in this form.
#
# One line per attack: OK (a clear answer, nothing lost, no wrong number),
# UNCLEAR (a bad message or exit code) or BAD (exit 0 over a wrong or lost
# result, a crash, a hang, a damaged store reported as fine, a file of
# ntkd's or the user's replaced or destroyed), then the totals. The verdict
# is computed from what ntkd does (each attack states what would be OK), so
# the script shows the fixes as they land. Exit 1 if any attack is BAD.
# Attacks that need mount namespaces (unshare -m, root) are SKIPped where
# that is not allowed. Random moments are drawn from SEED.
# Usage: tests/attack25.sh path/to/ntkd [SEED]
set -u
NTKD=$(readlink -f "${1:?usage: attack25.sh path/to/ntkd [SEED]}")
SEED=${2:-25}
RANDOM=$SEED
echo "attack25: seed $SEED (rerun with: tests/attack25.sh $NTKD $SEED)"
source "$(dirname "$(readlink -f "$0")")/e2e_lib.sh"
export OPENBLAS_NUM_THREADS=1
export PYTHONPATH="$SRC/python${PYTHONPATH:+:$PYTHONPATH}"
HOST=$(hostname)

n_ok=0 n_unclear=0 n_bad=0 n_skip=0
verdict() { # verdict OK|UNCLEAR|BAD|SKIP ID TEXT
  case $1 in
    OK) n_ok=$((n_ok + 1)) ;;
    UNCLEAR) n_unclear=$((n_unclear + 1)) ;;
    BAD) n_bad=$((n_bad + 1)) ;;
    *) n_skip=$((n_skip + 1)) ;;
  esac
  printf '%-7s %-4s %s\n' "$1" "$2" "$3"
}
# first_err FILE: its first error line, shortened (names of '€' as 'E').
first_err() { grep -a -m1 -E 'error|FAILED' "$1" | sed 's/€/E/g' | cut -c1-230; }
# R CMD...: run CMD; $rc its exit code, $msg its first error line.
R() {
  "$@" >out.log 2>err.log
  rc=$?
  msg=$(first_err err.log)
}
# judge ID ELSE WHAT COND: OK when the shell condition COND holds, else
# ELSE (UNCLEAR or BAD). The line shows $rc, $msg and $note.
judge() {
  local id=$1 els=$2 what=$3 cond=$4
  local obs="exit $rc${msg:+: $msg}${note:+ [$note]}"
  if eval "$cond"; then verdict OK "$id" "$what -> $obs"; else verdict "$els" "$id" "$what -> $obs"; fi
  note=
}
note=
same() { cmp -s "$1" "$2"; }
vrc() { "$NTKD" verify "$1" >/dev/null 2>&1; echo $?; }
export_same() { # export_same STORE REF: exit 0 and byte-identical to REF
  rm -f ex.npy
  "$NTKD" export "$1" ex.npy >/dev/null 2>&1 && cmp -s ex.npy "$2"
}

$PY - <<'PYEOF'
import numpy as np
r = np.random.default_rng(25)
np.save('x.npy', r.standard_normal((400, 16)).astype(np.float32))
np.save('lab.npy', r.integers(0, 3, 400).astype(np.int64))
np.save('kx.npy', r.standard_normal((2000, 16)).astype(np.float32))
np.save('tx.npy', r.standard_normal((6000, 64)).astype(np.float32))
np.save('ty.npy', r.integers(0, 10, 6000).astype(np.int64))
np.save('vx.npy', r.standard_normal((100, 64)).astype(np.float32))
np.save('vy.npy', r.integers(0, 10, 100).astype(np.int64))
x = np.load('x.npy')[:60].copy(); x[5] = 0; np.save('xz.npy', x)   # a sample of zeros
y = np.load('lab.npy')
for name, at, v in (('lab5', 7, 5), ('labneg', 7, -1), ('labbig', 7, 65536), ('labmax', 7, 65535)):
    z = y.copy(); z[at] = v; np.save(name + '.npy', z)
np.save('lab2d.npy', y.reshape(-1, 1))
np.save('labi32.npy', np.where(np.arange(400) == 9, 2**31 - 1, y).astype(np.int32))
PYEOF
for f in x vx; do cp $f.npy $f.keep; done

# Index forgeries (docs/STORE-FORMAT.md, "The index"): forge.py CMD STORE [OTHER].
cat > forge.py <<'PYEOF'
import struct, sys, xxhash
def seal(e):
    e = bytearray(e); e[56:64] = xxhash.xxh3_64_intdigest(bytes(e[:56])).to_bytes(8, 'little'); return bytes(e)
def rd(name):
    b = open(name + '.index', 'rb').read(); return b[:64], [b[i:i + 64] for i in range(64, len(b) // 64 * 64, 64)]
def wr(name, h, lines): open(name + '.index', 'wb').write(h + b''.join(lines))
def fields(e): return (struct.unpack_from('<I', e, 0)[0],) + struct.unpack_from('<QQQQQ', e, 8)
def ent(t, off, n, seq):
    e = bytearray(64); struct.pack_into('<I', e, 0, 1); struct.pack_into('<QQQQ', e, 8, t, off, n, seq); return seal(e)
def mark(c):
    e = bytearray(64); struct.pack_into('<I', e, 0, 2); struct.pack_into('<Q', e, 40, c); return seal(e)
cmd, name = sys.argv[1], sys.argv[2]
h, L = rd(name)
E = [fields(e) for e in L]
tiles = [x for x in E if x[0] == 1]
cov = [x[5] for x in E if x[0] == 2][-1]
head = open(name, 'rb').read(4096)
A, first = struct.unpack_from('<I', head, 44)[0], struct.unpack_from('<Q', head, 136)[0]
below = sorted([x for x in tiles if x[2] < cov], key=lambda x: x[2])
if cmd == 'swap':        # two entries of equal length trade tile numbers (not the last below the mark)
    a, b = below[1], below[2]
    assert a[3] == b[3], (a, b)
    out = [ent(b[1], a[2], a[3], a[4]) if x == a else ent(a[1], b[2], b[3], b[4]) if x == b else ent(*x[1:5]) for x in tiles]
    wr(name, h, out + [mark(cov)])
elif cmd == 'dup':       # one entry listed twice
    wr(name, h, [ent(*x[1:5]) for x in tiles] + [ent(*tiles[3][1:5]), mark(cov)])
elif cmd == 'marks':     # a sync mark after every entry, at its record's end
    out = []
    for x in sorted(tiles, key=lambda x: x[2]):
        out += [ent(*x[1:5]), mark(x[2] + (128 + x[3] + A - 1) // A * A)]
    wr(name, h, out)
elif cmd == 'back':      # a last mark that moves `covered` back to the first record
    wr(name, h, [ent(*x[1:5]) for x in tiles] + [mark(cov), mark(first)])
elif cmd == 'dupbeyond': # the mark half-way, the entries past it listed twice
    s = sorted(tiles, key=lambda x: x[2]); k = len(s) // 2
    wr(name, h, [ent(*x[1:5]) for x in s] + [ent(*x[1:5]) for x in s[k:]] + [mark(s[k][2])])
elif cmd == 'foreign':   # another store's index, its header resealed with this store's id
    oh, ol = rd(sys.argv[3])
    nh = bytearray(oh); nh[16:32] = h[16:32]; wr(name, seal(nh), ol)
elif cmd == 'sequp':     # an entry's sequence number raised
    a = below[1]
    wr(name, h, [ent(x[1], x[2], x[3], x[4] + 1000) if x == a else ent(*x[1:5]) for x in tiles] + [mark(cov)])
PYEOF
# Snapshot forgeries: sforge.py SRC DST OFFSET:KIND:VALUE... (u64, f64;
# grow:N appends N zero bytes), both checksums resealed (docs/TRAINING.md).
cat > sforge.py <<'PYEOF'
import struct, sys, xxhash
src, dst = sys.argv[1], sys.argv[2]
b = bytearray(open(src, 'rb').read())
for spec in sys.argv[3:]:
    at, kind, val = spec.split(':'); at = int(at)
    if kind == 'grow': b += bytes(int(val)); continue
    struct.pack_into({'u64': '<Q', 'f64': '<d'}[kind], b, at, int(val) if kind == 'u64' else float(val))
n = struct.unpack_from('<Q', b, 232)[0]
sums = b''.join(xxhash.xxh3_64_intdigest(bytes(b[512 + 4 * n * i: 512 + 4 * n * (i + 1)])).to_bytes(8, 'little') for i in range(3))
b[496:504] = xxhash.xxh3_64_intdigest(sums).to_bytes(8, 'little')
b[504:512] = xxhash.xxh3_64_intdigest(bytes(b[:504])).to_bytes(8, 'little')
open(dst, 'wb').write(b)
PYEOF
flip() { $PY -c "
import sys; f = open(sys.argv[1], 'r+b'); o = int(sys.argv[2]); f.seek(o); b = f.read(1); f.seek(o); f.write(bytes([b[0] ^ 0x10]))" "$1" "$2"; }
first_record() { "$NTKD" info --records "$1" 2>/dev/null | sed -n 's/^record: *[0-9]* \([0-9]*\)$/\1/p' | head -1; }

# job NAME STORE ARCH TILE [lines...]: a kernel job on x.npy (NNGP).
job() {
  local name=$1 store=$2 arch=$3 tile=$4; shift 4
  {
    printf '[data]\npath = x.npy\n[model]\narch = %s\nkernel = nngp\n' "$arch"
    printf '[compute]\ntile = %s\n[output]\npath = %s\nprogress = 1000\n' "$tile" "$store"
    for l in "$@"; do printf '%s\n' "$l"; done
  } > "$name.conf"
}
# tjob NAME LAYERS BATCH EPOCHS [lines...]: a training job, snapshot NAME.snap, log NAME.jsonl.
tjob() {
  local name=$1 layers=$2 batch=$3 epochs=$4; shift 4
  {
    printf '[data]\npath = tx.npy\nlabels = ty.npy\n[validation]\npath = vx.npy\nlabels = vy.npy\n'
    printf '[train]\nlayers = %s\nbatch = %s\nepochs = %s\nsnapshot = %s.snap\nlog = %s.jsonl\n' "$layers" "$batch" "$epochs" "$name" "$name"
    for l in "$@"; do printf '%s\n' "$l"; done
  } > "$name.conf"
}

# A job of ~3 s on one core (36 tiles), so that an attack can catch it
# running: the depth from this machine's time for 400 layers.
job cal cal.ntk "[Dense Erf]*400 Dense" 50
"$NTKD" cal.conf >/dev/null 2>cal.log
DEPTH=$($PY -c "
import re
m = re.search(r'tiles ([0-9.]+) s', open('cal.log').read())
print(max(200, min(20000, int(400 * 3.0 / max(float(m.group(1)) if m else 1.0, 0.01)))))")
echo "    calibration: $(sed -n 's/.*\(tiles [0-9.]* s\)$/\1/p' cal.log) for 400 layers: $DEPTH layers below"
job slow st.ntk "[Dense Erf]*$DEPTH Dense" 50
"$NTKD" slow.conf >/dev/null 2>&1 && "$NTKD" export st.ntk clean.npy >/dev/null 2>&1
[ -s clean.npy ] || { echo "attack25: the reference run failed"; exit 2; }
cp st.ntk clean.ntk
cp st.ntk.index clean.ntk.index

# hold [hb]: start slow.conf on a fresh st.ntk (hb: a heartbeat of 1 s),
# wait until it has stored tiles, and stop it (it keeps its locks).
# release: let it go on and wait for it; $ra is its exit code.
hold() {
  rm -rf st.ntk st.ntk.index st.ntk.lock
  if [ "${1:-}" = hb ]; then NTKD_TEST_LOCK_HEARTBEAT=1 "$NTKD" "${HOLD_CONF:-slow.conf}" >a.log 2>&1 &
  else "$NTKD" "${HOLD_CONF:-slow.conf}" >a.log 2>&1 &
  fi
  pa=$!
  wait_tiles st.ntk 3 >/dev/null
  stop_procs $pa
}
release() {
  kill -CONT $pa
  wait $pa
  ra=$?
}
said_done() { grep -q '^ntkd: done' a.log; }

# ============================================================================
# L. One writer: every alias of a held store, lock files replaced
# ============================================================================
hold
mkdir -p sub && ln -sfn . selfdir && ln -sfn st.ntk l1.ntk && ln -sfn l1.ntk l2.ntk && ln -sfn l2.ntk l3.ntk
sum=$(md5sum < st.ntk)
# second PATH: a second job whose [output] path is PATH
second() { sed "s|^path = st.ntk$|path = $1|" slow.conf > b.conf; R "$NTKD" b.conf; }
second "./sub/../st.ntk"
judge L01 BAD "second job through a '..' path" '[ $rc = 7 ]'
second "selfdir/st.ntk"
judge L02 BAD "second job through a symbolically linked folder" '[ $rc = 7 ]'
exec 9<st.ntk
second "/proc/self/fd/9"
judge L03 BAD "second job through /proc/self/fd/9 (an open descriptor of the store)" '[ $rc = 7 ]'
second "/dev/fd/9"
judge L04 BAD "second job through /dev/fd/9" '[ $rc = 7 ]'
exec 9<&-
second ".//st.ntk"
judge L05 BAD "second job through './/st.ntk'" '[ $rc = 7 ]'
second "$W/st.ntk"
judge L06 BAD "second job through the absolute path" '[ $rc = 7 ]'
second "l3.ntk"
judge L07 BAD "second job through a chain of three symbolic links" '[ $rc = 7 ]'
mkdir -p bm
if unshare -m true 2>/dev/null; then
  sed "s|^path = st.ntk$|path = bm/st.ntk|" slow.conf > b.conf
  unshare -m bash -c "mount --bind '$W' bm && '$NTKD' b.conf" >out.log 2>err.log
  rc=$?; msg=$(first_err err.log)
  judge L08 BAD "second job through a bind mount of the folder (mount --bind)" '[ $rc = 7 ]'
else
  verdict SKIP L08 "second job through a bind mount: unshare -m not allowed here"
fi
second "st.ntk/"
note="wanted 2 (a usage error), naming [output] path, not 'st.ntk/.lock'"
judge L09 UNCLEAR "second job with a trailing slash ('st.ntk/')" '[ $rc = 2 ]'
sed "s|^path = st.ntk$|path = ST.ntk|" slow.conf > b.conf
R "$NTKD" b.conf
note="another file on a case-sensitive file system"
judge L10 BAD "a job on 'ST.ntk' (another case) while st.ntk is held" '[ $rc = 0 ] && [ "$(md5sum < st.ntk)" = "$sum" ] && [ "$(vrc ST.ntk)" = 0 ]'
rm -f ST.ntk*
# The lock file replaced by a stale lock of another host (its inode is then
# nobody's): the second job takes that file, and the store's own lock stops it.
mv st.ntk.lock moved.lock
printf 'ntkd writer lock of st.ntk\nhost=other-%s\npid=77\nstarted=2026-01-01 00:00:00 +0000\n' "$HOST" > st.ntk.lock
touch -d '-300 sec' st.ntk.lock
R "$NTKD" slow.conf
judge L11 BAD "lock file replaced by a stale one of another host: a second job" '[ $rc = 7 ] && [ "$(md5sum < st.ntk)" = "$sum" ]'
release
rc=$ra msg=$(first_err a.log)
rm -f moved.lock
judge L12 BAD "... and the first job finishes, byte-identical" '[ $ra = 0 ] && export_same st.ntk clean.npy'
rm -rf sub selfdir l1.ntk l2.ntk l3.ntk bm

rm -f st.ntk*
rm -rf newdir0
sed "s|^path = st.ntk$|path = newdir0/|" slow.conf > b.conf
R "$NTKD" b.conf
note="a folder created: $( [ -d newdir0 ] && echo yes || echo no)"
judge L13 UNCLEAR "[output] path = 'newdir0/' (a folder name that does not exist)" '[ $rc = 2 ] && [ ! -e newdir0 ]'
rm -rf newdir0

# Lock files that are hard links: opened and truncated to write the holder?
job small sm.ntk "Dense Relu Dense" 50
rm -f sm.ntk*
ln x.npy sm.ntk.lock
R "$NTKD" small.conf
note="x.npy $(same x.npy x.keep && echo intact || echo 'OVERWRITTEN with the lock text')"
judge L14 BAD "lock file is a hard link to the job's data (x.npy) before the job starts" 'same x.npy x.keep'
rm -f sm.ntk.lock sm.ntk sm.ntk.index; cp x.keep x.npy
cp clean.ntk other.ntk
cp other.ntk other.keep
ln other.ntk sm.ntk.lock
R "$NTKD" small.conf
note="other.ntk $(same other.ntk other.keep && echo intact || echo 'OVERWRITTEN')"
judge L15 BAD "lock file is a hard link to another store before the job starts" 'same other.ntk other.keep'
rm -f sm.ntk*
printf 'my notes, not a lock\n' > sm.ntk.lock
R "$NTKD" small.conf
note="the user's sm.ntk.lock: $( [ -e sm.ntk.lock ] && (grep -q 'my notes' sm.ntk.lock && echo kept || echo rewritten) || echo removed)"
judge L16 UNCLEAR "a user's file named sm.ntk.lock (not a lock) before the job starts" 'grep -q "my notes" sm.ntk.lock 2>/dev/null || [ $rc = 2 ]'
rm -f sm.ntk*

# During a run, heartbeat 1 s: the lock file replaced by ...
hold hb
rm -f st.ntk.lock; ln x.npy st.ntk.lock
release
rc=$ra msg=
note="x.npy $(same x.npy x.keep && echo intact || echo 'OVERWRITTEN with the lock text')"
judge L17 BAD "lock file replaced by a hard link to the data while the job runs (heartbeat)" 'same x.npy x.keep'
cp x.keep x.npy; rm -f st.ntk.lock
printf 'keep me\n' > precious.txt
hold hb
rm -f st.ntk.lock; ln -s "$W/precious.txt" st.ntk.lock
release
rc=$ra msg=
judge L18 BAD "... by a symbolic link to a precious file" '[ $ra = 0 ] && grep -q "keep me" precious.txt'
rm -f st.ntk.lock
hold hb
rm -f st.ntk.lock; mkfifo st.ntk.lock
release
rc=$ra msg=
judge L19 BAD "... by a FIFO (no hang, job ends 0)" '[ $ra = 0 ]'
rm -f st.ntk.lock
hold hb
rm -f st.ntk.lock; mkdir st.ntk.lock
release
R timeout 60 "$NTKD" slow.conf
judge L20 BAD "... by a folder: the job ends 0, the next run refuses with 2" '[ $ra = 0 ] && [ $rc = 2 ]'
rmdir st.ntk.lock

rm -f st.ntk*
printf 'ntkd writer lock of st.ntk\nhost=other-%s\npid=77\nstarted=2026-01-01 00:00:00 +0000\n' "$HOST" > sm.ntk.lock
touch -d '+1 hour' sm.ntk.lock
R "$NTKD" small.conf
note="wanted no negative age; a live lock is never taken over, so the store waits"
judge L21 UNCLEAR "a lock file of another host touched in the future (clock skew): 7, saying the clocks disagree" '[ $rc = 7 ] && grep -q "clocks disagree" err.log'
touch -d '-200 sec' sm.ntk.lock
R "$NTKD" small.conf
judge L22 BAD "a lock file of another host untouched for 200 s is taken over" '[ $rc = 0 ] && [ ! -e sm.ntk.lock ]'
rm -f sm.ntk*
cp clean.ntk fifo.lock.ntk
mkfifo fifo.lock.ntk.lock
R timeout 20 "$NTKD" info fifo.lock.ntk
judge L23 BAD "info on a store whose lock file is a FIFO (no hang)" '[ $rc = 0 ]'
rm -f fifo.lock.ntk*
rm -f sm.ntk*
$PY -c "import socket; s = socket.socket(socket.AF_UNIX); s.bind('sm.ntk.lock')"
R timeout 20 "$NTKD" small.conf
judge L24 BAD "a lock file that is a socket before the job starts" '[ $rc = 2 ] && [ -S sm.ntk.lock ] && [ ! -e sm.ntk ]'
rm -f sm.ntk*

# Training: the snapshot has no lock of its own beside its lock file.
tjob tr "64 512 512 10" 50 10
rm -f tr.snap* tr.jsonl
"$NTKD" tr.conf >ta.log 2>&1 &
pt=$!
wait_file tr.jsonl $pt >/dev/null
while [ ! -s tr.jsonl ] && kill -0 $pt 2>/dev/null; do sleep 0.02; done
stop_procs $pt
rm -f tr.snap.lock
R "$NTKD" tr.conf
kill -CONT $pt; wait $pt
note="both trained the same snapshot and log"
judge L25 BAD "a second training job while the first's lock file is removed (wanted 7)" '[ $rc = 7 ]'
rm -f tr.snap* tr.jsonl
NTKD_TEST_LOCK_HEARTBEAT=1 "$NTKD" tr.conf >ta.log 2>&1 &
pt=$!
while [ ! -s tr.jsonl ] && kill -0 $pt 2>/dev/null; do sleep 0.02; done
stop_procs $pt
rm -f tr.snap.lock; ln vx.npy tr.snap.lock
kill -CONT $pt; wait $pt; rc=$?; msg=
note="vx.npy $(same vx.npy vx.keep && echo intact || echo 'OVERWRITTEN with the lock text')"
judge L26 BAD "training: lock file replaced by a hard link to the validation data (heartbeat)" 'same vx.npy vx.keep'
cp vx.keep vx.npy; rm -f tr.snap* tr.jsonl

echo "    ... ${SECONDS}s"
# ============================================================================
# M. The store and its index changed under a running job (by hand)
# ============================================================================
hold
off=$(first_record st.ntk)
flip st.ntk $((off + 200))
release
rc=$ra msg=$(first_err a.log)
v=$(vrc st.ntk)
note="said done: $(said_done && echo yes || echo no); verify $v"
rm -f ex.npy; "$NTKD" export st.ntk ex.npy >/dev/null 2>&1; xr=$?
# The final check reads record headers only (issue 25: "cheaply"); a
# payload damaged by another program after ntkd wrote it is found by
# verify and refused by export (RELIABILITY.md says so).
judge M01 BAD "a payload byte of a record it wrote flipped while it runs (wanted 4, or verify 4 and export refusing)" '[ $ra = 4 ] || { [ $v = 4 ] && [ $xr = 4 ]; }'
hold
flip st.ntk $((4096 + 20))
release
rc=$ra msg=$(first_err a.log)
note="said done: $(said_done && echo yes || echo no); verify $(vrc st.ntk)"
judge M02 BAD "header copy B damaged while it runs (wanted 4)" '[ $ra = 4 ] || [ "$(vrc st.ntk)" = 0 ]'
hold
flip st.ntk $((8192 + 10))
release
rc=$ra msg=$(first_err a.log)
note="said done: $(said_done && echo yes || echo no); verify $(vrc st.ntk)"
judge M03 BAD "the job text damaged while it runs (wanted 4)" '[ $ra = 4 ] || [ "$(vrc st.ntk)" = 0 ]'
hold
head -c 3000000 /dev/urandom >> st.ntk
release
rc=$ra msg=$(first_err a.log)
note="said done: $(said_done && echo yes || echo no); verify $(vrc st.ntk)"
judge M04 UNCLEAR "3 MB of garbage appended while it runs (done over a store verify fails?)" '[ $ra = 4 ] || [ "$(vrc st.ntk)" = 0 ]'
hold
truncate -s 30000 st.ntk
release
rc=$ra msg=$(first_err a.log)
R "$NTKD" slow.conf
judge M05 BAD "truncated to 30000 bytes while it runs: 4, the rerun repairs" '[ $ra = 4 ] && [ $rc = 0 ] && export_same st.ntk clean.npy'
hold
mv st.ntk moved.ntk
release
rc=$ra msg=$(first_err a.log)
judge M06 BAD "renamed away while it runs" '[ $ra = 4 ] && ! said_done'
rm -f moved.ntk
hold
cp st.ntk copy.ntk && mv copy.ntk st.ntk
release
rc=$ra msg=$(first_err a.log)
judge M07 BAD "replaced by a byte copy of itself while it runs" '[ $ra = 4 ] && ! said_done'
hold
rm -f st.ntk.index
release
rc=$ra msg=$(first_err a.log)
R "$NTKD" slow.conf
note="the rerun: $(grep -o '[0-9]* of [0-9]* tiles to compute' err.log)"
judge M08 BAD "its index removed while it runs: 4, the rerun rebuilds it, nothing recomputed" '[ $ra = 4 ] && [ $rc = 0 ] && grep -q "^ntkd: 0 of" err.log && export_same st.ntk clean.npy'
sed 's/^progress = 1000$/progress = 1000\nsync = 0/' slow.conf > slow0.conf # an index line after every tile
HOLD_CONF=slow0.conf hold
cp st.ntk.index early.index
kill -CONT $pa # until its next sync has appended to the index
while cmp -s early.index st.ntk.index && kill -0 $pa 2>/dev/null; do sleep 0.005; done
if kill -0 $pa 2>/dev/null && stop_procs $pa; then
  cp early.index st.ntk.index
  release
  rc=$ra msg=$(first_err a.log)
  judge M09 BAD "its index put back to an earlier copy of itself while it runs" '[ $ra = 4 ]'
else
  wait $pa
  verdict SKIP M09 "its index put back to an earlier copy: the job ended before its next sync"
fi
rm -f early.index

echo "    ... ${SECONDS}s"
# ============================================================================
# K. Kills: during a resume that rebuilds the index, and at the final check
# ============================================================================
printf '[data]\npath = kx.npy\n[model]\narch = [Dense Erf]*30 Dense\nkernel = nngp\n[compute]\ntile = 25\n[output]\npath = k.ntk\nprogress = 1000\n' > k.conf
rm -f k.ntk*
"$NTKD" k.conf >/dev/null 2>&1 && "$NTKD" export k.ntk kclean.npy >/dev/null 2>&1
rm -f k.ntk*
"$NTKD" k.conf >k.log 2>&1 &
pk=$!
wait_tiles k.ntk 1200 >/dev/null
kill -USR1 $pk; wait $pk
cp k.ntk k.half # a store stopped a third of the way
for sig in KILL TERM; do
  bad_after=0 odd_exit=0 kills=""
  for trial in 1 2 3 4 5 6; do
    cp k.half k.ntk
    rm -f k.ntk.index # the resume scans every record and writes a fresh index
    "$NTKD" k.conf >k.log 2>&1 &
    pk=$!
    sleep "0.$(printf '%03d' $((RANDOM % 400)))"
    kill -$sig $pk 2>/dev/null
    { wait $pk; } 2>/dev/null; r=$?
    kills="$kills $r"
    [ "$sig" = TERM ] && [ $r != 0 ] && [ $r != 5 ] && [ $r != 143 ] && odd_exit=$((odd_exit + 1))
    v=$(vrc k.ntk); [ "$v" = 4 ] && bad_after=$((bad_after + 1))
  done
  R "$NTKD" k.conf
  note="exits:$kills; verify 4 after $bad_after of them"
  judge K0$([ $sig = KILL ] && echo 1 || echo 2) BAD "SIG$sig at 6 random moments of a resume (a third done) that rebuilds the index; then a rerun" \
    '[ $bad_after = 0 ] && [ $odd_exit = 0 ] && [ $rc = 0 ] && export_same k.ntk kclean.npy'
done
# Rank 0 of mpirun -np 3 SIGKILLed once every tile is in: at the final check or just after.
job mp mp.ntk "[Dense Erf]*$((DEPTH / 8 + 20)) Dense" 50
rm -f mp.ntk*
"$NTKD" mp.conf >/dev/null 2>&1 && "$NTKD" export mp.ntk mpclean.npy >/dev/null 2>&1
bad_after=0 wrong=0
for trial in 1 2 3; do
  rm -f mp.ntk*
  mpirun -np 3 "$NTKD" mp.conf >mp.log 2>&1 &
  pm=$!
  wait_tiles mp.ntk 36 60 >/dev/null
  sleep "0.0$((RANDOM % 5))"
  kill -KILL $(rank_pids "$NTKD mp.conf" 0 2>/dev/null) 2>/dev/null
  { wait $pm; } 2>/dev/null
  [ "$(vrc mp.ntk)" = 4 ] && bad_after=$((bad_after + 1))
  "$NTKD" mp.conf >/dev/null 2>&1 && export_same mp.ntk mpclean.npy || wrong=$((wrong + 1))
done
rc=$wrong msg=
note="verify 4 after $bad_after kills; $wrong reruns not byte-identical"
judge K03 BAD "SIGKILL of rank 0 (mpirun -np 3) at the final check, 3 times, each rerun" '[ $bad_after = 0 ] && [ $wrong = 0 ]'

echo "    ... ${SECONDS}s"
# ============================================================================
# E. Outputs: exports and job outputs to odd places
# ============================================================================
cp clean.ntk ex.ntk
cp clean.ntk.index ex.ntk.index
"$NTKD" export ex.ntk /dev/stdout 2>err.log | cat > piped.bin
rc=${PIPESTATUS[0]} msg=$(first_err err.log)
judge E01 BAD "export to /dev/stdout, stdout a pipe" '[ $rc = 2 ] || { [ $rc = 0 ] && [ -s piped.bin ]; }'
ln -sfn /proc/self/fd/1 mystdout
"$NTKD" export ex.ntk mystdout >captured.bin 2>err.log
rc=$? msg=$(first_err err.log)
note="captured $(stat -c %s captured.bin) bytes; mystdout $( [ -L mystdout ] && echo 'still a link' || echo 'REPLACED by a regular file')"
judge E02 BAD "export to a symbolic link to /proc/self/fd/1 (what /dev/stdout is), stdout a file" '[ $rc != 0 ] && [ -L mystdout ] || [ -s captured.bin ]'
rm -f mystdout captured.bin
if unshare -m true 2>/dev/null; then
  unshare -m bash -c "mkdir -p '$W/odev' && mount --bind /dev '$W/odev' && mount -t tmpfs none /dev &&
    touch /dev/null && mount --bind '$W/odev/null' /dev/null && ln -s /proc/self/fd /dev/fd &&
    ln -s /proc/self/fd/1 /dev/stdout && ln -s /proc/self/fd/2 /dev/stderr &&
    '$NTKD' export ex.ntk /dev/stdout > cap2.bin 2>err.log; echo \$? > rc.txt
    [ -L /dev/stdout ] && echo link > dev.txt || echo replaced > dev.txt"
  rc=$(cat rc.txt) msg=$(first_err err.log)
  note="captured $(stat -c %s cap2.bin) bytes; /dev/stdout $(cat dev.txt) (in a private /dev)"
  judge E03 BAD "export to /dev/stdout, stdout a file (a tmpfs /dev in a private mount namespace)" '[ "$(cat dev.txt)" = link ] && { [ $rc != 0 ] || [ -s cap2.bin ]; }'
  rm -rf cap2.bin rc.txt dev.txt odev
else
  verdict SKIP E03 "export to /dev/stdout with a private /dev: unshare -m not allowed here"
fi
printf 'old\n' > target.npy
ln -sfn target.npy link.npy
R "$NTKD" export ex.ntk link.npy
note="link.npy $( [ -L link.npy ] && echo 'still a link' || echo 'replaced by a file'); target.npy $(grep -q old target.npy && echo 'untouched' || echo written)"
judge E04 UNCLEAR "export to a symbolic link to a regular file (docs say nothing; the store's own links are followed)" '[ $rc != 0 ] || [ -L link.npy ]'
rm -f link.npy target.npy
ln -sfn ex.ntk exlink.npy
R "$NTKD" export ex.ntk exlink.npy
judge E05 BAD "export to the store through a symbolic link" '[ $rc = 2 ] && export_same ex.ntk clean.npy'
rm -f exlink.npy
ln ex.ntk.index hard.npy
R "$NTKD" export ex.ntk hard.npy
judge E06 BAD "export to the store's index through a hard link" '[ $rc = 2 ] && [ "$(vrc ex.ntk)" = 0 ]'
rm -f hard.npy
R "$NTKD" export ex.ntk "st.ntk.tmp.other-$HOST.4242"
judge E07 BAD "export to a name of another host's temporary file of a store" '[ $rc = 2 ]'
mkdir -p sub0
R "$NTKD" export ex.ntk "./sub0/../ex.ntk"
judge E08 BAD "export to the store itself by a '..' path" '[ $rc = 2 ] && export_same ex.ntk clean.npy'
cp clean.ntk dmg.ntk
cp clean.ntk.index dmg.ntk.index
dd if=/dev/zero of=dmg.ntk bs=4096 count=1 conv=notrunc 2>/dev/null # header copy A lost; B intact: a rerun repairs
cp dmg.ntk dmg.keep
R "$NTKD" export ex.ntk dmg.ntk
note="dmg.ntk $(same dmg.ntk dmg.keep && echo untouched || echo 'REPLACED by the export')"
judge E09 BAD "export over a store whose header copy A is damaged (copy B intact; a rerun repairs it)" '[ $rc = 2 ] && same dmg.ntk dmg.keep'
cp dmg.keep dmg.ntk
tjob lg "64 8 10" 50 1 "[data]" "count = 300"
sed -i 's/^log = lg.jsonl$/log = dmg.ntk/' lg.conf
R "$NTKD" lg.conf
note="dmg.ntk $(same dmg.ntk dmg.keep && echo untouched || echo 'OVERWRITTEN by the log')"
judge E10 BAD "[train] log = a store whose header copy A is damaged" '[ $rc = 2 ] && same dmg.ntk dmg.keep'
rm -f lg.snap* dmg.*
R "$NTKD" export ex.ntk ""
note="wanted 2 before any work"
judge E11 UNCLEAR "export to an empty name ''" '[ $rc = 2 ]'
R "$NTKD" export ex.ntk "nodir/"
note="wanted 2 (a folder name)"
judge E12 UNCLEAR "export to 'nodir/' (a folder that does not exist)" '[ $rc = 2 ]'
long=$($PY -c "print('€' * 84)")  # 252 bytes
R "$NTKD" export ex.ntk "$long.npy"
note="wanted 2 before reading the store (256 > NAME_MAX); got it after writing the whole export"
judge E13 UNCLEAR "export to a 256-byte name of 3-byte characters" '[ $rc = 2 ]'
$PY -c "import socket; s = socket.socket(socket.AF_UNIX); s.bind('sock.npy')"
R timeout 20 "$NTKD" export ex.ntk sock.npy
judge E14 BAD "export to a socket" '[ $rc = 2 ] && [ -S sock.npy ]'
sed "s|^path = st.ntk$|path = sock.npy|" slow.conf > b.conf
R timeout 20 "$NTKD" b.conf
judge E15 BAD "[output] path = a socket" '[ $rc = 2 ] && [ -S sock.npy ]'
rm -f sock.npy
ln -sfn ex.ntk.index ixlink
sed "s|^path = st.ntk$|path = ixlink|" slow.conf > b.conf
R "$NTKD" b.conf --overwrite
judge E16 BAD "[output] path = a symbolic link to a store's index, --overwrite" '[ $rc = 2 ] && [ "$(vrc ex.ntk)" = 0 ]'
rm -f ixlink
tjob lf "64 8 10" 50 1 "[data]" "count = 300"
mkfifo lf.jsonl
R timeout 20 "$NTKD" lf.conf
judge E17 BAD "[train] log = a FIFO" '[ $rc = 2 ]'
rm -f lf.jsonl lf.snap*

echo "    ... ${SECONDS}s"
# ============================================================================
# I. Index forgeries (resealed), each: verify, export, rerun
# ============================================================================
job raw raw.ntk "Dense Relu Dense" 50 "level = 0" # raw tiles: every full tile the same length
rm -f raw.ntk*
"$NTKD" raw.conf >/dev/null 2>&1 && "$NTKD" export raw.ntk rawclean.npy >/dev/null 2>&1
cp raw.ntk raw.keep; cp raw.ntk.index rawindex.keep
job oth oth.ntk "Dense Relu Dense" 50 "[model]" "w_std = 1.5"
rm -f oth.ntk*; "$NTKD" oth.conf >/dev/null 2>&1
# iattack ID CMD WANT_VERIFY WHAT: forge, then verify (WANT_VERIFY), export
# (4 if damage, else identical), rerun (0, nothing computed, identical).
iattack() {
  local id=$1 cmd=$2 want=$3 what=$4 v e r
  cp raw.keep raw.ntk; cp rawindex.keep raw.ntk.index
  $PY forge.py "$cmd" raw.ntk oth.ntk
  "$NTKD" verify raw.ntk >iv.log 2>&1; v=$?
  rm -f ex.npy; "$NTKD" export raw.ntk ex.npy >ie.log 2>&1; e=$?
  R "$NTKD" raw.conf; r=$rc
  msg=$(grep -a -m1 'index' iv.log | cut -c1-200)
  rc=$v
  note="export $e; rerun $r, $(grep -o '[0-9]* of [0-9]* tiles to compute' err.log)"
  local ok_export='[ $e = 4 ]'
  [ "$want" = 0 ] && ok_export='[ $e = 0 ] && same ex.npy rawclean.npy'
  judge "$id" BAD "$what" "[ \$v = $want ] && $ok_export && [ \$r = 0 ] && grep -q '^ntkd: 0 of' err.log && export_same raw.ntk rawclean.npy"
}
iattack I01 dup 4 "index: one entry listed twice"
iattack I02 swap 4 "index: two entries of equal length trade tile numbers (every byte still covered)"
iattack I03 marks 0 "index: a sync mark after every entry (a true index)"
iattack I04 back 0 "index: a last mark that moves 'covered' back to the first record (a true, weaker claim)"
iattack I05 dupbeyond 0 "index: the entries past the mark listed twice (a true claim)"
iattack I06 foreign 4 "index: another store's (same shape, w_std 1.5), resealed with this store's id"
iattack I07 sequp 4 "index: an entry's sequence number raised"
# The Python reader on the same forgeries agrees with ntkd verify.
pyv() { $PY -c "
import sys, ntkd_store
try:
    ntkd_store.open(sys.argv[1]).verify(); print(0)
except ntkd_store.DamagedStoreError: print(4)
except ntkd_store.StoreError: print(2)" "$1" 2>/dev/null; }
disagree=""
for c in dup swap marks back dupbeyond foreign sequp; do
  cp raw.keep raw.ntk; cp rawindex.keep raw.ntk.index
  $PY forge.py "$c" raw.ntk oth.ntk
  [ "$(pyv raw.ntk)" = "$(vrc raw.ntk)" ] || disagree="$disagree $c"
done
rc=0 msg= note="disagree on:${disagree:- none}"
judge I08 BAD "the Python reader's verify on the seven forgeries agrees with ntkd verify" '[ -z "$disagree" ]'
cp raw.keep raw.ntk; rm -f raw.ntk.index; mkfifo raw.ntk.index
R timeout 20 "$NTKD" verify raw.ntk
v=$rc
vsaid=$(grep -c "remove it: the next run refuses the job while it is there" out.log)
R timeout 60 "$NTKD" raw.conf
note="verify $v"
judge I09 BAD "index is a FIFO: verify does not hang, the rerun replaces it or refuses it with 2, the store kept" '{ [ $v = 0 ] || [ $v = 2 ]; } && { { [ $rc = 0 ] && [ -f raw.ntk.index ] && [ "$(vrc raw.ntk)" = 0 ]; } || { [ $rc = 2 ] && [ -p raw.ntk.index ] && cmp -s raw.ntk raw.keep; }; }'
note="verify said it: $vsaid"
judge I09b BAD "... verify and the run both say to remove it (verify said the run rebuilds it, the run refused)" '[ "$vsaid" = 1 ] && grep -q "remove it: ntkd keeps the store.s index at that name" err.log'
rm -f raw.ntk.index; mkdir raw.ntk.index
R timeout 60 "$NTKD" raw.conf
note="wanted 2 naming the folder (not an I/O failure), or the folder left and the job done"
judge I10 UNCLEAR "index is a folder: the rerun" '[ $rc = 2 ] || [ $rc = 0 ]'
rm -rf raw.ntk.index
cp rawindex.keep real.index; ln -sfn real.index raw.ntk.index
R "$NTKD" verify raw.ntk
v=$rc
R "$NTKD" raw.conf
note="verify $v"
judge I11 BAD "index is a symbolic link: not followed, the rerun replaces the link, the target untouched" '[ $v = 0 ] && [ $rc = 0 ] && [ ! -L raw.ntk.index ] && same real.index rawindex.keep'
rm -f real.index

echo "    ... ${SECONDS}s"
# ============================================================================
# S. Training snapshots forged in combinations (checksums resealed)
# ============================================================================
tjob s "64 8 10" 50 2 "[data]" "count = 600"
rm -f s.snap* s.jsonl
"$NTKD" s.conf >/dev/null 2>&1
cp s.snap good.snap; cp s.jsonl good.jsonl
sed -i 's/^epochs = 2$/epochs = 3/' s.conf
# sattack ID WANT WHAT SPECS...: header offsets: sizes 24.., n_train 152,
# batch 160, seed 168, data hash 176, epoch 184, step 192, t 200, loss sum
# 208, hits 216, seconds 224, parameters 232.
sattack() {
  local id=$1 want=$2 what=$3; shift 3
  $PY sforge.py good.snap s.snap "$@"
  cp s.snap s.before; cp good.jsonl s.jsonl
  R "$NTKD" s.conf
  if [ "$want" = 2 ]; then
    judge "$id" BAD "$what" '[ $rc = 2 ] && same s.snap s.before && same s.jsonl good.jsonl'
  else
    judge "$id" BAD "$what" '[ $rc = 0 ]'
  fi
}
sattack S01 2 "snapshot: another seed" 168:u64:7
sattack S02 2 "snapshot: another data hash" 176:u64:1
sattack S03 2 "snapshot: 1200 training samples, t consistent (48)" 152:u64:1200 200:u64:48
sattack S04 2 "snapshot: batch 100, t consistent (12)" 160:u64:100 200:u64:12
sattack S05 2 "snapshot: layers 64 9 10, parameters 685 and the payload to match" 32:u64:9 232:u64:685 0:grow:900
sattack S06 2 "snapshot: 10^6 epochs, t consistent" 184:u64:1000000 200:u64:12000000
sattack S07 0 "snapshot: 11 steps into epoch 3 with every sample a hit (possible): resumed" 192:u64:11 200:u64:35 216:f64:550
$PY sforge.py good.snap s.snap 192:u64:5 200:u64:29 208:f64:1e308 216:f64:90
cp good.jsonl s.jsonl
R "$NTKD" s.conf
note="logged main/loss of epoch 3: $($PY -c "import json; print(json.loads(open('s.jsonl').read().splitlines()[-1])['main/loss'])" 2>/dev/null)"
judge S08 UNCLEAR "snapshot: a partial loss sum of 1e308 (5 float32 steps cannot make it) is resumed" '[ $rc = 2 ]'

echo "    ... ${SECONDS}s"
# ============================================================================
# T. Training constants and rank counts
# ============================================================================
tattack() { # tattack ID WANT WHAT LAYERS BATCH EPOCHS [lines]
  local id=$1 want=$2 what=$3; shift 3
  tjob tc "$@"
  rm -f tc.snap* tc.jsonl
  R "$NTKD" tc.conf
  judge "$id" BAD "$what" "[ \$rc = $want ]"
}
tattack T01 8 "alpha = 3.4e38 (legal, diverges)" "64 8 10" 50 1 "alpha = 3.4e38" "[data]" "count = 600"
check_log=$($PY -c "
import json, math
t = open('tc.jsonl').read() if __import__('os').path.exists('tc.jsonl') else ''
print(all(math.isfinite(v) for l in t.splitlines() for v in json.loads(l).values()))")
rc=0 msg= note="log finite: $check_log"
judge T02 BAD "... its log holds finite numbers only" '[ "$check_log" = True ]'
tattack T03 2 "beta1 = 1" "64 8 10" 50 1 "beta1 = 1"
tattack T04 2 "eps = 0" "64 8 10" 50 1 "eps = 0"
tattack T05 2 "batch 601 > count 600" "64 8 10" 601 1 "[data]" "count = 600"
tattack T06 2 "epochs = 0" "64 8 10" 50 0
tattack T07 2 "a layer of size 0" "64 0 10" 50 1
tattack T08 2 "one class (last size 1)" "64 8 1" 50 1
tjob tc "64 8 10" 1 1 "[data]" "count = 200"
rm -f tc.snap* tc.jsonl
"$NTKD" tc.conf 2>&1 | sed -n 's/.*(checksum \([0-9a-f]*\)).*/\1/p' > one.sum
rm -f tc.snap* tc.jsonl
R mpirun -np 2 "$NTKD" tc.conf
cat out.log err.log | sed -n 's/.*(checksum \([0-9a-f]*\)).*/\1/p' > two.sum
note="checksums $(cat one.sum) / $(cat two.sum)"
judge T09 BAD "batch 1 under mpirun -np 2 (one rank has no sample per step): the same parameters as one rank" '[ $rc = 0 ] && [ -s one.sum ] && same one.sum two.sum'

echo "    ... ${SECONDS}s"
# ============================================================================
# B. Labels and [data] classes at the limits
# ============================================================================
rjob() { # rjob LABELS [classes line]
  printf '[data]\npath = x.npy\nlabels = %s\ncount = 300\n%s\n[test]\npath = x.npy\nlabels = %s\ncount = 100\n' "$1" "${2:-}" "$1" > r.conf
  printf '[model]\narch = Dense Relu Dense\n[output]\npath = r.ntk\n[solve]\nridge = 0.1\n' >> r.conf
  rm -f r.ntk* r-*.npy
}
rjob labneg.npy; R "$NTKD" r.conf
judge B01 BAD "a label -1" '[ $rc = 2 ] && grep -q "label 7 is -1" err.log'
rjob labbig.npy; R "$NTKD" r.conf
judge B02 BAD "a label 65536 (one past the limit)" '[ $rc = 2 ]'
rjob labmax.npy; R "$NTKD" r.conf
judge B03 BAD "a label 65535 among 0..2 (the limit, a stray)" '[ $rc = 2 ] && grep -q "stray" err.log'
rjob labmax.npy "classes = 65536"; R "$NTKD" check r.conf
judge B04 BAD "classes = 65536 (the limit) is accepted by check" '[ $rc = 0 ]'
rjob lab.npy "classes = 65537"; R "$NTKD" check r.conf
judge B05 BAD "classes = 65537" '[ $rc = 2 ]'
rjob lab.npy "classes = 1"; R "$NTKD" check r.conf
judge B06 BAD "classes = 1" '[ $rc = 2 ]'
rjob lab.npy "classes = 2"; R "$NTKD" r.conf
judge B07 BAD "classes = 2 but labels 0..2" '[ $rc = 2 ] && grep -q "outside the classes 0..1" err.log'
rjob lab5.npy; R "$NTKD" r.conf
note="the documented rule: 4 of 6 classes occur, not more than half absent; stderr: $(grep -m1 'labels:' err.log)"
judge B08 UNCLEAR "one stray 5 among labels 0..2 (6 classes, 2 absent)" '[ $rc = 2 ] || grep -q "4 classes in 0..5" err.log'
rjob lab2d.npy; R "$NTKD" r.conf
judge B09 BAD "labels as an (N, 1) array" '[ $rc = 0 ] || [ $rc = 2 ]'
rjob labi32.npy; R "$NTKD" r.conf
judge B10 BAD "an int32 label 2^31-1" '[ $rc = 2 ]'

echo "    ... ${SECONDS}s"
# ============================================================================
# R. arch integers and domains at their boundaries (ntkd check), and at run time
# ============================================================================
rattack() { # rattack ID WANT ARCH
  printf '[data]\npath = x.npy\n[model]\narch = %s\n[output]\npath = z.ntk\n' "$3" > z.conf
  R "$NTKD" check z.conf
  judge "$1" BAD "arch '$3'" "[ \$rc = $2 ]"
}
rattack R01 0 "[Dense]*100000"
rattack R02 2 "[Dense]*100001"
rattack R03 2 "[Dense Relu]*49999 Dense Relu Dense"
rattack R04 2 "[Dense]*99999999999999999999999999"
rattack R05 2 "[Dense]*0x10"
rattack R06 0 "[[[[[[[[[[[[[[[[Dense]]]]]]]]]]]]]]]]"
rattack R07 2 "[[[[[[[[[[[[[[[[[Dense]]]]]]]]]]]]]]]]]"
rattack R08 2 "FanOut(65) parallel(Dense, Dense) FanInSum"
rattack R09 2 "Conv(3, stride=1000001) Flatten Dense"
rattack R10 2 "Dense(2147483648)"
rattack R11 2 "Dense Rbf(gamma=inf)"
rattack R12 2 "Dense LeakyRelu(inf)"
rattack R13 2 "Dense Monomial(2.5)"
# At run time: a zero sample through LayerNorm(eps=0) is 0/0.
printf '[data]\npath = xz.npy\n[model]\narch = Dense LayerNorm(axis=-1, eps=0) Dense\n[compute]\ntile = 30\nprecision = float64\n[output]\npath = z.ntk\n' > z.conf
rm -f z.ntk*
R "$NTKD" z.conf
note="the message blames depth or Gaussian, not LayerNorm's eps = 0 on a sample of zeros"
judge R14 UNCLEAR "LayerNorm(eps=0) after a sample of zeros (0/0)" '[ $rc = 2 ] || { [ $rc = 8 ] && grep -q -i "layernorm\|eps" err.log; }'
printf '[data]\npath = xz.npy\n[model]\narch = Dense Rbf(gamma=1e-320)\nkernel = nngp\n[compute]\ntile = 30\nprecision = float64\n[output]\npath = z.ntk\n' > z.conf
rm -f z.ntk*
R "$NTKD" z.conf
rm -f ex.npy; "$NTKD" export z.ntk ex.npy >/dev/null 2>&1
judge R15 BAD "Rbf(gamma=1e-320) (subnormal): the NNGP is 1 everywhere" "[ \$rc = 0 ] && $PY -c \"import numpy as n, sys; a = n.load('ex.npy'); sys.exit(0 if abs(a - 1).max() < 1e-12 else 1)\""

echo "    ... ${SECONDS}s"
# ============================================================================
# N. Names at the limits, of 3-byte characters
# ============================================================================
e3() { $PY -c "import sys; n = int(sys.argv[1]); s = '€' * (n // 3) + 'a' * (n % 3); print(s)" "$1"; }
for len in 249 250 255; do
  name="$(e3 $((len - 4))).ntk"
  job nm "$name" "Dense Relu Dense" 100
  R "$NTKD" nm.conf
  r1=$rc
  R "$NTKD" nm.conf
  if [ $len = 249 ]; then
    judge N0$((len - 248)) BAD "a store name of $len bytes (3-byte characters): runs and resumes" '[ $r1 = 0 ] && [ $rc = 0 ] && [ "$(vrc "$name")" = 0 ]'
  else
    judge N0$((len == 250 ? 2 : 3)) BAD "a store name of $len bytes (3-byte characters)" '[ $r1 = 2 ] && grep -q "at most 249 bytes" err.log'
  fi
  rm -f ./*€*
done
ln -sfn "$(e3 252).ntk" short.ntk
job nm short.ntk "Dense Relu Dense" 100
R "$NTKD" nm.conf
judge N04 BAD "a short link to a 256-byte name" '[ $rc = 2 ] && grep -q "at most 249 bytes" err.log'
rm -f short.ntk
mkdir -p nreal
ln -sfn nreal/t.ntk "$(e3 255)"
job nm "$(e3 255)" "Dense Relu Dense" 100
R "$NTKD" nm.conf
judge N05 BAD "a 255-byte link to a short name: the index and lock beside the target" '[ $rc = 0 ] && [ -f nreal/t.ntk.index ] && [ "$(vrc nreal/t.ntk)" = 0 ]'
rm -rf nreal ./*€*
for len in 250 251; do
  tjob sn "64 8 10" 50 1 "[data]" "count = 300"
  sed -i "s|^snapshot = sn.snap$|snapshot = $(e3 $((len - 5))).snap|" sn.conf
  R "$NTKD" sn.conf
  judge N0$((len - 244)) BAD "a snapshot name of $len bytes (room for NAME.lock: at most 250)" "[ \$rc = $([ $len = 250 ] && echo 0 || echo 2) ]"
  rm -f ./*€* sn.jsonl
done
if unshare -u true 2>/dev/null; then
  name="$(e3 245).ntk"
  job nm "$name" "Dense Relu Dense" 100
  unshare -u bash -c "hostname h$(printf '%062d' 0) && '$NTKD' nm.conf && '$NTKD' nm.conf" >out.log 2>err.log
  rc=$? msg=$(first_err err.log)
  judge N08 BAD "a 249-byte store name on a host of a 63-byte name (temporary names shortened)" '[ $rc = 0 ] && [ "$(vrc "$name")" = 0 ] && ! ls ./*.tmp.* >/dev/null 2>&1'
  rm -f ./*€*
else
  verdict SKIP N08 "a 63-byte host name: unshare -u not allowed here"
fi

echo "    ... ${SECONDS}s"
# ============================================================================
# D. A full disk (a small tmpfs), at 10 moments of a job; a file-size limit
#    at the index rewrite of a resume
# ============================================================================
if unshare -m true 2>/dev/null; then
  job fd fd.ntk "Dense Relu Dense" 50 "sync = 0" "level = 0"
  rm -f fd.ntk*; "$NTKD" fd.conf >/dev/null 2>&1 && "$NTKD" export fd.ntk fdclean.npy >/dev/null 2>&1
  size=$(stat -c %s fd.ntk)
  rm -f fd.ntk*
  cat > full.sh <<EOF
mkdir -p "$W/t" && mount -t tmpfs -o size=4m tmpfs "$W/t" || exit 99
cp x.npy fd.conf "$W/t/" && cd "$W/t"
for room in 12000 20000 100000 $((size / 2)) $((size - 9000)) $((size)) $((size + 5000)) $((size + 9000)) $((size + 12000)) $((size + 16000)); do
  rm -f fd.ntk* filler
  free=\$(df -B1 --output=avail . | tail -1)
  head -c \$((free - room)) /dev/zero > filler 2>/dev/null
  '$NTKD' fd.conf >f.log 2>&1; r=\$?
  '$NTKD' verify fd.ntk >/dev/null 2>&1; v=\$?
  rm -f filler
  '$NTKD' fd.conf >/dev/null 2>&1; r2=\$?
  rm -f e.npy; '$NTKD' export fd.ntk e.npy >/dev/null 2>&1; cmp -s e.npy '$W/fdclean.npy'; s=\$?
  left=\$(ls | grep -c '\.tmp\.')
  echo "\$room \$r \$v \$r2 \$s \$left"
done
EOF
  unshare -m bash full.sh > full.log 2>&1
  bad=$(awk 'NF == 6 && !(($2 == 0 || $2 == 3) && ($3 == 0 || ($2 == 3 && $3 == 2)) && $4 == 0 && $5 == 0 && $6 == 0)' full.log | head -3 | tr '\n' ';')
  rc=0 msg= note="room/exit/verify/rerun/diff/tmp: $(awk '{printf "%s/%s/%s/%s/%s/%s ", $1,$2,$3,$4,$5,$6}' full.log | cut -c1-300)"
  judge D01 BAD "disk full at 10 moments (tmpfs): exit 0 or 3, never damage, the rerun completes byte-identical" '[ -z "$bad" ] && [ $(grep -c . full.log) = 10 ]'
else
  verdict SKIP D01 "a full tmpfs: unshare -m not allowed here"
fi
cp raw.keep raw.ntk; rm -f raw.ntk.index
(ulimit -f 1; "$NTKD" raw.conf >out.log 2>err.log); rc=$? msg=$(first_err err.log)
v=$(vrc raw.ntk)
note="verify $v afterwards"
judge D02 BAD "a 1 KiB file-size limit at the index rewrite of a resume: 3, no temporary file, the store intact" '[ $rc = 3 ] && [ $v = 0 ] && ! ls raw.ntk*.tmp.* >/dev/null 2>&1 && same raw.ntk raw.keep'

echo "attack25: $n_ok OK, $n_unclear UNCLEAR, $n_bad BAD, $n_skip SKIP ($((n_ok + n_unclear + n_bad)) attacks, ${SECONDS}s)"
[ "$n_bad" = 0 ]
