#!/usr/bin/env bash
# Any block of a store, from the shell and from Python: `ntkd export` with
# --rows/--cols/--format raw against the full export, its refusals, and the
# Python reader (python/ntkd_store, from the source tree; tests/pip_install.sh checks the pip-installed package) against
# the C export byte for byte, matvec against numpy, damage against `ntkd
# verify`. Small stores (N = 53, ragged tiles), float32 and float64, with
# and without a [test] split. Usage: tests/e2e_python.sh path/to/ntkd
set -u
NTKD=$(readlink -f "${1:?usage: e2e_python.sh path/to/ntkd}")
source "$(dirname "$(readlink -f "$0")")/e2e_lib.sh"

$PY - <<'PYEOF'
import numpy as np
r = np.random.default_rng(12)
np.save('x.npy', r.standard_normal((53, 7)).astype(np.float32))
np.save('xtr.npy', r.standard_normal((37, 7)).astype(np.float32))
np.save('xte.npy', r.standard_normal((16, 7)).astype(np.float32))
np.save('ytr.npy', r.integers(0, 3, 37)); np.save('yte.npy', r.integers(0, 3, 16))
PYEOF

job() { # job NAME TILE PRECISION KERNEL SPLIT(yes|no)
  {
    if [ "$5" = yes ]; then
      printf '[data]\npath = xtr.npy\nlabels = ytr.npy\n[test]\npath = xte.npy\nlabels = yte.npy\n'
    else
      printf '[data]\npath = x.npy\n'
    fi
    printf '[model]\narch = Dense(b_std=0.1) Relu Dense Erf Dense\nw_std = 1.4\nkernel = %s\n' "$4"
    printf '[compute]\nprecision = %s\ntile = %s\n[output]\npath = %s.ntk\n' "$3" "$2" "$1"
  } > "$1.conf"
  expect_rc 0 "store $1 (tile $2, $3, kernel $4, split $5)" "$NTKD" "$1.conf"
}
# Tiles 10, 8, 7, 16 never divide 53; 8 and 7 cut through the train/test boundary at 37.
job s32 10 float32 ntk no
job s64 8 float64 ntk no
job t64 7 float64 ntk yes
job t32 16 float32 nngp yes
STORES="s32 s64 t32 t64"
kernels_of() { [ "$1" = t32 ] && echo nngp || echo "nngp ntk"; }
for s in $STORES; do for k in $(kernels_of $s); do
  "$NTKD" export $s.ntk $s-$k.npy --kernel $k 2>/dev/null || bad "full export of $s $k"
done; done

# --- ntkd export: blocks, ranges, raw ------------------------------------------------
# Blocks (rows, cols) per store: the whole matrix, blocks across the diagonal,
# test x train, train x test, test x test (NaN), the upper triangle alone,
# single rows and columns, one entry, and random ones; all slice forms.
for s in $STORES; do
  $PY - "$s" > $s.blocks <<'PYEOF'
import sys, numpy as np
s = sys.argv[1]; N = 53; k = 37 if s.startswith('t') else 20
r = np.random.default_rng(sum(map(ord, s)))
b = [':', ':'], ['0:53', ':53'], ['3:40', '5:50'], ['%d:' % k, ':%d' % k], [':%d' % k, '%d:' % k], \
    ['%d:' % k, '%d:' % k], [':9', '44:'], ['17:18', ':'], [':', '52:53'], ['52:', '0:1'], ['30:31', '29:30']
b = list(b)
for _ in range(6):
    r0, c0 = r.integers(0, N, 2); r1, c1 = r.integers(r0 + 1, N + 1), r.integers(c0 + 1, N + 1)
    b.append(['%d:%d' % (r0, r1), '%d:%d' % (c0, c1)])
for i, (rs, cs) in enumerate(b):
    print(i, rs, cs)
