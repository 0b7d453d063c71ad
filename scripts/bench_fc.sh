#!/usr/bin/env bash
# FC benchmark (issue "ntkd v1", item 11): N = 10000, d = 3072 random data,
# 3-layer ReLU NTK (Dense Relu Dense Relu Dense), float32, mpirun -np 3.
# Prints the ntkd wall time, one cblas_ssyrk of the same N x d measured in
# the same run (the floor), their ratio (target <= 1.5), and the peak memory
# of each rank.
#   scripts/bench_fc.sh [BUILD_DIR] [N] [d] [RANKS] [TILE]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(readlink -f "${1:-$here/build}")
n=${2:-10000}
d=${3:-3072}
ranks=${4:-3}
tile=${5:-1024}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
work=$(mktemp -d "${TMPDIR:-/tmp}/ntkd-bench-XXXXXX")
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 -c "
import numpy as np
np.save('$work/x.npy', np.random.default_rng(0).standard_normal(($n, $d), dtype=np.float32))"
cat > "$work/bench.conf" <<CONF
[data]
path = x.npy
[model]
arch = Dense Relu Dense Relu Dense
kernel = ntk
[compute]
precision = float32
tile = $tile
[output]
path = bench.ntk
level = 1
progress = 1000
CONF
floor=$("$build/ntkd_bench_syrk" "$n" "$d" 2>/dev/null)
start=$(date +%s.%N)
mpirun -np "$ranks" bash -c 'exec /usr/bin/time -f "%M" -o "$0.rank$OMPI_COMM_WORLD_RANK" "$1" "$2"' \
  "$work/mem" "$build/ntkd" "$work/bench.conf" 2>"$work/log" >/dev/null
end=$(date +%s.%N)
floor2=$("$build/ntkd_bench_syrk" "$n" "$d" 2>/dev/null)
wall=$(echo "$end - $start" | bc -l)
best=$(echo "if ($floor < $floor2) $floor else $floor2" | bc -l)
printf 'FC benchmark: N=%s d=%s, Dense Relu Dense Relu Dense NTK, float32, mpirun -np %s, tile %s\n' "$n" "$d" "$ranks" "$tile"
printf '  ntkd wall time:          %.3f s\n' "$wall"
printf '  cblas_ssyrk (floor):     %.3f s (best of 2x2 runs, before and after)\n' "$best"
printf '  ratio ntkd / ssyrk:      %.2f   (target <= 1.5)\n' "$(echo "$wall / $best" | bc -l)"
for r in $(seq 0 $((ranks - 1))); do
  printf '  peak memory rank %d:      %d MiB\n' "$r" "$(( $(cat "$work/mem.rank$r") / 1024 ))"
done
grep -E "times:|workers spent" "$work/log" | sed "s/^/  /"
"$build/ntkd" info "$work/bench.ntk" | grep -E 'compression|progress' | sed 's/^/  /'
