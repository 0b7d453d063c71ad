#!/usr/bin/env bash
# Training files under attack (issue 25, item 6), on small synthetic data
# (seconds): a snapshot with any header field forged and its checksums
# resealed is refused (exit 2) naming the field, and nothing is touched; a
# snapshot of more epochs than the job asks for is refused; a diverging
# run (alpha = 1e30, beta2 = 0) stops with exit 8 and its log stays JSON
# with finite numbers only; a torn log line is dropped on resume; Adam
# constants outside float32's range are refused at check time.
# Usage: tests/e2e_train_checks.sh path/to/ntkd
set -u
NTKD=$(readlink -f "${1:?usage: e2e_train_checks.sh path/to/ntkd}")
export OPENBLAS_NUM_THREADS=1
source "$(dirname "$(readlink -f "$0")")/e2e_lib.sh"

$PY - <<'PYEOF'
import numpy as np
rng = np.random.default_rng(11)
np.save('x.npy', rng.standard_normal((600, 16)).astype(np.float32))
np.save('y.npy', rng.integers(0, 3, 600).astype(np.int64))
np.save('vx.npy', rng.standard_normal((50, 16)).astype(np.float32))
np.save('vy.npy', rng.integers(0, 3, 50).astype(np.int64))
x = np.load('x.npy')
x[7, 3] = 1e38  # one value float32 holds, its steps do not
np.save('xbig.npy', x)
x = np.load('x.npy')
np.save('xsub.npy', (x * 1e-40).astype(np.float32))  # every value below 1.18e-38
x[5, :3] = 1e-40  # three subnormal values beside normal ones
np.save('xfew.npy', x)
x[5, :3] = 0  # what DAZ reads them as
np.save('xfew0.npy', x)
PYEOF

# tconf NAME EPOCHS [extra [train] lines]: 600 samples in batches of 50
# (12 steps an epoch), layers 16-8-3 (163 parameters), files NAME.snap and
# NAME.jsonl.
tconf() {
  local name=$1 epochs=$2; shift 2
  {
    printf '[data]\npath = x.npy\nlabels = y.npy\n[validation]\npath = vx.npy\nlabels = vy.npy\n'
    printf '[train]\nlayers = 16 8 3\nbatch = 50\nepochs = %s\nsnapshot = %s.snap\nlog = %s.jsonl\n' "$epochs" "$name" "$name"
    for l in "$@"; do printf '%s\n' "$l"; done
  } > "$name.conf"
}
# json_log FILE [EPOCHS...]: every line a whole JSON object of finite
# numbers (NaN and Infinity tokens refused too), with exactly these epochs.
json_log() {
  $PY - "$@" <<'PYEOF'
import json, math, sys
def refuse(c): raise ValueError("not JSON: " + c)
text = open(sys.argv[1]).read()
assert text == "" or text.endswith("\n"), "last line not whole"
recs = [json.loads(l, parse_constant=refuse) for l in text.splitlines()]
for r in recs:
    assert all(isinstance(v, (int, float)) and math.isfinite(v) for v in r.values()), r
want = [int(a) for a in sys.argv[2:]]
assert [r["epoch"] for r in recs] == want, ([r["epoch"] for r in recs], want)
PYEOF
}
# ends_4_over_replacement PID FILE LOG WHAT SAYS: the stopped job PID, whose
# FILE was replaced by hand, is let go: it ends with exit 4, LOG says SAYS,
# and the replacement is as it was.
ends_4_over_replacement() {
  local rc
  cp "$2" "$2.keep"
  kill -CONT "$1"
  wait "$1"
  rc=$?
  check "$4 replaced under its running job: exit 4 (exit $rc)" [ $rc = 4 ]
  check "... saying so" has "$5" "$3"
  check "... the replacement untouched" cmp -s "$2" "$2.keep"
}
# forge SRC DST OFFSET KIND VALUE: copy SRC to DST with 8 bytes at OFFSET
# (u64, f64; or f32 at a payload offset) replaced and both checksums
# resealed (docs/TRAINING.md: XXH3 of the XXH3s of p, m, v at 496, XXH3 of
# bytes 0..503 at 504).
forge() {
  $PY - "$@" <<'PYEOF'
import struct, sys, xxhash
src, dst, at, kind, val = sys.argv[1:]
b = bytearray(open(src, "rb").read()); at = int(at)
fmt = {"u64": "<Q", "f64": "<d", "f32": "<f"}[kind]
struct.pack_into(fmt, b, at, int(val) if kind == "u64" else float(val))
n = struct.unpack_from("<Q", b, 232)[0]
sums = b"".join(xxhash.xxh3_64_intdigest(bytes(b[512 + 4 * n * i: 512 + 4 * n * (i + 1)])).to_bytes(8, "little")
                for i in range(3))
b[496:504] = xxhash.xxh3_64_intdigest(sums).to_bytes(8, "little")
b[504:512] = xxhash.xxh3_64_intdigest(bytes(b[:504])).to_bytes(8, "little")
open(dst, "wb").write(b)
PYEOF
}