PYEOF
  while read -r i rs cs; do
    for k in $(kernels_of $s); do
      "$NTKD" export $s.ntk $s-$k-b$i.npy --kernel $k --rows "$rs" --cols="$cs" 2>/dev/null &&
        "$NTKD" export $s.ntk $s-$k-b$i.raw --kernel=$k --rows="$rs" --cols "$cs" --format raw 2>/dev/null ||
        bad "export $s $k --rows $rs --cols $cs"
    done
  done < $s.blocks
done
check "every block equals the slice of the full export (npy: dtype, shape, bytes; raw: the same bytes)" $PY - <<'PYEOF'
import numpy as np
def sl(t): a, b = t.split(':'); return slice(int(a) if a else None, int(b) if b else None)
n = 0
for s in ['s32', 's64', 't32', 't64']:
    for k in (['nngp'] if s == 't32' else ['nngp', 'ntk']):
        full = np.load('%s-%s.npy' % (s, k))
        for line in open(s + '.blocks'):
            i, rs, cs = line.split()
            want = full[sl(rs), sl(cs)]
            got = np.load('%s-%s-b%s.npy' % (s, k, i))
            assert got.dtype == full.dtype and got.shape == want.shape, (s, k, i, got.shape, want.shape)
            assert got.tobytes() == want.tobytes(), (s, k, i)
            assert open('%s-%s-b%s.raw' % (s, k, i), 'rb').read() == want.tobytes(), (s, k, i)
            n += 1
assert n == 7 * 17, n
PYEOF
check "test x test is NaN, test x train finite, the default equals --rows : --cols :" $PY -c "
import numpy as np
f = np.load('t64-ntk.npy'); b = np.load('t64-ntk-b5.npy'); c = np.load('t64-ntk-b3.npy')
assert np.isnan(b).any() and np.isfinite(c).all() and np.isfinite(f[:37]).all()
assert open('t64-ntk.npy', 'rb').read() == open('t64-ntk-b0.npy', 'rb').read()"
check "raw is memmap-able with the dtype ntkd info prints" bash -c "
  dt=\$('$NTKD' info s64.ntk | sed -n 's/^precision: *//p')
  $PY -c \"import numpy as np; m = np.memmap('s64-ntk-b2.raw', dtype='<'+{'float32':'f4','float64':'f8'}['\$dt'], mode='r', shape=(37, 45))
assert (m == np.load('s64-ntk.npy')[3:40, 5:50]).all()\""

# refusals: usage errors name the option and the matrix size, and write nothing
for spec in "--rows 5:3" "--rows 0:54" "--cols 53:" "--cols abc" "--rows 7" "--rows -1:" "--cols 1:2:3" "--rows 4:4"; do
  # shellcheck disable=SC2086
  expect_rc 2 "export $spec refused" "$NTKD" export s32.ntk bad.npy $spec
  check "... naming ${spec%% *} and the 53 x 53 matrix" bash -c "grep -q -- '${spec%% *}' err.log && grep -q '53 x 53' err.log"
done
expect_rc 2 "export --format csv refused" "$NTKD" export s32.ntk bad.npy --format csv
expect_rc 2 "export --rows without a value refused" "$NTKD" export s32.ntk bad.npy --rows
expect_rc 2 "export --rows given twice refused (not the last one taken)" "$NTKD" export s32.ntk bad.npy --rows 0:5 --rows=5:10
check "... naming the option and both values" has "--rows given twice ('0:5', then '5:10')" err.log
expect_rc 2 "export --kernel without its value refused" "$NTKD" export s32.ntk bad.npy --kernel
check "... naming the option" has "export: --kernel without its value" err.log
expect_rc 2 "export with an unknown option refused" "$NTKD" export s32.ntk bad.npy --bogus
check "... naming it" has "unknown option '--bogus' for export" err.log
expect_rc 2 "export over the store refused (raw too)" "$NTKD" export s32.ntk s32.ntk --format raw
check "nothing written by the refused exports" bash -c "! ls bad.npy* >/dev/null 2>&1 && [ -s s32.ntk ]"

