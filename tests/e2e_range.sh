#!/usr/bin/env bash
# End-to-end range of the kernel maps (docs/MATH.md, "Range"): float32 jobs on
# inputs scaled by 1e10 and 1e-12, whose variances' products leave float32,
# against the float64 job at scale 1 times s^2 (with b_std = 0 a ReLU
# network is positively homogeneous of degree 2); Erf at a large variance
# against float64; and a network whose kernel really exceeds float32, which
# must be an error (exit 8), never a stored inf; and inputs so small that a
# sample's variance is a float32 subnormal, or networks whose kernel
# underflows to exactly 0 (exit 8 too), but not a sample of zeros; and a
# scale-free layer (Sign, LayerNorm) on a variance below the range (exit 8).
# Usage: tests/e2e_range.sh path/to/ntkd
set -u
NTKD=$(readlink -f "${1:?usage: e2e_range.sh path/to/ntkd}")
source "$(dirname "$(readlink -f "$0")")/e2e_lib.sh"

$PY - <<'PYEOF'
import numpy as np
rng = np.random.default_rng(11)
np.save('fc.npy', rng.standard_normal((8, 16)).astype(np.float32))
np.save('img.npy', rng.standard_normal((6, 8, 8, 3)).astype(np.float32))
PYEOF

# job NAME DATA SCALE PRECISION ARCH: a kernel job (b_std = 0), both kernels exported
job() {
  local name=$1 data=$2 scale=$3 prec=$4 arch=$5
  {
    printf '[data]\npath = %s\nscale = %s\n[model]\narch = %s\nkernel = ntk\n' "$data" "$scale" "$arch"
    printf '[compute]\nprecision = %s\n[output]\npath = %s.ntk\n' "$prec" "$name"
  } > "$name.conf"
  expect_rc 0 "$name: $prec job, data scaled by $scale" "$NTKD" "$name.conf"
  "$NTKD" export "$name.ntk" "$name-ntk.npy" --kernel ntk >/dev/null 2>&1
  "$NTKD" export "$name.ntk" "$name-nngp.npy" --kernel nngp >/dev/null 2>&1
}

# close GOT REF S TOL: GOT equals REF times S^2 within TOL relative to
# max(|K_ij|, sqrt(K_ii K_jj)), for NNGP and NTK, and GOT is all finite.
close() {
  $PY - "$@" <<'PYEOF'
import sys
import numpy as np
got, ref, factor, tol = sys.argv[1], sys.argv[2], float(sys.argv[3]) ** 2, float(sys.argv[4])
for k in ('nngp', 'ntk'):
    g = np.load(f'{got}-{k}.npy').astype(np.float64)
    r = np.load(f'{ref}-{k}.npy').astype(np.float64) * factor
    assert np.isfinite(g).all(), f'{k}: {np.count_nonzero(~np.isfinite(g))} values not finite'
    d = np.sqrt(np.outer(np.diag(r), np.diag(r)))
    err = np.max(np.abs(g - r) / np.maximum(np.abs(r), d))
    print(f'    {got} against {ref} x {factor:g}: {k} relative error {err:.3g}', file=sys.stderr)
    assert err < tol, (k, err, tol)
PYEOF
}

# --- positive homogeneity: float32 at 1e10 and 1e-12 against float64 at 1 -----
for spec in "fc|fc.npy|Dense(W_std=1.5) Relu Dense(W_std=1.5) Relu Dense" \
            "gap|img.npy|[Conv(3, 1, SAME, W_std=1.5) Relu]*2 GlobalAvgPool Dense" \
            "flat|img.npy|[Conv(3, 1, SAME, W_std=1.5) Relu]*2 Flatten Dense"; do
  IFS='|' read -r name data arch <<< "$spec"
  job "$name-1" "$data" 1 float64 "$arch"
  for s in 1e10 1e-12; do
    job "$name-$s" "$data" "$s" float32 "$arch"
    check "$name: float32 at scale $s = float64 at scale 1 times s^2 (1e-5)" close "$name-$s" "$name-1" "$s" 1e-5
  done
done

# --- Erf at variances ~1e6: float32 against float64 on the same data ---------
# (the product form (1+2q11)(1+2q22) - 4q12^2 lost a pair with itself to
# cancellation there: its NTK was off by ~1e-2)
arch="Dense(W_std=1.5) Erf Dense"
job erf64 fc.npy 1000 float64 "$arch"
job erf32 fc.npy 1000 float32 "$arch"
check "Erf at variance ~2e6: float32 = float64 (1e-5)" close erf32 erf64 1 1e-5

