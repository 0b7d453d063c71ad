#!/usr/bin/env bash
# Before/after speed of the standard networks: two builds (say the commit
# before a change and after it), run alternately on one core in the same
# session, the one run first swapping each round: CNTK-GAP-21,
# CNN-Flatten-21, Myrtle-7/10 and an Erf CNTK (ntkd_bench_cnn, one tile),
# and two FC jobs (ntkd, one rank, level 0).
# Prints each time and the ratio after/before. Then the outputs are checked
# (scripts/bench_check.sh), and the script exits 1 if any check fails:
#   - the two builds' FC stores of the first round, every kernel byte for
#     byte;
#   - each CNN as an ntkd job of each build on 6 images (8 x 8 x 3, tile 4),
#     byte for byte;
#   - each build's CNN tiles against the general path (the reference the
#     fast paths are tested against; ntkd_bench_cnn --check 3): too slow
#     at the timed size (a minute an image on 32 x 32 x 3 here), so on
#     3 images of 8 x 8 x 3, which must take the timed run's path (the
#     path ntkd_bench_cnn names is compared).
#   scripts/bench_ab.sh BEFORE_BUILD AFTER_BUILD [ROUNDS]
# NTKD_BENCH_CPU=1: each run's CPU seconds (user + system, /usr/bin/time)
# instead of its wall-clock time, for a machine that others share.
set -euo pipefail
source "$(dirname "$0")/args.sh"
script_args 3 -- "$@"
before=$(readlink -f "$1") after=$(readlink -f "$2") rounds=${3:-3}
cpu=${NTKD_BENCH_CPU:-0}
source "$(dirname "$0")/env.sh"
source "$(dirname "$0")/bench_check.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 -c "
import numpy as np
np.save('$work/fc.npy', np.random.default_rng(1).standard_normal((12000, 784)).astype(np.float32))
np.save('$work/img.npy', np.random.default_rng(2).random((6, 8, 8, 3), dtype=np.float32))"
fc() { # BUILD ARCH STORE
  printf '[data]\npath = fc.npy\n[model]\narch = %s\n[compute]\ntile = 2048\n[output]\npath = %s\nlevel = 0\nprogress = 1000\n' "$2" "$3" > "$work/fc.conf"
  rm -f "$work/$3"*
  if [ "$cpu" = 1 ]; then
    (cd "$work" && /usr/bin/time -f '%U %S' -o cpu.txt "$1/ntkd" fc.conf 2> fc.log >/dev/null)
    awk '{print $1 + $2}' "$work/cpu.txt"
  else
    (cd "$work" && "$1/ntkd" fc.conf 2> fc.log >/dev/null)
    sed -n 's/.*tiles \([0-9.]*\) s$/\1/p' "$work/fc.log"
  fi
}
# cnn BUILD ARCH N KEY: seconds per entry (CPU mode: CPU seconds over the
# n (n + 1) / 2 entries); the path it took goes to $work/path.KEY.
cnn() {
  if [ "$cpu" = 1 ]; then
    /usr/bin/time -f '%U %S' -o "$work/cpu.txt" "$1/ntkd_bench_cnn" --check 0 "$2" "$3" >/dev/null 2>"$work/cnn.err"
    awk -v n="$3" '{print ($1 + $2) / (n * (n + 1) / 2)}' "$work/cpu.txt"
  else
    "$1/ntkd_bench_cnn" --check 0 "$2" "$3" 2>"$work/cnn.err" | tail -1
  fi
  sed -n 's/.* float[0-9]*, \([a-z ]*\): .*/\1/p' "$work/cnn.err" > "$work/path.$4"
}
declare -A arch=(
  [cntk-gap21]="[Conv(3, 1, SAME) Relu]*20 GlobalAvgPool Dense|8"
  [cnn-flatten21]="[Conv(3, 1, SAME) Relu]*20 Flatten Dense|64"
  [myrtle7]="[Conv(3, 1, SAME) Relu]*2 AvgPool(2) [Conv(3, 1, SAME) Relu]*2 AvgPool(2) [Conv(3, 1, SAME) Relu]*2 GlobalAvgPool Dense|6"
  [myrtle10]="[Conv(3, 1, SAME) Relu]*3 AvgPool(2) [Conv(3, 1, SAME) Relu]*3 AvgPool(2) [Conv(3, 1, SAME) Relu]*3 GlobalAvgPool Dense|6"
  [cntk-erf8]="[Conv(3, 1, SAME) Erf]*8 GlobalAvgPool Dense|8"
)
fcs=("Dense Relu Dense Relu Dense" "Dense Erf Dense Erf Dense")
status=0
for r in $(seq "$rounds"); do
  for name in cntk-gap21 cnn-flatten21 myrtle7 myrtle10 cntk-erf8; do
    a=${arch[$name]%|*} n=${arch[$name]#*|}
    # The two builds in turn, the first of them swapping each round.
    if [ $((r % 2)) = 1 ]; then
      b=$(cnn "$before" "$a" "$n" "$name.before"); f=$(cnn "$after" "$a" "$n" "$name.after")
    else
      f=$(cnn "$after" "$a" "$n" "$name.after"); b=$(cnn "$before" "$a" "$n" "$name.before")
    fi
    printf '%-14s round %d  before %.4e s/entry  after %.4e s/entry  after/before %.3f\n' "$name" "$r" "$b" "$f" "$(awk -v f="$f" -v b="$b" 'BEGIN {print f / b}')"
  done
  for i in 0 1; do
    a=${fcs[$i]}
    # In turn as above, each job after a sync: the page cache's write-back
    # of the job before (a store of 1.1 GB) slowed the job after it by up
    # to 1.5x when "after" always ran second.
    if [ $((r % 2)) = 1 ]; then
      sync; b=$(fc "$before" "$a" "fc$i-before.ntk"); sync; f=$(fc "$after" "$a" "fc$i-after.ntk")
    else
      sync; f=$(fc "$after" "$a" "fc$i-after.ntk"); sync; b=$(fc "$before" "$a" "fc$i-before.ntk")
    fi
    printf '%-14s round %d  before %.3f s  after %.3f s  after/before %.3f   (FC 12000x784 float32, %s, one rank)\n' fc "$r" "$b" "$f" "$(awk -v f="$f" -v b="$b" 'BEGIN {print f / b}')" "$a"
    if [ "$r" = 1 ]; then
      same_stores "FC $a, before and after" "$before" "$work/fc$i-before.ntk" "$after" "$work/fc$i-after.ntk" || status=1
    fi
    rm -f "$work/fc$i-"*
  done
done

for name in cntk-gap21 cnn-flatten21 myrtle7 myrtle10 cntk-erf8; do
  a=${arch[$name]%|*}
  for tag in before after; do
    printf '[data]\npath = img.npy\n[model]\narch = %s\nw_std = 1.4142135623730951\n[compute]\ntile = 4\n[output]\npath = %s-%s.ntk\n' \
      "$a" "$name" "$tag" > "$work/$name-$tag.conf"
    b=$([ $tag = before ] && echo "$before" || echo "$after")
    (cd "$work" && "$b/ntkd" "$name-$tag.conf" >/dev/null 2>&1) || { echo "check FAILED: $name: the $tag build's ntkd job failed"; status=1; }
    # The general path, on images small enough for it, taking the timed path.
    out=$("$b/ntkd_bench_cnn" --check 3 "$a" 3 float32 8 8 3 2>&1 >/dev/null) || status=1
    path=$(echo "$out" | sed -n 's/.* float[0-9]*, \([a-z ]*\): .*/\1/p')
    echo "check: $name ($tag): $(echo "$out" | sed -n 's/^check: //p')"
    if [ "$path" != "$(cat "$work/path.$name.$tag")" ]; then
      echo "check FAILED: $name ($tag): 8 x 8 x 3 images take the '$path' path, the timed run '$(cat "$work/path.$name.$tag")'"
      status=1
    fi
  done
  same_stores "$name on 6 images of 8 x 8 x 3, before and after" "$before" "$work/$name-before.ntk" "$after" "$work/$name-after.ntk" || status=1
done
[ $status = 0 ] && echo "bench_ab: every output check passed" || echo "bench_ab: an output check FAILED (above)"
exit $status