# an incomplete store: a block without the missing tile is exported, one with it refused
cp s32.ntk cut.ntk
read -r last_tile last_off < <("$NTKD" info --records cut.ntk | awk '$1 == "record:" {print $2, $3}' | sort -k2 -n | tail -1)
truncate -s $((last_off + 300)) cut.ntk
read -r br bc kr < <($PY -c "
t = $last_tile; bi = int(((8 * t + 1) ** 0.5 - 1) // 2); bj = t - bi * (bi + 1) // 2
k = next(k for k in range(6) if k not in (bi, bj))
print('%d:%d' % (bi * 10, min(bi * 10 + 10, 53)), '%d:%d' % (bj * 10, min(bj * 10 + 10, 53)), '%d:%d' % (k * 10, min(k * 10 + 10, 53)))")
expect_rc 0 "a torn tail is not damage: ntkd verify" "$NTKD" verify cut.ntk
expect_rc 6 "export of the whole incomplete store refused" "$NTKD" export cut.ntk cut.npy
expect_rc 6 "export of a block (its upper-triangle mirror) that needs the missing tile refused" \
  "$NTKD" export cut.ntk cut.npy --rows "$bc" --cols "$br"
check "... naming the tile" has "tile $last_tile (rows $br, cols $bc)" err.log
expect_rc 0 "export of a block that does not need it" "$NTKD" export cut.ntk cut.npy --rows "$kr" --cols "$kr" --format raw
check "... equals the complete store's" $PY -c "
import numpy as np; a, b = '$kr'.split(':'); f = np.load('s32-ntk.npy')[int(a):int(b), int(a):int(b)]
assert open('cut.npy', 'rb').read() == f.tobytes()"

# damage: a payload byte, a record header byte, header copy A, both copies, another store's record
off_of() { "$NTKD" info --records "$1" | awk -v t="$2" '$1 == "record:" && $2 == t {print $3}'; }
flip() { # flip FILE OFFSET
  $PY -c "
import sys; f = open('$1', 'r+b'); f.seek($2); b = f.read(1); f.seek($2); f.write(bytes([b[0] ^ 0x5a]))"
}
p4=$(off_of s32.ntk 4)
# a payload byte whose flip still decodes to a tile of the right size: only the checksum sees it
pb=$($PY -c "
import zstandard
a = open('s32.ntk', 'rb').read(); r = a[$p4:$p4 + 128]; n = int.from_bytes(r[56:64], 'little')
p = bytearray(a[$p4 + 128:$p4 + 128 + n]); raw = int.from_bytes(r[48:56], 'little')
for i in range(n - 1, 0, -1):
    q = bytearray(p); q[i] ^= 0x5a
    try:
        if len(zstandard.ZstdDecompressor().decompress(bytes(q))) == raw: print($p4 + 128 + i); break
    except zstandard.ZstdError: pass")
check "a payload byte that zstd decodes either way ($pb)" [ -n "$pb" ]
cp s32.ntk pay.ntk && flip pay.ntk "${pb:-0}"
cp s32.ntk rec.ntk && flip rec.ntk $((p4 + 41))
# the last byte of tile 4's record: padding, which must be zero (checked by verify only)
cp s32.ntk pad.ntk && flip pad.ntk "$($PY -c "print($p4 + int.from_bytes(open('s32.ntk', 'rb').read()[$p4 + 80:$p4 + 88], 'little') - 1)")"
cp s32.ntk hda.ntk && flip hda.ntk 20
cp s32.ntk hdb.ntk && flip hdb.ntk 20 && flip hdb.ntk $((4096 + 20))
# one stretch of 200 bytes across the two copies' boundary: both damaged, not in the same bytes
cp s32.ntk hdx.ntk && dd if=/dev/zero of=hdx.ntk bs=1 seek=4000 count=200 conv=notrunc 2>/dev/null
# bytes flipped in both copies, in different places
cp s32.ntk hdy.ntk && flip hdy.ntk 20 && flip hdy.ntk 977 && flip hdy.ntk $((4096 + 30)) && flip hdy.ntk $((4096 + 958))
# two intact header copies that differ (a byte of B's description, its checksum redone)
$PY -c "
import xxhash; a = bytearray(open('s32.ntk', 'rb').read()); a[4096 + 150] ^= 1
a[8184:8192] = xxhash.xxh3_64_intdigest(bytes(a[4096:8184])).to_bytes(8, 'little'); open('dis.ntk', 'wb').write(a)"
# records of another store of the same job: after the last record, and before the first
sed 's/^path = s32.ntk/path = other.ntk/' s32.conf > other.conf
"$NTKD" other.conf >/dev/null 2>&1
$PY -c "
a = open('s32.ntk', 'rb').read(); o = open('other.ntk', 'rb').read()
fa, fo = int.from_bytes(a[136:144], 'little'), int.from_bytes(o[136:144], 'little')
open('for.ntk', 'wb').write(a + o[fo:]); open('mid.ntk', 'wb').write(a[:fa] + o[fo:] + a[fa:])"
DAMAGED="pay pad rec hda hdb hdx hdy dis for mid"
for d in $DAMAGED; do
  "$NTKD" verify $d.ntk > $d.verify 2>&1; echo $? > $d.vrc
done
check "ntkd verify exits 4 on every damaged copy" bash -c "for d in $DAMAGED; do [ \"\$(cat \$d.vrc)\" = 4 ] || exit 1; done"
# info describes a damaged store (exit 0) but has nothing to describe without a header (exit 4, docs/CLI.md)
"$NTKD" info hda.ntk > hda.info 2>&1; rc=$?
check "ntkd info on one damaged header copy: exit 0 (exit $rc)" [ $rc = 0 ]
"$NTKD" info hdb.ntk > hdb.info 2>&1; rc=$?
check "ntkd info on both header copies damaged: exit 4 (exit $rc)" [ $rc = 4 ]
# tile 4 is (2, 1): rows 20:30, cols 10:20
expect_rc 4 "export of a block with the damaged payload refused" "$NTKD" export pay.ntk blk.npy --rows 20:30 --cols 10:20
check "... a checksum mismatch" has "checksum mismatch" err.log
expect_rc 4 "... and of its mirror" "$NTKD" export pay.ntk blk.npy --rows 10:20 --cols 25:30
expect_rc 0 "... a block without it is exported (payloads are checked when read)" \
  "$NTKD" export pay.ntk blk.npy --rows 0:10 --cols 0:10
expect_rc 4 "export of any block of a store with a damaged record header refused" "$NTKD" export rec.ntk blk.npy --rows 0:1 --cols 0:1
expect_rc 4 "export of any block of a store with a damaged header copy refused" "$NTKD" export hda.ntk blk.npy --rows 0:1 --cols 0:1

# a second intact record of tile 4 (values doubled) at the end, with a higher, equal or lower
# sequence number: the highest wins, the later one on a tie (file order is not write order)
$PY - "$p4" <<'PYEOF'
import sys, numpy as np, xxhash, zstandard
p4 = int(sys.argv[1]); a = open('s32.ntk', 'rb').read(); r = bytearray(a[p4:p4 + 128])
u64 = lambda b, o: int.from_bytes(b[o:o + 8], 'little')
n, seq, A = u64(r, 56), u64(r, 88), int.from_bytes(a[44:48], 'little')
raw = zstandard.ZstdDecompressor().decompress(a[p4 + 128:p4 + 128 + n]); cnt = len(raw) // 4
v = np.frombuffer(raw, np.uint8).reshape(4, cnt).T.copy().view('<f4') * np.float32(2)
pay = zstandard.ZstdCompressor(level=1).compress(v.view(np.uint8).reshape(cnt, 4).T.tobytes())
ext = (128 + len(pay) + A - 1) // A * A
for name, s in (('duphi', seq + 1000), ('duptie', seq), ('duplo', seq - 1)):
    for o, x in ((56, len(pay)), (64, xxhash.xxh3_64_intdigest(pay)), (80, ext), (88, s)):
        r[o:o + 8] = x.to_bytes(8, 'little')
    r[120:128] = xxhash.xxh3_64_intdigest(bytes(r[:120])).to_bytes(8, 'little')
    open(name + '.ntk', 'wb').write(a + bytes(r) + pay + bytes(ext - 128 - len(pay)))
PYEOF
for d in duphi duptie duplo; do
  expect_rc 0 "export of a store with two records of a tile ($d)" "$NTKD" export $d.ntk $d.npy
done
check "... the newer values where the sequence number is higher or equal, the older where lower" $PY -c "
import numpy as np; f = np.load('s32-ntk.npy'); h, t, l = (np.load(d + '.npy') for d in ('duphi', 'duptie', 'duplo'))
assert np.array_equal(l, f) and np.array_equal(h, t) and np.array_equal(h[20:30, 10:20], 2 * f[20:30, 10:20])
assert np.array_equal(h[10:20, 20:30], 2 * f[10:20, 20:30]) and (h != f).sum() == 200"

# a damaged store repaired by a rerun (a dead region): the same matrix
sed 's/^path = s32.ntk/path = rep.ntk/' s32.conf > rep.conf
cp s32.ntk rep.ntk && flip rep.ntk $((p4 + 41))
expect_rc 0 "rerun repairs a damaged record header" "$NTKD" rep.conf
check "... with a dead region (shown by info)" bash -c "'$NTKD' info rep.ntk | grep -q '^dead:'"

# --- the Python reader from the source tree (tests/pip_install.sh installs it with pip) ----
VPY=$PY
export PYTHONPATH="$SRC/python${PYTHONPATH:+:$PYTHONPATH}"
check "the reader imported is the source tree's" \
  $VPY -c "import ntkd_store, os; assert ntkd_store.__file__.startswith(os.path.realpath('$SRC/python')), ntkd_store.__file__"

check "attributes: shape, kernels, precision, complete, n_train, tile, job text" $VPY - <<'PYEOF'
import ntkd_store
with ntkd_store.open('t64.ntk') as S:
    assert S.shape == (53, 53) and S.kernels == ('nngp', 'ntk') and S.precision == 'float64', S
    assert S.complete and not S.damaged and S.n_train == 37 and S.tile == 7 and 'precision = float64' in S.job_text
    assert S['ntk'].shape == (53, 53) and str(S['ntk'].dtype) == 'float64'
S = ntkd_store.open('t32.ntk')
assert S.kernels == ('nngp',) and S.precision == 'float32' and S.tile == 16
try:
    S['ntk']; raise SystemExit('no KeyError for a kernel the store lacks')
except KeyError as e:
    assert 'nngp' in str(e)
S.close()
PYEOF

check "Python blocks equal the C export byte for byte (npy file and raw), ints and negatives like numpy" $VPY - <<'PYEOF'
import io, numpy as np, ntkd_store
def sl(t): a, b = t.split(':'); return slice(int(a) if a else None, int(b) if b else None)
n = 0
for s in ['s32', 's64', 't32', 't64']:
    S = ntkd_store.open(s + '.ntk')
    for k in S.kernels:
        K, full = S[k], np.load('%s-%s.npy' % (s, k))
        assert K[:, :].tobytes() == full.tobytes()
        for line in open(s + '.blocks'):
            i, rs, cs = line.split()
            got = K[sl(rs), sl(cs)]
            buf = io.BytesIO(); np.save(buf, got)
            assert buf.getvalue() == open('%s-%s-b%s.npy' % (s, k, i), 'rb').read(), (s, k, i)
            assert got.tobytes() == open('%s-%s-b%s.raw' % (s, k, i), 'rb').read(), (s, k, i)
            n += 1
        rng = np.random.default_rng(5)
        for _ in range(20):
            i, j = (int(x) for x in rng.integers(-53, 53, 2))
            assert K[i, j].tobytes() == full[i, j].tobytes() and K[i].tobytes() == full[i].tobytes()
            assert K[:, j].tobytes() == full[:, j].tobytes() and K[i, 3:-4].tobytes() == full[i, 3:-4].tobytes()
            assert K[i:].tobytes() == full[i:].tobytes() and K[-5:, :i].tobytes() == full[-5:, :i].tobytes()
        assert K[10:5].shape == (0, 53) and K[60:70, 2:3].shape == (0, 1)
        for bad, exc in (((slice(0, 9, 2), 1), ValueError), ((53, 0), IndexError), ((0, -54), IndexError),
                         ((0.5, 1), TypeError), ((1, 2, 3), IndexError)):
            try:
                K[bad]; raise SystemExit('K[%r] accepted' % (bad,))
            except exc:
                pass
assert n == 7 * 17, n
PYEOF

check "matvec equals numpy's product on the exported matrix (1e-12; NaN rows where test x test is NaN)" $VPY - <<'PYEOF'
import numpy as np, ntkd_store
rng = np.random.default_rng(8)
for s in ['s32', 's64', 't32', 't64']:
    S = ntkd_store.open(s + '.ntk')
    for k in S.kernels:
        full = np.load('%s-%s.npy' % (s, k)).astype(np.float64)
        for v in (rng.standard_normal(53), rng.standard_normal((53, 3)), rng.standard_normal((53, 3)).astype(np.float32)):
            y, want = S[k].matvec(v), full @ v.astype(np.float64)
            assert y.shape == want.shape and y.dtype == np.float64
            assert np.array_equal(np.isnan(y), np.isnan(want)), (s, k)
            f = np.isfinite(want)
            assert f.any() and np.abs(y[f] - want[f]).max() <= 1e-12 * np.abs(want[f]).max(), (s, k)
            assert s.startswith('t') == (not f.all())
    try:
        S[S.kernels[0]].matvec(np.ones(52)); raise SystemExit('matvec of a wrong shape accepted')
    except ValueError:
        pass
PYEOF

check "tiles() gives every stored lower-triangle tile once, equal to the export" $VPY - <<'PYEOF'
import numpy as np, ntkd_store
for s in ['s32', 't64']:
    S = ntkd_store.open(s + '.ntk'); full = np.load(s + '-ntk.npy'); seen = np.zeros((53, 53), int); n = 0
    for (r0, r1), (c0, c1), t in S.tiles('ntk'):
        assert r0 >= c0 and t.dtype == full.dtype and t.tobytes() == full[r0:r1, c0:c1].tobytes()
        seen[r0:r1, c0:c1] += 1; n += 1
    assert n == S.tiles_present and seen.max() == 1
    low = np.tri(53, dtype=bool)
    if s == 't64':
        low[:, 37:] = False  # test x test: not all computed
    assert (seen[low] == 1).all()
PYEOF

check "an incomplete store: the block without the missing tile is read, the one with it raises" $VPY - "$kr" "$br" "$bc" "$last_tile" <<'PYEOF'
import sys, numpy as np, ntkd_store
kr, br, bc, tile = sys.argv[1:]
def sl(t): a, b = t.split(':'); return slice(int(a), int(b))
S = ntkd_store.open('cut.ntk')
assert not S.complete and not S.damaged and S.tiles_present == S.tiles_needed - 1
assert S['ntk'][sl(kr), sl(kr)].tobytes() == open('cut.npy', 'rb').read()
for key in ((sl(br), sl(bc)), (sl(bc), sl(br))):
    try:
        S['ntk'][key]; raise SystemExit('block of a missing tile read')
    except ntkd_store.IncompleteStoreError as e:
        assert e.tile == int(tile) and 'tile %s' % tile in str(e) and 'cut.ntk' in str(e), e
for f in (lambda: S['ntk'].matvec(np.ones(53)), lambda: list(S.tiles('ntk'))):
    try:
        f(); raise SystemExit('a whole-matrix read of an incomplete store')
    except ntkd_store.IncompleteStoreError:
        pass
assert sum(1 for _ in S.tiles('ntk', allow_missing=True)) == S.tiles_present
PYEOF

check "damage raises DamagedStoreError naming the file, tile and offset" $VPY - "$p4" <<'PYEOF'
import sys, numpy as np, ntkd_store
p4 = int(sys.argv[1])
S = ntkd_store.open('pay.ntk')  # payloads are checked when read (as ntkd export does)
try:
    S['ntk'][10:20, 25:30]; raise SystemExit('damaged payload read')
except ntkd_store.DamagedStoreError as e:
    assert e.tile == 4 and e.offset == p4 and 'pay.ntk' in str(e) and 'tile 4' in str(e), e
    assert 'checksum mismatch' in str(e), e
assert S['ntk'][:10, :10].tobytes() == np.load('s32-ntk.npy')[:10, :10].tobytes()  # tile 0: intact
for d in ('rec', 'hda'):  # found by the scan: the whole store refused
    S = ntkd_store.open(d + '.ntk'); assert S.damaged
    try:
        S['nngp'][0:1, 0:1]; raise SystemExit(d + ': damaged store read')
    except ntkd_store.DamagedStoreError as e:
        assert d + '.ntk' in str(e)
for d in ('hdx', 'hdy'):  # the header made of both copies' intact parts, as ntkd does
    S = ntkd_store.open(d + '.ntk')
    assert S.header_damaged and S.damaged and S.complete, d
for d, why in (('hdb', 'both copies'), ('dis', 'disagree')):
    try:
        ntkd_store.open(d + '.ntk'); raise SystemExit(d + ': opened')
    except ntkd_store.DamagedStoreError as e:
        assert why in str(e), e
try:
    ntkd_store.open('x.npy'); raise SystemExit('a .npy opened as a store')
except ntkd_store.NotAStoreError:
    pass
for d in ('duphi', 'duptie', 'duplo'):  # two records of a tile: the same winner as ntkd's
    S = ntkd_store.open(d + '.ntk')
    assert S.complete and S['ntk'][:, :].tobytes() == np.load(d + '.npy').tobytes(), d
S = ntkd_store.open('rep.ntk')  # repaired: a dead region, then the recomputed tile
assert not S.damaged and S.complete and S['ntk'][:, :].tobytes() == np.load('s32-ntk.npy').tobytes()
PYEOF

ALL="$STORES cut rep duphi duptie duplo $DAMAGED"
for d in $ALL; do
  "$NTKD" verify $d.ntk > $d.verify 2>&1; echo $? > $d.vrc
done
check "verify() agrees with ntkd verify (exit 0 or 4, tiles intact / damaged / present)" $VPY - $ALL <<'PYEOF'
import re, sys, ntkd_store
for d in sys.argv[1:]:
    rc = int(open(d + '.vrc').read())
    assert rc in (0, 4), (d, rc)
    try:
        S = ntkd_store.open(d + '.ntk')
    except ntkd_store.DamagedStoreError:
        assert rc == 4, d; continue
    try:
        rep = S.verify(); raised = False
    except ntkd_store.DamagedStoreError as e:
        rep = e.report; raised = True
    assert raised == (rc == 4) == S.verify(raise_on_damage=False).damaged_store, (d, rc, rep.problems)
    m = re.search(r'(\d+) tiles intact, (\d+) damaged, (\d+) of (\d+) tiles present', open(d + '.verify').read())
    assert m and tuple(map(int, m.groups())) == (rep.intact, rep.damaged, rep.present, rep.needed), (d, m and m.groups(), rep)
PYEOF

echo "e2e_python: $passed passed, $failed failed"
[ "$failed" = 0 ]