# --- a snapshot of 2 epochs (t = 24) to forge ---------------------------------
tconf good 2
expect_rc 0 "a 2-epoch run" "$NTKD" good.conf
check "... its log: epochs 1, 2" json_log good.jsonl 1 2

# Each field out of range or inconsistent, checksums resealed; the job asks
# for 3 epochs. Offsets from docs/TRAINING.md.
while IFS='|' read -r at kind val says; do
  tconf f 3
  forge good.snap f.snap "$at" "$kind" "$val"
  cp f.snap f.before
  cp good.jsonl f.jsonl
  expect_rc 2 "forged: offset $at = $val refused" "$NTKD" f.conf
  check "... naming it: $says" has "$says" err.log
  check "... saying how to start over" has "use --overwrite to start over" err.log
  check "... snapshot and log untouched" bash -c "cmp -s f.snap f.before && cmp -s f.jsonl good.jsonl"
done <<'EOF'
192|u64|999999999|steps of the next epoch done = 999999999, but 600 samples in batches of 50 make 12 steps per epoch: expected 0..11
192|u64|12|steps of the next epoch done = 12
200|u64|18446744073709551615|Adam's t = 18446744073709551615, but 2 epochs of 12 steps and 0 steps more make 24
200|u64|25|Adam's t = 25
184|u64|999999999|epochs finished = 999999999
184|u64|3|Adam's t = 24, but 3 epochs of 12 steps
16|u64|4|layer size 4 = 0
32|u64|9|number of parameters = 163, but its layer sizes make 183
48|u64|7|layer size 4 = 7, past the 3 sizes
232|u64|164|number of parameters = 164
160|u64|0|batch = 0
208|f64|1.5|loss sum of the partial epoch = 1.5, expected 0 (no step of it done)
208|f64|nan|loss sum of the partial epoch = nan
216|f64|3|hits of the partial epoch = 3, expected an integer in 0..0
224|f64|-1|seconds trained = -1
224|f64|inf|seconds trained = inf
512|f32|nan|parameter 0 of 163 is NaN
1164|f32|inf|Adam's m 0 of 163 is inf
1820|f32|-0.5|Adam's v 1 of 163 is -0.5
240|u64|3|log state = 3, expected 0 (not recorded), 1 (no log) or 2 (recorded)
240|u64|1|log fields = 1,
248|u64|0|first epoch in the log = 0, expected 1..3
248|u64|4|first epoch in the log = 4, expected 1..3
EOF

# A consistent mid-epoch position (5 steps: t = 29, 250 samples seen) is
# what a stop writes: resumed. Then its hits beyond the samples seen: refused.
forge good.snap m1 192 u64 5 && forge m1 m2 200 u64 29 && forge m2 m3 208 f64 270 && forge m3 mid.snap 216 f64 90
tconf f 3
cp mid.snap f.snap
echo "another writer's file" > f.snap.tmp.elsewhere.4242.displaced
expect_rc 0 "a consistent mid-epoch snapshot is resumed" "$NTKD" f.conf
check "... from step 5 of epoch 3" has "2 epochs done and 5 steps of epoch 3" err.log
check "... log valid" json_log f.jsonl 1 2 3
check "... naming the file a killed job moved aside beside the snapshot" has \
  "warning: ./f.snap.tmp.elsewhere.4242.displaced is a file another writer had put at f.snap" err.log
check "... which it keeps" grep -qx "another writer's file" f.snap.tmp.elsewhere.4242.displaced
rm -f f.snap.tmp.elsewhere.4242.displaced
forge mid.snap f.snap 216 f64 251
cp f.snap f.before
expect_rc 2 "hits beyond the 250 samples of 5 steps refused" "$NTKD" f.conf
check "... naming them" has "hits of the partial epoch = 251, expected an integer in 0..250" err.log
check "... untouched" cmp -s f.snap f.before

# More epochs than the job asks for: refused, not "nothing to train".
tconf f 1
cp good.snap f.snap
cp good.jsonl f.jsonl
expect_rc 2 "a snapshot of 2 epochs for a job of 1 is refused" "$NTKD" f.conf
check "... saying so" has "f.snap holds 2 epochs, more than this job's \[train\] epochs = 1" err.log
check "... untouched" bash -c "cmp -s f.snap good.snap && cmp -s f.jsonl good.jsonl"
tconf f 2
expect_rc 0 "the same snapshot for a job of 2 epochs: nothing to train" "$NTKD" f.conf
check "... says so" has "nothing to train" err.log
cp mid.snap f.snap
expect_rc 2 "a snapshot 5 steps into epoch 3 for a job of 2 epochs is refused" "$NTKD" f.conf
check "... saying so" has "f.snap holds 2 epochs and 5 steps of epoch 3, more than this job's \[train\] epochs = 2: set epochs to at least 3" err.log
check "... untouched" cmp -s f.snap mid.snap

