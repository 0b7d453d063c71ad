#!/usr/bin/env bash
# A graph network's job end to end ([data] pattern and [test] pattern,
# docs/JOB-FILE.md): one process and mpirun -np 3 (two workers, the data
# and patterns shared) byte-identical, the same entries as the library's
# kernel_fn with the same patterns, a resume of the finished store, a
# changed pattern refused as another job's data, and the refusals of a
# pattern that does not fit or a network without a readout. Usage:
# tests/e2e_graph.sh path/to/ntkd
set -u
NTKD=$(readlink -f "${1:?usage: e2e_graph.sh path/to/ntkd}")
source "$(dirname "$(readlink -f "$0")")/e2e_lib.sh"
LIB=$(dirname "$NTKD")/libntkd.so

$PY - <<'PYEOF'
import numpy as np
rng = np.random.default_rng(5)
np.save('x.npy', rng.standard_normal((11, 6, 3)))
np.save('xt.npy', rng.standard_normal((4, 6, 3)))
p = (rng.uniform(size=(11, 6, 6)) < 0.4) * rng.uniform(0.5, 1.5, size=(11, 6, 6))
p[3] = 0  # a graph without edges
np.save('p.npy', p)
np.save('pt.npy', (rng.uniform(size=(4, 6, 6)) < 0.5).astype(np.uint8))  # 0/1 weights, not scaled as images
q = p.copy(); q[0, 1, 2] += 1
np.save('q.npy', q)
np.save('short.npy', p[:7])
PYEOF

job() { # job NAME PATTERN TEST_PATTERN
  {
    printf '[data]\npath = x.npy\nlayout = NLC\npattern = %s\n' "$2"
    printf '[model]\narch = Dense(8, W_std=1.3, b_std=0.2) Relu Aggregate Dense(8, W_std=1.5, b_std=0.1) Relu '
    printf 'Aggregate GlobalAvgPool Dense(1)\nkernel = ntk\n'
    printf '[compute]\nprecision = float64\ntile = 3\n[test]\npath = xt.npy\n'
    [ -n "$3" ] && printf 'pattern = %s\n' "$3"
    printf 'test_test = yes\n[output]\npath = %s.ntk\n' "$1"
  } > "$1.conf"
}

job one p.npy pt.npy
expect_rc 0 "ntkd check of a graph job" "$NTKD" check one.conf
expect_rc 0 "a graph job, one process" "$NTKD" one.conf
job three p.npy pt.npy
expect_rc 0 "the same job on two workers (mpirun -np 3)" mpirun -np 3 "$NTKD" three.conf
"$NTKD" export one.ntk one.npy --kernel ntk >/dev/null 2>&1
"$NTKD" export three.ntk three.npy --kernel ntk >/dev/null 2>&1
check "... byte-identical to one process" cmp -s one.npy three.npy
# The library in python3: not under the sanitizers, whose run-time python3 would have to preload
# (scripts/test-sanitize.sh leaves the Python tests out for the same reason).
if ldd "$LIB" 2>/dev/null | grep -q libasan; then
  echo "skipped: the library's kernel_fn against the store (a sanitized libntkd does not load into python3)"
else
check "... the library's kernel_fn with the same patterns, bit for bit" env PYTHONPATH="$SRC/python" \
  NTKD_LIBRARY="$LIB" $PY -c "
import numpy as np
from ntkd import stax
_, _, kf = stax.serial(stax.Dense(8, W_std=1.3, b_std=0.2), stax.Relu(), stax.Aggregate(),
                       stax.Dense(8, W_std=1.5, b_std=0.1), stax.Relu(), stax.Aggregate(), stax.GlobalAvgPool(),
                       stax.Dense(1))