# --- a kernel beyond float32: an error, not an inf ---------------------------
deep="[Dense(W_std=2) Relu]*150 Dense"
printf '[data]\npath = fc.npy\n[model]\narch = %s\n[compute]\nprecision = float32\n[output]\npath = deep.ntk\n' \
  "$deep" > deep.conf
# (exit 8 comes from the worker's check for values that are not finite)
expect_rc 8 "$deep, float32: the kernel (~1e45) exceeds float32" "$NTKD" deep.conf
check "... the message names an entry" grep -Eq 'entry \(row [0-9]+, column [0-9]+\)' err.log
check "... and says to use float64" grep -Eq 'use (\[compute\] precision = )?float64' err.log
sed 's/precision = float32/precision = float64/; s/deep.ntk/deep64.ntk/' deep.conf > deep64.conf
expect_rc 0 "the same network in float64" "$NTKD" deep64.conf
"$NTKD" export deep64.ntk deep64.npy >/dev/null 2>&1
check "... is finite and beyond float32" $PY -c "
import numpy as np; k = np.load('deep64.npy'); assert np.isfinite(k).all() and np.abs(k).max() > 3.5e38, k.max()"

# --- a kernel below float32: an error, not a value of a few bits -----------
# Inputs scaled by 1e-21: a sample's variance is ~1e-42, a float32
# subnormal with a few bits (a regression on it was 5 % off, exit 0).
printf '[data]\npath = fc.npy\nscale = 1e-21\n[model]\narch = Dense Relu Dense\n[compute]\nprecision = float32\n[output]\npath = tiny.ntk\n' > tiny.conf
expect_rc 8 "data scaled by 1e-21, float32: the kernel's diagonal (~1e-42) is below float32's normal range" "$NTKD" tiny.conf
check "... the message names a sample, the Relu its variance enters, and its value" \
  grep -Eq 'sample [0-9]+: its variance entering layer 2 \(Relu\) is [0-9.]+e-4[0-9], below float32' err.log
check "... and says to use float64" grep -q 'use \[compute\] precision = float64' err.log
# A refused job leaves no store: the store it had created held no tile, and
# the rerun with the cure was refused as "a store of another job".
check "... and leaves no store behind" bash -c '[ ! -e tiny.ntk ] && [ ! -e tiny.ntk.index ]'
check "... saying it removed the empty store" grep -q 'removed tiny.ntk, created by this run with no tile in it' err.log
sed 's/precision = float32/precision = float64/' tiny.conf > tiny64.conf
expect_rc 0 "the same job in float64, on the same store name (the message's cure)" "$NTKD" tiny64.conf