# --- divergence: exit 8, finite JSON --------------------------------------------
tconf d 4 "alpha = 1e30"
cp good.snap d.snap
cp good.jsonl d.jsonl
expect_rc 8 "alpha = 1e30 after 2 good epochs: exit 8" "$NTKD" d.conf
check "... saying where and what to change" bash -c "grep -q 'training diverged in epoch 3, step' err.log && grep -q 'lower \[train\] alpha (now 1e+30)' err.log"
check "... and what the snapshot holds" has "d.snap holds 2 epochs, and a rerun resumes from it" err.log
check "... not blaming the data (all near 1)" bash -c "! grep -q 'training data reach' err.log"
check "... log: JSON, epochs 1, 2 only" json_log d.jsonl 1 2
check "... snapshot untouched" cmp -s d.snap good.snap
check "... no nan in the table" bash -c "! grep -qi 'nan\|inf' out.log"
sed -i '/^alpha/d' d.conf
expect_rc 0 "the rerun with alpha back resumes" "$NTKD" d.conf
check "... to a valid log of 4 epochs" json_log d.jsonl 1 2 3 4

tconf b 1000 "beta2 = 0"
expect_rc 8 "beta2 = 0 diverges: exit 8" "$NTKD" b.conf
n=$(wc -l < b.jsonl)
check "... after some epochs" [ "$n" -ge 1 ]
check "... a valid log up to the last finite epoch" json_log b.jsonl $(seq 1 "$n")
check "... the snapshot holds that epoch" has "b.snap holds $n epochs" err.log
expect_rc 8 "... and the rerun diverges again from it" "$NTKD" b.conf

tconf m 2 "alpha = 1e30"
expect_rc 8 "-np 2, alpha = 1e30 from the start: exit 8" mpirun -np 2 "$NTKD" m.conf
check "... said once" bash -c "[ \$(grep -c 'training diverged' err.log) = 1 ] && grep -q 'no snapshot was written yet' err.log"
check "... no snapshot" [ ! -e m.snap ]
check "... an empty log" json_log m.jsonl

# Data far from 1 diverge whatever the step: the message names the value, the
# sample and the file, and [data] scale, before alpha.
tconf h 2
sed -i 's/^path = x.npy/path = xbig.npy/' h.conf
expect_rc 8 "a training value of 1e38: exit 8" "$NTKD" h.conf
check "... naming the data first" has "The training data reach |x| = 1e+38 (sample 7 of xbig.npy), which float32 steps do not hold: scale them (\[data\] scale), then, if it still diverges, lower \[train\] alpha" err.log

# --- the log after a torn write --------------------------------------------------
# A SIGKILL while the line of epoch 3 is written, before its snapshot: the
# resume drops the fragment, the log stays JSON lines.
tconf l 3
cp good.snap l.snap
{ cat good.jsonl; printf '{"epoch": 3, "main/loss": 0.81'; } > l.jsonl
expect_rc 0 "resume with a torn last log line (the epoch after the snapshot's)" "$NTKD" l.conf
check "... the torn line dropped, the log JSON" json_log l.jsonl 1 2 3
# The snapshot holds 2 epochs but the log's line of epoch 2 lost its end (a
# file system that lost a synced write): refused, the log untouched. It once
# dropped the line and went on, the log lacking epoch 2 for good.
tconf l2 3
cp good.snap l2.snap
head -c -30 good.jsonl > l2.jsonl
cp l2.jsonl l2.keep
expect_rc 2 "a log whose line of an epoch the snapshot holds is cut short: refused" "$NTKD" l2.conf
check "... saying which" has "l2.jsonl: line 2, where epoch 2's line belongs, is cut short" err.log
check "... the log untouched" cmp -s l2.jsonl l2.keep