x = np.concatenate([np.load('x.npy'), np.load('xt.npy')])
p = np.concatenate([np.load('p.npy'), np.load('pt.npy').astype(np.float64)])
k = kf(x, None, 'ntk', pattern=(p, p))
s = np.load('one.npy')
assert np.array_equal(s, k), np.abs(s - k).max()
assert np.all(s[3, :11] == 0) and s[3, 3] == 0  # no edges: no bias after the last Aggregate
"
fi
expect_rc 0 "a rerun of the finished store" "$NTKD" one.conf
check "... computes no tile" has "0 of .* tiles to compute\|nothing to compute\|already complete" err.log
job one q.npy pt.npy
expect_rc 2 "another pattern on the store: another job's data" "$NTKD" one.conf
check "... named as the data" has "data values" err.log
job short short.npy pt.npy
expect_rc 2 "a pattern file of fewer samples" "$NTKD" short.conf
check "... names the line, the file and the shape wanted" has \
  "short.conf:[0-9]*: \[data\] pattern: short.npy: the pattern must have shape (11, V, V)" err.log
job notest p.npy ""
expect_rc 2 "[data] pattern without [test] pattern" "$NTKD" notest.conf
check "... says so, at its line" has "notest.conf:4: \[data\] pattern is given and \[test\] pattern is not" err.log
job noagg p.npy pt.npy
sed -i 's/Aggregate //g' noagg.conf
expect_rc 2 "patterns and a network without an Aggregate to read them" "$NTKD" noagg.conf
check "... says so" has "no Aggregate layer to read it" err.log
# a spatial network without a readout: its message says "[model] arch:" once
job noreadout p.npy pt.npy
sed -i 's/ GlobalAvgPool Dense(1)/ Dense(1)/' noreadout.conf
expect_rc 2 "a graph network without a readout" "$NTKD" noreadout.conf
check "... says so once: '[model] arch: a convolutional network', not 'arch: arch:'" \
  has "noreadout.conf:6: \[model\] arch: a convolutional network must end its spatial part" err.log
# the patterns are inputs: no output replaces one (the store under
# --overwrite, and a solve's predictions named like one, did, exit 0)
job clash p.npy pt.npy
sed -i 's/^path = clash.ntk$/path = p.npy/' clash.conf
cp p.npy p.keep
expect_rc 2 "[output] path naming the [data] pattern, with --overwrite" "$NTKD" clash.conf --overwrite
check "... says so" has "\[data\] pattern" err.log
check "... the pattern untouched" cmp -s p.npy p.keep
job clash2 p.npy pt.npy
printf '[solve]\nridge = 0.1\npredictions = pp\n' >> clash2.conf
sed -i 's/^path = x.npy$/path = x.npy\nlabels = y.npy/; s/^path = xt.npy$/path = xt.npy\nlabels = yt.npy/' clash2.conf
$PY -c "import numpy as np; np.save('y.npy', np.arange(11) % 2); np.save('yt.npy', np.arange(4) % 2)"
cp pt.npy pp-ntk-ridge0.1.npy && cp pt.npy pt2.keep
sed -i 's/^pattern = pt.npy$/pattern = pp-ntk-ridge0.1.npy/' clash2.conf
expect_rc 2 "a solve whose predictions would replace the [test] pattern" "$NTKD" clash2.conf
check "... says so" has "is also \[test\] pattern: an output never replaces an input" err.log
check "... the pattern untouched" cmp -s pp-ntk-ridge0.1.npy pt2.keep
# nor the store's index or lock file (a pattern named STORE.index was written over by the index, exit 0)
for c in index lock; do
  job ci p.npy pt.npy
  cp p.npy ci.ntk.$c && cp p.npy ci.keep
  sed -i "s/^pattern = p.npy$/pattern = ci.ntk.$c/" ci.conf
  expect_rc 2 "a [data] pattern named like the store's $c file" "$NTKD" ci.conf
  check "... says so" has "ci.conf:16: \[output\] path (ci.ntk): the store's .* (ci.ntk.$c) is also \[data\] pattern" err.log
  check "... the pattern untouched" cmp -s ci.ntk.$c ci.keep
  rm -f ci.ntk ci.ntk.$c
done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
