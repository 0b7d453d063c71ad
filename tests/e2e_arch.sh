#!/usr/bin/env bash
# End-to-end: a network pasted from neural-tangents' Python (stax. prefixes,
# np.sqrt, positional W_std and b_std) computes the same store values, byte
# for byte after ntkd export, as the same network in ntkd's own syntax, in
# both precisions; and in float64 a W_std one ulp away does not (the
# comparison can fail; in float32 that ulp is rounded away). Seconds.
# Usage: tests/e2e_arch.sh path/to/ntkd
set -u
NTKD=$(readlink -f "${1:?usage: e2e_arch.sh path/to/ntkd}")
source "$(dirname "$(readlink -f "$0")")/e2e_lib.sh"

$PY -c "
import numpy as np
np.save('x.npy', np.random.default_rng(29).standard_normal((96, 12)))"

job() { # job NAME PRECISION ARCH
  printf '[data]\npath = x.npy\n[model]\narch = %s\n[compute]\nprecision = %s\ntile = 64\n[output]\npath = %s.ntk\n' \
    "$3" "$2" "$1" > "$1.conf"
}
STAX="stax.serial(stax.Dense(512, W_std=np.sqrt(2), b_std=0.05), stax.Relu(), stax.Dense(1, 1.5, 0.05))"
OWN="Dense(W_std=1.4142135623730951, b_std=0.05) Relu Dense(W_std=1.5, b_std=0.05)"
ULP="Dense(W_std=1.4142135623730954, b_std=0.05) Relu Dense(W_std=1.5, b_std=0.05)"
for prec in float64 float32; do
  nets="stax own"
  [ $prec = float64 ] && nets="$nets ulp"
  for net in $nets; do
    case $net in stax) arch=$STAX ;; own) arch=$OWN ;; ulp) arch=$ULP ;; esac
    job "$net-$prec" "$prec" "$arch"
    expect_rc 0 "$prec: $net job" "$NTKD" "$net-$prec.conf"
    for k in nngp ntk; do "$NTKD" export "$net-$prec.ntk" "$net-$prec-$k.npy" --kernel $k >/dev/null 2>&1; done
  done
  for k in nngp ntk; do
    check "$prec $k: the stax string's store equals ntkd's syntax's, byte for byte" \
      cmp -s "stax-$prec-$k.npy" "own-$prec-$k.npy"
  done
  [ $prec = float64 ] && check "float64: a W_std one ulp away gives another NTK (the comparison can fail)" \
    bash -c "! cmp -s stax-$prec-ntk.npy ulp-$prec-ntk.npy"
done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