# --- the log is the snapshot's (the chain of its lines' checksums) -------------------
# Another job's log (another seed) in its place: its lines of epochs 1..2
# were kept in front of this job's epoch 3, its later lines cut away, exit 0.
tconf o 5 "seed = 99"
expect_rc 0 "another job (seed 99), 5 epochs" "$NTKD" o.conf
tconf s 3
cp good.snap s.snap
cp o.jsonl s.jsonl
expect_rc 2 "resume with another job's log: refused" "$NTKD" s.conf
check "... naming it" has "s.jsonl: its lines of epochs 1..2 are not those this job wrote" err.log
check "... the log untouched" cmp -s s.jsonl o.jsonl
{ echo '# run on node 3'; cat good.jsonl; } > s.jsonl
expect_rc 2 "a log with a line that is not a record: refused" "$NTKD" s.conf
check "... naming the line" has "s.jsonl: line 1 is not a log record" err.log
: > s.jsonl
expect_rc 0 "an empty log (a new file): taken" "$NTKD" s.conf
check "... saying from which epoch" has "s.jsonl is empty: it starts at epoch 3" err.log
check "... the log then holds epoch 3" json_log s.jsonl 3
sed -i 's/^epochs = 3/epochs = 4/' s.conf
expect_rc 0 "... and is resumed from (its lines 3..3 recorded)" "$NTKD" s.conf
check "... epochs 3 and 4" json_log s.jsonl 3 4
# Emptied, then the next epoch's line written and the job killed before
# that epoch's snapshot: the log's first line is the next epoch's. Every
# later resume refused it as another job's; it is an emptied log.
# (That line must be this job's: its record of epoch 3, from a copy of the
# run; another job's line was cut there, exit 0, a hunt.)
tconf g3 3
cp good.snap g3.snap && cp good.jsonl g3.jsonl
"$NTKD" g3.conf >/dev/null 2>&1
tconf e 3
cp good.snap e.snap
sed -n 3p g3.jsonl > e.jsonl
expect_rc 0 "an emptied log holding only the next epoch's line: taken" "$NTKD" e.conf
check "... saying so" has "e.jsonl holds no line of epochs 1..2: it starts at epoch 3" err.log
check "... the line rewritten" json_log e.jsonl 3
# The log replaced under the running job (an editor's save, sed -i): it
# wrote on into the unlinked file, those lines lost, exit 0. (100 000
# epochs, as h1 below: 400 took 0.09 s on tmpfs, and the job could end
# before the poll below stopped it: exit 0, a flaky check.)
tconf lr 100000
"$NTKD" lr.conf >lr.log 2>&1 &
lr=$!
for _ in $(seq 600); do [ -s lr.jsonl ] && break; kill -0 $lr 2>/dev/null || break; sleep 0.05; done
stop_procs $lr
cp lr.jsonl lr.new && mv lr.new lr.jsonl
ends_4_over_replacement $lr lr.jsonl lr.log "a log" \
  "lr.jsonl is no longer the log this job writes: it was replaced or removed"
# A snapshot of an ntkd before the record (log fields 0) with that ntkd's
# log, which could have a gap (it dropped a torn line of an epoch the
# snapshot held and went on): taken by that ntkd's rule, then recorded.
forge good.snap g1 240 u64 0 && forge g1 g2 248 u64 0 && forge g2 g.snap 256 u64 0
tconf g 3
{ head -n 1 good.jsonl; printf '{"epoch": 2, "main/lo'; } > g.jsonl
expect_rc 0 "an older ntkd's snapshot and gapped log: resumed" "$NTKD" g.conf
check "... its rule: the leading whole lines kept" json_log g.jsonl 1 3
sed -i 's/^epochs = 3/epochs = 4/' g.conf
expect_rc 0 "... and resumed again, its kept lines a head not checked" "$NTKD" g.conf
check "... epochs 1, 3, 4" json_log g.jsonl 1 3 4
# A job refused at its snapshot does not leave a log it created.
tconf r 3
printf 'not a snapshot' > r.snap
expect_rc 2 "a job refused at its snapshot" "$NTKD" r.conf
check "... leaves no log it made" [ ! -e r.jsonl ]

# Data that underflow float32 as scaled: the cure is the scale (a training
# job takes no [compute] precision, which the message once named).
tconf us 1
sed -i 's/^labels = y.npy$/labels = y.npy\nscale = 1e-300/' us.conf
expect_rc 2 "training data scaled below float32's range: refused" "$NTKD" us.conf
check "... with the cure a training job takes" has "use a larger \[data\] scale (training computes in float32)" err.log

# --- subnormal inputs under flush_denormals ----------------------------------------
# DAZ reads them as 0: samples of nothing else trained as zeros, exit 0.
tconf z 1
sed -i 's/^path = x.npy/path = xsub.npy/' z.conf
expect_rc 2 "training samples that DAZ reads as zeros are refused" "$NTKD" z.conf
check "... naming the sample and the cures, at the job file's line" \
  has "z.conf:$(grep -n '^path = xsub.npy' z.conf | cut -d: -f1): \[data\] path: xsub.npy: sample 0: every value is 0 or below float32's normal range .* scale the data (\[data\] scale) or set flush_denormals = false" err.log
tconf z 1 "flush_denormals = false"
sed -i 's/^path = x.npy/path = xsub.npy/' z.conf
expect_rc 0 "... taken with flush_denormals = false" "$NTKD" z.conf
tconf zf 1
sed -i 's/^path = x.npy/path = xfew.npy/' zf.conf
expect_rc 0 "three subnormal values beside normal ones: trained" "$NTKD" zf.conf
check "... and counted" has "xfew.npy: 3 values in 1 samples are below float32's normal range" err.log
# The data's identity in the snapshot is the data as trained on (the
# subnormal values as the zeros DAZ reads, as an earlier ntkd loaded them):
# the same job on the zeros resumes it (it was refused as another job's).
sed -i 's/^epochs = 1/epochs = 2/; s/^path = xfew.npy/path = xfew0.npy/' zf.conf
expect_rc 0 "... and its snapshot resumes on the data with those values 0" "$NTKD" zf.conf
check "... two epochs in the log" json_log zf.jsonl 1 2

