#!/usr/bin/env bash
# Before/after speed of the standard networks: two builds (say the commit
# before a change and after it), run alternately on one core in the same
# session: CNTK-GAP-21, CNN-Flatten-21, Myrtle-7/10 and an Erf CNTK
# (ntkd_bench_cnn, one tile), and two FC jobs (ntkd, one rank, level 0).
# Prints each time and the ratio after/before.
#   scripts/bench_ab.sh BEFORE_BUILD AFTER_BUILD [ROUNDS]
# NTKD_BENCH_CPU=1: each run's CPU seconds (user + system, /usr/bin/time)
# instead of its wall-clock time, for a machine that others share.
set -euo pipefail
before=$(readlink -f "$1") after=$(readlink -f "$2") rounds=${3:-3}
cpu=${NTKD_BENCH_CPU:-0}
source "$(dirname "$0")/env.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 -c "
import numpy as np
np.save('$work/fc.npy', np.random.default_rng(1).standard_normal((12000, 784)).astype(np.float32))"
fc() { # BUILD ARCH
  printf '[data]\npath = fc.npy\n[model]\narch = %s\n[compute]\ntile = 2048\n[output]\npath = fc.ntk\nlevel = 0\nprogress = 1000\n' "$2" > "$work/fc.conf"
  rm -f "$work"/fc.ntk*
  if [ "$cpu" = 1 ]; then
    (cd "$work" && /usr/bin/time -f '%U %S' -o cpu.txt "$1/ntkd" fc.conf 2> fc.log >/dev/null)
    awk '{print $1 + $2}' "$work/cpu.txt"
  else
    (cd "$work" && "$1/ntkd" fc.conf 2> fc.log >/dev/null)
    sed -n 's/.*tiles \([0-9.]*\) s$/\1/p' "$work/fc.log"
  fi
}
cnn() { # timing only: bench_cnn.sh checks. CPU mode: CPU seconds over the entries (n (n + 1) / 2)
  if [ "$cpu" = 1 ]; then
    /usr/bin/time -f '%U %S' -o "$work/cpu.txt" "$1/ntkd_bench_cnn" --check 0 "$2" "$3" >/dev/null 2>&1
    awk -v n="$3" '{print ($1 + $2) / (n * (n + 1) / 2)}' "$work/cpu.txt"
  else
    "$1/ntkd_bench_cnn" --check 0 "$2" "$3" 2>/dev/null | tail -1
  fi
}
declare -A arch=(
  [cntk-gap21]="[Conv(3, 1, SAME) Relu]*20 GlobalAvgPool Dense|8"
  [cnn-flatten21]="[Conv(3, 1, SAME) Relu]*20 Flatten Dense|64"
  [myrtle7]="[Conv(3, 1, SAME) Relu]*2 AvgPool(2) [Conv(3, 1, SAME) Relu]*2 AvgPool(2) [Conv(3, 1, SAME) Relu]*2 GlobalAvgPool Dense|6"
  [myrtle10]="[Conv(3, 1, SAME) Relu]*3 AvgPool(2) [Conv(3, 1, SAME) Relu]*3 AvgPool(2) [Conv(3, 1, SAME) Relu]*3 GlobalAvgPool Dense|6"
  [cntk-erf8]="[Conv(3, 1, SAME) Erf]*8 GlobalAvgPool Dense|8"
)
for r in $(seq "$rounds"); do
  for name in cntk-gap21 cnn-flatten21 myrtle7 myrtle10 cntk-erf8; do
    a=${arch[$name]%|*} n=${arch[$name]#*|}
    b=$(cnn "$before" "$a" "$n"); f=$(cnn "$after" "$a" "$n")
    printf '%-14s round %d  before %.4e s/entry  after %.4e s/entry  after/before %.3f\n' "$name" "$r" "$b" "$f" "$(awk -v f="$f" -v b="$b" 'BEGIN {print f / b}')"
  done
  for a in "Dense Relu Dense Relu Dense" "Dense Erf Dense Erf Dense"; do
    b=$(fc "$before" "$a"); f=$(fc "$after" "$a")
    printf '%-14s round %d  before %.3f s  after %.3f s  after/before %.3f   (FC 12000x784 float32, %s, one rank)\n' fc "$r" "$b" "$f" "$(awk -v f="$f" -v b="$b" 'BEGIN {print f / b}')" "$a"
  done
done
