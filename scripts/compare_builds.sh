#!/usr/bin/env bash
# Two builds of ntkd compute the same stores: a restructuring changed no
# behaviour. Runs one set of jobs with OLD and with NEW (FC with a residual
# block, standard parameterisation, CNN-Flatten, a pooled CNN with residual
# blocks, Myrtle, GAP, strided/CIRCULAR/VALID convolutions with LayerNorm,
# the CNN variance cache off: each in float32 and float64, one process;
# FC regression with the CG and ScaLAPACK solves under mpirun -np 4), then
# compares every export and prediction with cmp and every store with
# scripts/storecmp.py (byte for byte but the random store id and the
# checksums over it; mpirun stores, written in another order, tile by tile).
# Exit 0 only if everything is the same.
# Usage: scripts/compare_builds.sh OLD/ntkd NEW/ntkd [WORKDIR]
set -u
OLD=$(readlink -f "${1:?usage: compare_builds.sh OLD/ntkd NEW/ntkd [WORKDIR]}")
NEW=$(readlink -f "${2:?usage: compare_builds.sh OLD/ntkd NEW/ntkd [WORKDIR]}")
SRC=$(dirname "$(dirname "$(readlink -f "$0")")")
W=$(readlink -f "${3:-$(mktemp -d /tmp/ntkd-compare.XXXXXX)}")
source "$SRC/scripts/env.sh"
export OPENBLAS_NUM_THREADS=1
T10=/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz
TR=/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz
TRL=/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz
T10L=/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz
[ -r "$T10" ] || { echo "skipped: Fashion-MNIST is not installed (dataset-fashion-mnist)"; exit 77; }

job() { # NAME COUNT TILE ARCH [EXTRA-MODEL-LINE]
  for p in float32 float64; do
    printf '[data]\npath = %s\ncount = %s\n[model]\narch = %s\nw_std = 1.4142135623730951\nb_std = 0.05\nkernel = ntk\n%s\n[compute]\nprecision = %s\ntile = %s\n[output]\npath = %s-%s.ntk\n' \
      "$T10" "$2" "$4" "${5:-}" "$p" "$3" "$1" "$p" > "$1-$p.conf"
  done
}
make_jobs() {
  job fc 300 128 "[Dense(W_std=1.5, b_std=0.1) Erf]*2 Dense LeakyRelu(0.2) Dense FanOut(2) parallel(serial(Relu, Dense), Identity) FanInSum Gelu Dense"
  job fcstd 200 64 "Dense(64) Relu Dense(32) Erf Dense" "parameterization = standard"
  job flatten 48 16 "Conv(3, 1, SAME) Relu Conv(3, 1, SAME) Relu Flatten Dense"
  job resgap 16 8 "Conv(3, 1, SAME) FanOut(2) parallel(serial(Relu, Conv(3, 1, SAME), Relu, Conv(3, 1, SAME)), Identity) FanInSum Relu AvgPool(2) Conv(3, 1, SAME) Erf GlobalAvgPool Dense FanOut(2) parallel(serial(Relu, Dense), Identity) FanInSum Relu Dense"
  job myrtle 16 8 "[Conv(3, 1, SAME) Relu]*2 AvgPool(2) [Conv(3, 1, SAME) Relu]*1 AvgPool(2) [Conv(3, 1, SAME) Relu]*1 GlobalAvgPool Dense"
  job gap 16 8 "[Conv(3, 1, SAME) Relu]*3 GlobalAvgPool Dense"
  job misc 12 4 "Conv(8, (3, 3), (2, 2), padding='SAME') Relu Conv(8, (3, 3), padding='CIRCULAR') LayerNorm AvgPool(2, 1) Conv(8, (3, 3), padding='VALID') Gelu Flatten Dense(16) Relu Dense" "parameterization = standard"
  for p in float32 float64; do sed "s/resgap-$p.ntk/nocache-$p.ntk/" "resgap-$p.conf" > "nocache-$p.conf"; done
  for m in cg scalapack; do
    printf '[data]\npath = %s\nlabels = %s\ncount = 600\n[test]\npath = %s\nlabels = %s\ncount = 150\n[model]\narch = Dense Relu Dense Relu Dense\nw_std = 1.4142135623730951\nb_std = 0.05\nkernel = ntk\n[compute]\nprecision = float32\ntile = 128\n[output]\npath = solve-%s.ntk\n[solve]\nridge = 1e-3, 1e-1\nmethod = %s\n' \
      "$TR" "$TRL" "$T10" "$T10L" "$m" "$m" > "solve-$m.conf"
  done
}
run_all() { # run_all NTKD: every job here with that binary, exports beside
  local bin=$1 bad=0
  for c in fc fcstd flatten resgap myrtle gap misc nocache; do
    for p in float32 float64; do
      if [ $c = nocache ]; then NTKD_CNN_VAR_CACHE=0 "$bin" $c-$p.conf > $c-$p.log 2>&1; else "$bin" $c-$p.conf > $c-$p.log 2>&1; fi || { echo "FAILED: $bin $c-$p.conf"; bad=1; }
      for k in nngp ntk; do "$bin" export $c-$p.ntk $c-$p-$k.npy --kernel $k >> $c-$p.log 2>&1 || bad=1; done
    done
  done
  for m in cg scalapack; do
    mpirun -np 4 "$bin" solve-$m.conf > solve-$m.log 2>&1 || { echo "FAILED: mpirun -np 4 $bin solve-$m.conf"; bad=1; }
    for k in nngp ntk; do "$bin" export solve-$m.ntk solve-$m-$k.npy --kernel $k >> solve-$m.log 2>&1 || bad=1; done
  done
  return $bad
}
rc=0
for side in old new; do
  mkdir -p "$W/$side" && cd "$W/$side" || exit 1
  make_jobs
  bin=$OLD; [ $side = new ] && bin=$NEW
  run_all "$bin" || rc=1
done
cd "$W/old" || exit 1
n=0 same=0
for f in *.npy; do
  n=$((n + 1))
  if cmp -s "$f" "../new/$f"; then same=$((same + 1)); else echo "DIFFERENT: $f"; rc=1; fi
done
echo "exports and predictions: $same of $n identical (cmp)"
ns=0
for s in *.ntk; do
  ns=$((ns + 1))
  printf '%-22s ' "$s"
  /usr/bin/python3 "$SRC/scripts/storecmp.py" "$s" "../new/$s" || rc=1
done
echo "stores compared: $ns; $( [ $rc = 0 ] && echo 'all the same' || echo 'DIFFERENCES above') ($W)"
exit $rc