# --- two jobs, one log -------------------------------------------------------------
# Another snapshot, the same log: the second job exits 7 before it touches
# anything. The log has no lock file beside it; the message once said the
# first job reached it "by another name" or "after its lock file was removed".
tconf s1 100000  # (it must still run when s2 starts: 400 epochs could end first, s2 exit 0)
tconf s2 1
sed -i 's/^log = s2.jsonl$/log = s1.jsonl/' s2.conf
"$NTKD" s1.conf >s1.log 2>&1 &
s1=$!
for _ in $(seq 600); do [ -s s1.jsonl ] && break; kill -0 $s1 2>/dev/null || break; sleep 0.05; done
stop_procs $s1
expect_rc 7 "a second job on a running job's log exits 7" "$NTKD" s2.conf
check "... saying so, without a lock file it never had" \
  has "s1.jsonl: the training log is being written by another running job (by this name or another); nothing was changed" err.log
check "... and no snapshot written" [ ! -e s2.snap ]
kill -CONT $s1
kill -TERM $s1
wait $s1

# One after the other: a fresh job (its own snapshot, another seed) on a
# finished job's log emptied it, exit 0, and the first job's rerun was then
# refused. It is refused (exit 2), the log untouched; --overwrite starts over.
tconf f1 2
tconf f2 2 "seed = 5"
sed -i 's/^log = f2.jsonl$/log = f1.jsonl/' f2.conf
expect_rc 0 "a finished job" "$NTKD" f1.conf
cp f1.jsonl f1.before
expect_rc 2 "a fresh job on its log is refused" "$NTKD" f2.conf
check "... saying what the log holds and what to do" \
  has "f1.jsonl holds 2 lines of a training run that no snapshot of this job records (another job's log, or an earlier run of this job): this job starts afresh and would empty it; nothing was changed: use --overwrite" err.log
check "... the log untouched, no snapshot written" bash -c "cmp -s f1.jsonl f1.before && [ ! -e f2.snap ]"
expect_rc 0 "... the first job's rerun still takes its log" "$NTKD" f1.conf
expect_rc 0 "... --overwrite starts over" "$NTKD" f2.conf --overwrite
check "... with a log of its own epochs" json_log f1.jsonl 1 2
# A run stopped between epoch 1's line and its snapshot: that line alone
# (and a fragment) is taken, as a resume takes the next epoch's line, once
# this job's epoch 1 gave the same record (below: another job's is refused).
tconf f3 1
expect_rc 0 "a job of one epoch" "$NTKD" f3.conf
cp f3.jsonl f3.line && rm -f f3.snap && printf '{"epo' >> f3.jsonl
tconf f3 2
expect_rc 0 "a fresh job on a log of its epoch 1's line alone (and a fragment) starts" "$NTKD" f3.conf
check "... and writes its own epochs" json_log f3.jsonl 1 2
# Not in the form ntkd writes it (a CRLF end, a blank line before it): an
# edited log, refused at the start (such a line was kept, and a kill while
# it was rewritten left a log that was no JSON-lines, a hunt).
sed 's/$/\r/' f3.line > f3.jsonl && echo >> f3.jsonl && cp f3.jsonl f3.keep
rm -f f3.snap
expect_rc 2 "... with a CRLF line end: refused" "$NTKD" f3.conf
check "... saying so" has "f3.jsonl holds a line of epoch 1 that is not as ntkd writes one" err.log
check "... the log as it was" cmp -s f3.jsonl f3.keep
# Without a snapshot, a stopped job's message says how a rerun starts over.
printf '[data]\npath = x.npy\nlabels = y.npy\n[validation]\npath = vx.npy\nlabels = vy.npy\n[train]\nlayers = 16 8 3\nbatch = 50\nepochs = 3\nlog = f1.jsonl\n' > f4.conf
expect_rc 2 "a job without a snapshot on a log of 2 epochs is refused" "$NTKD" f4.conf
check "... saying so" has "f1.jsonl holds 2 lines of a training run that no snapshot (\[train\] snapshot is not set) records" err.log
sed -i 's/^epochs = 3$/epochs = 100000/' f4.conf
rm f1.jsonl
"$NTKD" f4.conf >out.log 2>err.log &
f4=$!
for _ in $(seq 600); do [ -s f1.jsonl ] && break; kill -0 $f4 2>/dev/null || break; sleep 0.05; done
kill -TERM $f4
wait $f4
check "... its stop says a rerun starts over with --overwrite" has "no \[train\] snapshot is set, so a rerun starts over (with --overwrite, which empties the log)" err.log
rm -f f1.* f2.* f3.* f4.*