# --- a kernel that underflows to exactly 0: an error too -----------------
# 300 ReLU layers at the default w_std = 1, b_std = 0 halve the variances
# per layer: ~1e-92, which float32 flushes to 0 everywhere (stored with
# exit 0 before). The worker recomputes a zero self-entry in float64.
printf '[data]\npath = fc.npy\n[model]\narch = [Dense Relu]*300 Dense\nkernel = ntk\n[compute]\nprecision = float32\n[output]\npath = flush.ntk\n' > flush.conf
expect_rc 8 "300 ReLU layers, float32: the kernel underflows to 0" "$NTKD" flush.conf
check "... the message names the entry, its float64 value and float64" grep -Eq 'NNGP entry \(row ([0-9]+), column \1\) is 0 in float32 but [0-9.]+e-9[0-9] in float64.*precision = float64' err.log
check "... no store left behind (a tile refused: none stored)" [ ! -e flush.ntk ]
sed 's/precision = float32/precision = float64/; s/flush.ntk/flush64.ntk/' flush.conf > flush64.conf
expect_rc 0 "the same network in float64" "$NTKD" flush64.conf
"$NTKD" export flush64.ntk flush64.npy >/dev/null 2>&1
check "... its diagonal is positive and below float32's range" $PY -c "
import numpy as np; k = np.diag(np.load('flush64.npy')); assert (k > 0).all() and (k < 1e-38).all(), k"
sed 's/\*300/*1200/; s/flush64.ntk/flush1200.ntk/' flush64.conf > flush1200.conf
expect_rc 8 "1200 ReLU layers, float64: the kernel underflows to 0 in float64 too" "$NTKD" flush1200.conf
check "... the message says below float64's range" grep -q "its variance entering layer [0-9]* (Relu) is .*, below float64's normal range" err.log
# Inputs scaled by 1e-24: a float32 variance of ~1e-48 flushes to 0.
sed 's/scale = 1e-21/scale = 1e-24/; s/tiny.ntk/tiny0.ntk/' tiny.conf > tiny0.conf
expect_rc 8 "data scaled by 1e-24, float32: the kernel is 0 in float32" "$NTKD" tiny0.conf
check "... said so" grep -q "is 0 (underflowed: the sample is not all zeros), below float32's normal range" err.log
# Inputs scaled by 1e-46: every value is below float32's smallest subnormal
# and is stored as 0, so each sample is all zeros and its kernel 0, which
# the worker keeps for a sample of zeros (stored with exit 0 before).
sed 's/scale = 1e-21/scale = 1e-46/; s/tiny.ntk/tiny46.ntk/' tiny.conf > tiny46.conf
expect_rc 2 "data scaled by 1e-46, float32: the samples flush to zeros as they load" "$NTKD" tiny46.conf
check "... said so, naming float32" grep -q 'every value is 0 in float32 after scaling (by 1e-46)' err.log
# An NTK far below its NNGP: a network that ends in a nonlinearity, no Dense
# readout. Erf(1, 1e-25, 1): NNGP ~1, NTK ~1e-50, which float32 flushes to
# 0 (stored with exit 0 before); a Sign-ended network's NTK is 0 and kept.
printf '[data]\npath = fc.npy\n[model]\narch = Dense Erf(1, 1e-25, 1)\n[compute]\nprecision = float32\n[output]\npath = ntk0.ntk\n' > ntk0.conf
expect_rc 8 "Dense Erf(1, 1e-25, 1), float32: the NTK underflows to 0, the NNGP does not" "$NTKD" ntk0.conf
check "... the message names the NTK entry and its float64 value" grep -Eq 'NTK entry \(row ([0-9]+), column \1\) is 0 in float32 but [0-9.]+e-5[0-9] in float64' err.log
sed 's/Erf(1, 1e-25, 1)/Relu Dense Sign/; s/ntk0.ntk/sign0.ntk/' ntk0.conf > sign0.conf
expect_rc 0 "Dense Relu Dense Sign, float32: its NTK is 0, and stored" "$NTKD" sign0.conf
# A sample of zeros has a zero value with itself (b_std = 0): that is its value.
$PY -c "
import numpy as np; x = np.load('fc.npy'); x[3] = 0; np.save('zero.npy', x)"
sed 's/fc.npy/zero.npy/; s/\*300/*2/; s/flush.ntk/zero.ntk/' flush.conf > zero.conf
expect_rc 0 "a sample of zeros, b_std = 0, float32: its 0 is stored" "$NTKD" zero.conf
"$NTKD" export zero.ntk zero-ntk.npy --kernel ntk >/dev/null 2>&1
check "... its row is 0, the others' diagonal is not" $PY -c "
import numpy as np; k = np.load('zero-ntk.npy'); assert (k[3] == 0).all() and (np.delete(np.diag(k), 3) > 0).all(), k"

# A network with a layer that maps everything to 0 (W_std = 0, b_std = 0):
# its kernel is 0, as neural-tangents', and is stored.
sed 's/arch = .*/arch = Dense Relu Dense(W_std=0) Relu Dense/; s/flush.ntk/vanish.ntk/' flush.conf > vanish.conf
expect_rc 0 "a layer with W_std = 0: the zero kernel is its value, stored" "$NTKD" vanish.conf
"$NTKD" export vanish.ntk vanish.npy >/dev/null 2>&1
check "... all zeros" $PY -c "import numpy as np; k = np.load('vanish.npy'); assert k.shape == (8, 8) and (k == 0).all(), k"
# A vanishing branch does not make a residual block 0 (FanInSum): the other
# branch's 0 on data x 1e-170 underflowed (stored as zeros, exit 0, before).
printf '[data]\npath = fc.npy\nscale = 1e-170\n[model]\narch = FanOut(2) parallel(Dense(W_std=0, b_std=0), Dense) FanInSum Relu Dense\nb_std = 0\n[compute]\nprecision = float64\n[output]\npath = branch0.ntk\n' > branch0.conf
expect_rc 8 "a vanishing branch beside one that underflowed: refused" "$NTKD" branch0.conf
sed 's/Dense) FanInSum/Dense(W_std=0, b_std=0)) FanInSum/; s/branch0.ntk/branch00.ntk/' branch0.conf > branch00.conf
expect_rc 0 "... both branches vanish: the zero kernel is its value" "$NTKD" branch00.conf
printf '[data]\npath = img.npy\nscale = 1e-170\n[model]\narch = Conv(3, 1, SAME) Sign Conv(3, 1, SAME) Flatten Dense(b_std=0.1)\nb_std = 0\n[compute]\nprecision = float64\n[output]\npath = cnn170.ntk\n' > cnn170.conf
expect_rc 8 "a CNN at 1e-170 into Sign: every position underflowed to 0, refused" "$NTKD" cnn170.conf
check "... said so" grep -q 'underflowed: the window there is not all zeros' err.log

