#!/usr/bin/env bash
# ElementwiseNumerical's cost (issue 29, item 1): a float64 FC job
# Dense F Dense on the first N Fashion-MNIST test images, one process, for
# F = Erf (the closed-form peer) and each function ntkd integrates, in one
# run; prints each job's tile time per entry and its ratio to Erf's. Erf's
# job has 8N images (up to 10 000), so that its time is not a few hundredths
# of a second (ntkd prints two decimals).
#
#   scripts/bench_numerical.sh [BUILD_DIR] [N]     (N = 400: 80 200 entries)
#
# Checks: every job exits 0 and `ntkd verify` passes on its store (a
# non-finite entry would have been refused, never stored); exit 1 otherwise.
# Prints the machine load before and after: compare ratios from one run.
set -euo pipefail
source "$(dirname "$0")/args.sh"
script_args 2 -- "$@"
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(readlink -f "${1:-$here/build}")
n=${2:-400}
images=${NTKD_BENCH_FASHION:-/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "load: $(uptime)"
erf=""
printf '%-16s %10s %12s %8s\n' "nonlinearity" "tiles (s)" "per entry" "vs Erf"
for f in Erf 'ElementwiseNumerical(jnp.tanh, 25)' 'ElementwiseNumerical(jax.nn.sigmoid, 25)' \
  'ElementwiseNumerical(jax.nn.softplus, 25)' 'ElementwiseNumerical(jax.nn.silu, 25)' \
  'ElementwiseNumerical(jax.nn.elu, 25)'; do
  m=$n
  if [ "$f" = Erf ]; then m=$((8 * n > 10000 ? 10000 : 8 * n)); fi
  entries=$((m * (m + 1) / 2))
  cat > "$work/job.conf" <<CONF
[data]
path = $images
count = $m
[model]
arch = Dense(W_std=1.5, b_std=0.1) $f Dense(W_std=1.5, b_std=0.1)
[compute]
precision = float64
tile = $m
[output]
path = $work/out.ntk
CONF
  rm -f "$work/out.ntk"
  if ! "$build/ntkd" "$work/job.conf" > "$work/log" 2>&1; then
    cat "$work/log"
    echo "FAIL: the job with $f"
    exit 1
  fi
  "$build/ntkd" verify "$work/out.ntk" > /dev/null || { echo "FAIL: verify ($f)"; exit 1; }
  t=$(sed -n 's/.*, tiles \([0-9.]*\) s.*/\1/p' "$work/log" | tail -1)
  per=$(awk -v t="$t" -v e="$entries" 'BEGIN { printf "%.3g us", t / e * 1e6 }')
  [ -z "$erf" ] && erf=$(awk -v t="$t" -v e="$entries" 'BEGIN { print t / e }')
  ratio=$(awk -v t="$t" -v e="$entries" -v r="$erf" 'BEGIN { printf "%.0f", t / e / r }')
  name=${f#ElementwiseNumerical(}
  printf '%-16s %10s %12s %8s\n' "${name%%, 25)}" "$t" "$per" "$ratio"
done
echo "load: $(uptime)"