# --- the snapshot is held by its job, by the file --------------------------------
# A second job through a hard link to a running job's snapshot, and one
# after its lock file was removed, with a log of its own: both trained and
# wrote it in turn, exit 0 each, one's result lost. The file itself is held.
tconf h1 100000  # (400 epochs took 0.3 s: it could end before it was stopped, exit 0, a flaky check)
cp good.snap h1.snap
cp good.jsonl h1.jsonl
"$NTKD" h1.conf >h1.log 2>&1 &
h1=$!
for _ in $(seq 600); do [ "$(wc -l < h1.jsonl)" -ge 3 ] && break; kill -0 $h1 2>/dev/null || break; sleep 0.05; done
stop_procs $h1
ln h1.snap h2.snap
tconf h2 400
expect_rc 7 "a second job on a running job's snapshot through a hard link exits 7" "$NTKD" h2.conf
check "... saying so" has "h2.snap: the training snapshot is being written by another running job" err.log
rm -f h2.snap h2.jsonl
rm -f h1.snap.lock
sed 's/^log = h2.jsonl$/log = h3.jsonl/; s/^snapshot = h2.snap$/snapshot = h1.snap/' h2.conf > h3.conf
expect_rc 7 "... and one on its name after its lock file was removed, with a log of its own" "$NTKD" h3.conf
check "... leaving no log of its own" [ ! -e h3.jsonl ]
# The snapshot replaced under the running job (by hand): it stops before
# writing over it, exit 4, and leaves the replacement as it is.
cp good.snap other.snap
mv other.snap h1.snap
ends_4_over_replacement $h1 h1.snap h1.log "a snapshot" \
  "h1.snap is no longer the snapshot this job last read or wrote: it was replaced"
# ... and between the check before a write and the rename (the test
# setting pauses it there): the new snapshot takes the name only over the
# file the job holds (a rename exchange, the other file put back), so one
# created or replaced in that moment is neither lost nor written over.
cp good.snap r2.snap
cp good.jsonl r2.jsonl
tconf r1 3
tconf r2 4
for r in r1 r2; do
  NTKD_TEST_SNAPSHOT_PAUSE=4 "$NTKD" $r.conf >$r.log 2>&1 &
  pid=$!
  for _ in $(seq 400); do grep -q "paused before the snapshot takes its name" $r.log && break; sleep 0.05; done
  cp good.snap other.snap
  mv other.snap $r.snap
  says=$([ $r = r1 ] && echo "it was created while the job ran" || echo "it was replaced while the job ran")
  ends_4_over_replacement $pid $r.snap $r.log "a snapshot (between its check and its rename, $r)" "$says"
done
# ... and after its last write, before it ends (the test setting pauses it
# there): it ended 0 over a result no longer at its name.
for what in snapshot log; do
  tconf e 3
  rm -f e.snap e.jsonl
  NTKD_TEST_TRAIN_END_PAUSE=5 "$NTKD" e.conf >e.log 2>&1 &
  e=$!
  for _ in $(seq 600); do [ -s e.jsonl ] && [ "$(wc -l < e.jsonl)" -ge 3 ] && break; sleep 0.05; done
  sleep 1  # the snapshot of epoch 3 follows its line
  if [ $what = snapshot ]; then cp good.snap other.snap; mv other.snap e.snap; else cp e.jsonl other.jsonl; mv other.jsonl e.jsonl; fi
  [ $what = snapshot ] && says="e.snap is no longer the snapshot this job last read or wrote: it was replaced" \
    || says="e.jsonl is no longer the log this job writes"
  ends_4_over_replacement $e e.$([ $what = snapshot ] && echo snap || echo jsonl) e.log "a $what (after the last epoch)" \
    "$says"
done

# --- a rank's device fails (a GPU's gradient or update): the others are told
# at the next sum and stop with its message, not after rank_timeout (1800 s)
# as "stopped answering" (NTKD_TEST_TRAIN_FAIL=R:T: rank R fails at step T) ---
tconf df 3
for at in 1:5 0:12 1:24; do
  rm -f df.snap df.jsonl
  start=$SECONDS
  expect_rc 1 "rank ${at%%:*}'s gradient fails at step ${at#*:}: exit 1" env NTKD_TEST_TRAIN_FAIL=$at mpirun -np 2 "$NTKD" df.conf
  check "... within a minute, not after rank_timeout ($((SECONDS - start)) s)" [ $((SECONDS - start)) -lt 60 ]
  check "... with that rank's message, once" bash -c "[ \$(grep -c 'the gradient failed (test setting' err.log) = 1 ]"
done
expect_rc 0 "... and the rerun resumes from the last snapshot" mpirun -np 2 "$NTKD" df.conf
check "... to a whole log" json_log df.jsonl 1 2 3