# --- a scale-free layer on a variance below the range: an error -------------
# Sign, RectifiedMonomial(0) and LayerNorm depend on the variances' ratios,
# not their size: on a variance with a few bits left they gave O(1) values
# that no check of the output could tell from right ones (float32, inputs
# scaled by 1e-21: 5.7e-3 off, exit 0). Refused as the worker starts,
# naming the sample (or image and position) and the layer, under mpirun too.
printf '[data]\npath = fc.npy\nscale = 1e-21\n[model]\narch = Dense(W_std=1.3) Sign Dense(W_std=1.3)\n[compute]\nprecision = float32\n[output]\npath = sign21.ntk\n' > sign21.conf
expect_rc 8 "Dense Sign Dense, float32, inputs x 1e-21: a variance entering Sign is subnormal" mpirun -np 3 "$NTKD" sign21.conf
check "... the message names the sample, the layer and float64" grep -Eq 'sample [0-9]+: its variance entering layer 2 \(Sign\) is [0-9.]+e-4[0-9], below float32.*precision = float64' err.log
check "... no store left behind (refused as the workers start)" [ ! -e sign21.ntk ]
sed 's/precision = float32/precision = float64/; s/sign21.ntk/sign21d.ntk/' sign21.conf > sign21d.conf
expect_rc 0 "the same job in float64" "$NTKD" sign21d.conf
sed 's/scale = 1e-21/scale = 1e-170/; s/sign21d.ntk/sign170.ntk/' sign21d.conf > sign170.conf
expect_rc 8 "... and in float64 at 1e-170, where the variance underflows to 0" "$NTKD" sign170.conf
check "... said so" grep -q 'is 0 (underflowed: the sample is not all zeros), below float64' err.log
printf '[data]\npath = img.npy\nscale = 1e-21\n[model]\narch = Conv(3, 1, SAME) LayerNorm Relu GlobalAvgPool Dense\n[compute]\nprecision = float32\n[output]\npath = ln21.ntk\n' > ln21.conf
expect_rc 8 "a CNN with LayerNorm, float32, inputs x 1e-21" "$NTKD" ln21.conf
check "... the message names the image, the layer and the position" grep -Eq 'image [0-9]+: its variance entering layer 2 \(LayerNorm\) at position \([0-9]+, [0-9]+\) is' err.log
sed 's/scale = 1e-21/scale = 1/; s/ln21.ntk/ln1.ntk/' ln21.conf > ln1.conf
expect_rc 0 "... and at scale 1 it computes" "$NTKD" ln1.conf

# --- a [test] sample on no diagonal tile ---------------------------------
# Without test x test, a test sample's value with itself is in no tile: one
# scaled by 1e-30 (its variance underflows, its products with the train set
# do not) came back 164 % off with exit 0 (a hunt), where the same data in
# one diagonal tile were refused. The variances entering a Relu are judged
# now, as a scale-free layer's are (fc.c, cnn.c).
$PY -c "
import numpy as np; x = np.load('fc.npy')[:2].copy(); x[0] *= 1e-30; np.save('tst.npy', x)
np.save('trn.npy', np.load('fc.npy')[2:6])"
printf '[data]\npath = trn.npy\n[test]\npath = tst.npy\n[model]\narch = [Dense(W_std=1.5) Relu]*2 Dense\nkernel = ntk\n[compute]\nprecision = float32\ntile = 4\n[output]\npath = alone.ntk\n' > alone.conf
expect_rc 8 "a test sample whose own variance underflows, float32, tile 4: refused" "$NTKD" alone.conf
check "... naming it (sample 4: the first test sample)" grep -q "sample 4: its variance entering layer 2 (Relu) is 0 (underflowed" err.log
sed 's/precision = float32/precision = float64/; s/alone.ntk/alone64.ntk/' alone.conf > alone64.conf
expect_rc 0 "... the same job in float64 computes" "$NTKD" alone64.conf
"$NTKD" export alone64.ntk alone64.npy --kernel ntk >/dev/null 2>&1
"$NTKD" export alone.ntk alone32.npy --kernel ntk >/dev/null 2>&1
check "... and the float32 store holds no tile of that row" $PY -c "
import numpy as np, os
assert not os.path.exists('alone32.npy') or np.isnan(np.load('alone32.npy')[4]).all()"

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
