#!/usr/bin/env bash
# CNN benchmarks (issue "CNN kernels", item 6, and issue 15): float32,
# random 32x32x3 inputs, mpirun on all cores (one rank per core + the
# coordinator), each pair computed once. Prints seconds per kernel entry for
# CNTK-GAP depth 21, CNN-Flatten depth 21 and Myrtle-5/7/10 (NNGP+NTK), and
# for CNTK-GAP the GFLOP/s achieved against the fp32 peak measured in the
# same run (OpenBLAS ssyrk on all cores), assuming 0.48 GFLOP per pair
# (design notes: ~23 flops per covariance entry per conv+ReLU layer, 1024^2
# entries, 20 layers), and for CNN-Flatten-21 at 0.471 MFLOP per pair (its
# 1024 diagonal entries per layer); then each Myrtle's and neural-tangents'
# README WideResNet's (configs/wrn.conf's arch, 48 images) time as a
# fraction of CNTK-GAP-21's (targets: Myrtle-10 at most 1/3, issue 15;
# the WideResNet at most 3, issue 28). Then each network once more
# on one core (ntkd_bench_cnn, one tile of 16 images), whose entries of the
# first 3 images are checked against the general path (the reference
# layer-by-layer path): a wrong value fails the benchmark (exit 1). And each
# mpirun job's store is checked against a one-process job of its first 4
# images (scripts/bench_check.sh): every kernel byte for byte, or exit 1.
#   scripts/bench_cnn.sh [BUILD_DIR] [SCALE]   (SCALE multiplies the image counts)
set -euo pipefail
source "$(dirname "$0")/args.sh"
script_args 2 -- "$@"
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(readlink -f "${1:-$here/build}")
scale=${2:-1}
source "$here/scripts/env.sh"
source "$here/scripts/bench_check.sh"
status=0
ranks=$(( $(nproc) + 1 ))
work=$(mktemp -d "${TMPDIR:-/tmp}/ntkd-bench-cnn-XXXXXX")
trap 'rm -rf "$work"' EXIT
peak=$("$build/ntkd_bench_syrk" 4096 4096 2>&1 | sed -n 's/.*kernels, \([0-9.]*\) GFLOP.*/\1/p')
run() { # NAME N TILE ARCH [W_STD]
  local name=$1 n=$(( $2 * scale )) tile=$3 arch=$4 wstd=${5:-1.4142135623730951}
  /usr/bin/python3 -c "
import numpy as np
np.save('$work/$name.npy', np.random.default_rng(1).random(($n, 32, 32, 3), dtype=np.float32))"
  printf '[data]\npath = %s.npy\n[model]\narch = %s\nw_std = %s\n[compute]\ntile = %s\n[output]\npath = %s.ntk\nprogress = 1000\n' \
    "$name" "$arch" "$wstd" "$tile" "$name" > "$work/$name.conf"
  mpirun -np "$ranks" "$build/ntkd" "$work/$name.conf" 2> "$work/$name.log" >/dev/null
  local secs entries
  secs=$(sed -n 's/.*tiles \([0-9.]*\) s$/\1/p' "$work/$name.log")
  entries=$(( n * (n + 1) / 2 ))
  local per
  per=$(echo "$secs / $entries" | bc -l)
  per_entry[$name]=$per
  printf '  %-14s N=%-5s tile %-4s %6d entries in %7.2f s: %10.4f ms per entry' "$name" "$n" "$tile" "$entries" "$secs" \
    "$(echo "$per * 1000" | bc -l)"
  # The first 4 images in one process, one tile: the same bytes.
  awk '{print} /^\[data\]$/ {print "count = 4"}' "$work/$name.conf" |
    sed "s/^path = $name.ntk\$/path = $name-4.ntk/; s/^tile = .*/tile = 4/" > "$work/$name-4.conf"
  if "$build/ntkd" "$work/$name-4.conf" >/dev/null 2>"$work/$name-4.log"; then
    same_block "$name, mpirun against one process" "$build" "$work/$name.ntk" "$work/$name-4.ntk" 4 >> "$work/checks" || status=1
  else
    echo "check FAILED: $name: the one-process job of 4 images failed" >> "$work/checks"; status=1
  fi
  local flop=""
  [ "$name" = cntk-gap21 ] && flop=0.48
  [ "$name" = cnn-flatten21 ] && flop=0.000471
  if [ -n "$flop" ]; then
    local gf
    gf=$(echo "$flop / $per" | bc -l)
    printf ', %.1f GFLOP/s = %.1f%% of the %s GFLOP/s fp32 peak' "$gf" "$(echo "100 * $gf / $peak" | bc -l)" "$peak"
  fi
  printf '\n'
}
declare -A per_entry arch
arch[cntk-gap21]="[Conv(3, 1, SAME) Relu]*20 GlobalAvgPool Dense"
arch[cnn-flatten21]="[Conv(3, 1, SAME) Relu]*20 Flatten Dense"
arch[myrtle5]="[Conv(3, 1, SAME) Relu]*2 AvgPool(2) [Conv(3, 1, SAME) Relu]*1 AvgPool(2) [Conv(3, 1, SAME) Relu]*1 GlobalAvgPool Dense"
arch[myrtle7]="[Conv(3, 1, SAME) Relu]*2 AvgPool(2) [Conv(3, 1, SAME) Relu]*2 AvgPool(2) [Conv(3, 1, SAME) Relu]*2 GlobalAvgPool Dense"
# neural-tangents' README WideResNet, as configs/wrn.conf writes it (W_std 1)
arch[wrn]=$(sed -n 's/^arch = //p' "$here/configs/wrn.conf")
arch[myrtle10]="[Conv(3, 1, SAME) Relu]*3 AvgPool(2) [Conv(3, 1, SAME) Relu]*3 AvgPool(2) [Conv(3, 1, SAME) Relu]*3 GlobalAvgPool Dense"
echo "CNN benchmarks: float32, random 32x32x3 images, mpirun -np $ranks on $(nproc) cores, NNGP+NTK"
run cntk-gap21 48 16 "${arch[cntk-gap21]}"
run cnn-flatten21 1024 128 "${arch[cnn-flatten21]}"
for m in myrtle5 myrtle7 myrtle10; do run $m 48 16 "${arch[$m]}"; done
run wrn 48 16 "${arch[wrn]}" 1.0
for m in myrtle5 myrtle7 myrtle10 wrn; do
  printf '  %-14s %.3f of CNTK-GAP-21 per entry\n' "$m" "$(echo "${per_entry[$m]} / ${per_entry[cntk-gap21]}" | bc -l)"
done
echo "targets (issue 28): CNTK-GAP-21 and CNN-Flatten-21 at >= 40% of the fp32 peak, Myrtle-10 <= 1/3 and the WideResNet <= 3 x CNTK-GAP-21 per entry"
sed 's/^/  /' "$work/checks"
echo "one core, one tile of 16 images (ntkd_bench_cnn), checked against the general path:"
for name in cntk-gap21 cnn-flatten21 myrtle5 myrtle7 myrtle10 wrn; do
  out=$("$build/ntkd_bench_cnn" "${arch[$name]}" 16 2>&1 >/dev/null) || status=1
  printf '  %-14s %s\n' "$name" "$(echo "$out" | sed -n 's/.*: \([0-9.e-]* s per entry\).*/\1/p')"
  printf '  %-14s %s\n' "" "$(echo "$out" | grep '^check:')"
done
exit $status