# --- rank_timeout below 1 s: a healthy job's first snapshot (an fsync the run
# had not yet seen a step take) was taken for a stopped rank, exit 9 ---------------
tconf rt 1 "rank_timeout = 0.001"
expect_rc 2 "rank_timeout = 0.001 refused" "$NTKD" check rt.conf
check "... with file:line and the least value" has "rt.conf:13: \[train\] rank_timeout: '0.001' is not a number of seconds of at least 1" err.log
tconf rt 1 "rank_timeout = 1"
expect_rc 0 "rank_timeout = 1 taken" "$NTKD" check rt.conf

# --- Adam constants float32 cannot hold ------------------------------------------
tconf c 1 "eps = 1e-40"
expect_rc 2 "eps = 1e-40 (0 in float32 with FTZ: 0/0) refused" "$NTKD" check c.conf
check "... with file:line" has "c.conf:13: \[train\] eps: '1e-40' is not a number in \[1e-15, 3.4e38\]" err.log
tconf c 1 "alpha = 1e39"
expect_rc 2 "alpha = 1e39 (inf in float32) refused" "$NTKD" check c.conf
check "... with file:line" has "c.conf:13: \[train\] alpha: '1e39' is not a number in \[1.18e-38, 3.4e38\]" err.log

# --- a snapshot or log path where no file can be made: its key's line --------
tconf pl 1
sed -i 's|^snapshot = .*|snapshot = x.npy/u.snap|' pl.conf
expect_rc 3 "[train] snapshot under a file: exit 3" "$NTKD" pl.conf
check "... naming the key's line" has "pl.conf:11: \[train\] snapshot: x.npy/u.snap.lock: cannot open" err.log
tconf pl 1
sed -i 's|^log = .*|log = x.npy/u.jsonl|' pl.conf
expect_rc 3 "[train] log under a file: exit 3" "$NTKD" pl.conf
check "... naming the key's line" has "pl.conf:12: \[train\] log: x.npy/u.jsonl: cannot open" err.log
check "... no snapshot written" [ ! -e pl.snap ]

# --- a fresh start over a log holding one line of epoch 1: this job's (a run
# killed between that line and its snapshot) or another's. Another job's
# finished 1-epoch log was emptied, exit 0, its rerun then refused (a hunt).
tconf ol 1
expect_rc 0 "a 1-epoch job: a log of one line" "$NTKD" ol.conf
cp ol.jsonl ol.keep
tconf ob 1
sed -i 's|^log = .*|log = ol.jsonl|; s|^batch = 50|batch = 30|' ob.conf
expect_rc 2 "another job starting afresh over that log: exit 2 at the end of its epoch 1" "$NTKD" ob.conf
check "... saying so" has "ol.jsonl: its line of epoch 1 is not the record of this job's epoch 1" err.log
check "... the log as it was" cmp -s ol.jsonl ol.keep
check "... no snapshot written" [ ! -e ob.snap ]
rm -f ol.snap # as if killed between its line of epoch 1 and that epoch's snapshot
tconf ol 2
expect_rc 0 "the job whose line it is, starting afresh over it" "$NTKD" ol.conf
check "... its log: epochs 1, 2" json_log ol.jsonl 1 2
check "... that line kept byte for byte" bash -c "head -1 ol.jsonl | cmp -s - ol.keep"
# the same training under another snapshot (more epochs): the line stands
# for its own epoch 1 and stays byte for byte (it was emptied, exit 0)
tconf om 3
sed -i 's|^log = .*|log = om.jsonl|' om.conf
head -1 ol.keep > om.jsonl
expect_rc 0 "the same training with another snapshot over that line" "$NTKD" om.conf
check "... keeps it byte for byte, its own lines after it" bash -c "head -1 om.jsonl | cmp -s - ol.keep && [ \$(wc -l < om.jsonl) = 3 ]"
# another job's line without its final newline is a line too (it was
# taken for a torn write and emptied, exit 0); a record with a key after
# elapsed_time is not this job's
head -c -1 ol.keep > nn.jsonl
tconf on 1
sed -i 's|^log = .*|log = nn.jsonl|; s|^batch = 50|batch = 30|' on.conf
cp nn.jsonl nn.keep
expect_rc 2 "another job over a line of epoch 1 without its newline: exit 2" "$NTKD" on.conf
check "... the log as it was" cmp -s nn.jsonl nn.keep
# elapsed_time as ntkd prints it: a C number that is no JSON number is another record
sed 's/"elapsed_time": [0-9.]*}/"elapsed_time": 0x1p-3}/' ol.keep > nn.jsonl && cp nn.jsonl nn.keep
tconf on 1
sed -i 's|^log = .*|log = nn.jsonl|' on.conf
expect_rc 2 "this job's record with elapsed_time 0x1p-3: not its line, exit 2" "$NTKD" on.conf
check "... the log as it was" cmp -s nn.jsonl nn.keep
sed 's/}$/, "note": 1}/' ol.keep > nn.jsonl && cp nn.jsonl nn.keep
tconf on 1
sed -i 's|^log = .*|log = nn.jsonl|' on.conf
expect_rc 2 "this job's record with a key after elapsed_time: not its line, exit 2" "$NTKD" on.conf
check "... the log as it was" cmp -s nn.jsonl nn.keep
# Two jobs of the same training on one log, each resumed in turn: a resume
# took the other's line of its next epoch for its own and cut it, exit 0,
# and the other's resume was refused (a hunt). It keeps it now.
for e in 1 2; do
  tconf sa $e && tconf sb $e
  sed -i 's|^log = .*|log = shared.jsonl|' sa.conf sb.conf
  expect_rc 0 "a shared log: A to $e epochs" "$NTKD" sa.conf
  cp shared.jsonl shared.keep
  expect_rc 0 "... B, the same training, to $e epochs, keeps A's line" "$NTKD" sb.conf
  check "... the log as A left it" cmp -s shared.jsonl shared.keep
done
tconf sa 3 && sed -i 's|^log = .*|log = shared.jsonl|' sa.conf
expect_rc 0 "... and A resumes to 3 epochs" "$NTKD" sa.conf
check "... its log: epochs 1..3" json_log shared.jsonl 1 2 3
# A's one line kept by B, which went on to 3 epochs: A's resume is refused,
# and says that its own line is there and the rest is another job's (it
# said its own lines were not, and to empty the log)
tconf ms 1 && sed -i 's|^log = .*|log = msh.jsonl|' ms.conf
expect_rc 0 "A, 1 epoch" "$NTKD" ms.conf
tconf mt 3 && sed -i 's|^log = .*|log = msh.jsonl|' mt.conf
expect_rc 0 "... B, the same training, 3 epochs over its line" "$NTKD" mt.conf
tconf ms 3 && sed -i 's|^log = .*|log = msh.jsonl|' ms.conf
expect_rc 2 "... A's resume to 3 epochs: refused" "$NTKD" ms.conf
check "... saying its own line is there, the rest another job's" \
  has "after this job's lines of epochs 1..1 it holds lines no snapshot of this job records (ms.snap holds 1 epochs): another job's lines" err.log
# A stop in that first epoch writes no snapshot: a resume would take the
# line for its next epoch's and cut it.
$PY -c "
import numpy as np; r = np.random.default_rng(5)
np.save('lx.npy', r.standard_normal((4000, 256)).astype(np.float32)); np.save('ly.npy', r.integers(0, 10, 4000))
np.save('lvx.npy', r.standard_normal((50, 256)).astype(np.float32)); np.save('lvy.npy', r.integers(0, 10, 50))"
printf '[data]\npath = lx.npy\nlabels = ly.npy\n[validation]\npath = lvx.npy\nlabels = lvy.npy\n[train]\nlayers = 256 1024 512 10\nbatch = 1\nepochs = 2\nsnapshot = lp.snap\nlog = ol.jsonl\n' > lp.conf
cp ol.keep ol.jsonl
"$NTKD" lp.conf >out.log 2>err.log &
pid=$!
for _ in $(seq 200); do has "training 256-1024-512-10" err.log && break; sleep 0.05; done
sleep 0.5
kill -TERM $pid
wait $pid
rc=$?
check "SIGTERM in the first epoch over that log: exit 5 (exit $rc)" [ $rc = 5 ]
check "... no snapshot, saying so" bash -c "[ ! -e lp.snap ] && grep -q 'no snapshot of it: ol.jsonl holds a line of epoch 1' err.log"
check "... the log as it was" cmp -s ol.jsonl ol.keep
# Its own line, and another writer adds to the log meanwhile: what it added
# was cut at the end of epoch 1, exit 0 (a hunt); now the job stops there.
sed -i 's/^epochs = 2$/epochs = 1/; s/^log = ol.jsonl$/log = lp.jsonl/' lp.conf
rm -f lp.jsonl lp.snap
expect_rc 0 "the long job, one epoch" "$NTKD" lp.conf
rm -f lp.snap && sed -i 's/^epochs = 1$/epochs = 2/' lp.conf
"$NTKD" lp.conf >out.log 2>err.log &
pid=$!
for _ in $(seq 200); do has "training 256-1024-512-10" err.log && break; sleep 0.05; done
echo '{"epoch": 9, "note": "another writer"}' >> lp.jsonl && cp lp.jsonl lp.keep
wait $pid
rc=$?
check "a line added to the log during the pending epoch: exit 2 (exit $rc)" [ $rc = 2 ]
check "... saying so" has "lp.jsonl changed while this job trained its epoch 1" err.log
check "... the log as the writer left it, no snapshot" bash -c "cmp -s lp.jsonl lp.keep && [ ! -e lp.snap ]"

echo "e2e_train_checks: $passed passed, $failed failed"
[ "$failed" = 0 ]
