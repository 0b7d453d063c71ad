#!/usr/bin/env bash
# One float64 tile of 16384 x 16384 samples with kernel = ntk: 4 GiB of
# values, a result larger than one MPI message can be (INT_MAX bytes), so
# the worker sends it in pieces. Under mpirun -np 2 it must arrive, verify
# and export byte-identical to a single-process run. Needs about 16 GB of
# free memory (the worker holds the tile, its byte-shuffled copy and the
# compressed result; rank 0 the received result); skipped (exit 77)
# otherwise. The small-job variant runs in tests/e2e_hangs.sh with
# NTKD_TEST_MPI_PIECE. Usage: tests/e2e_large_tile.sh path/to/ntkd
set -u
NTKD=$(readlink -f "${1:?usage: e2e_large_tile.sh path/to/ntkd}")
avail_kb=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)
if [ "${avail_kb:-0}" -lt $((16 * 1024 * 1024)) ]; then
  echo "skipped: needs 16 GB free ($((${avail_kb:-0} / 1024 / 1024)) GB available)"
  exit 77
fi
source "$(dirname "$(readlink -f "$0")")/e2e_lib.sh"
[ "$(df -Pk . | awk 'NR == 2 {print $4}')" -gt $((16 * 1024 * 1024)) ] || {
  echo "skipped: needs 16 GB of free disk in $W"
  exit 77
}

$PY -c "import numpy as np; np.save('x.npy', np.random.default_rng(4).standard_normal((16384, 16)))"
for name in one two; do
  printf '[data]\npath = x.npy\n[model]\narch = Dense(b_std=0.1) Relu Dense\nkernel = ntk\n[compute]\nprecision = float64\ntile = 16384\n[output]\npath = %s.ntk\nprogress = 10\n' "$name" > "$name.conf"
done
# Peak memory of each process (KiB), as /usr/bin/time reports it.
peak() { sed -n 's/^peak //p' "$1" 2>/dev/null; }

expect_rc 0 "one 16384 x 16384 float64 tile, single process" \
  timeout 900 /usr/bin/time -f "peak %M" -o one.mem "$NTKD" one.conf
echo "    single process: peak $(($(peak one.mem) / 1024)) MiB"
"$NTKD" info one.ntk | grep -E "compression" | sed 's/^/    /'
expect_rc 0 "the same tile under mpirun -np 2: a 4 GiB result in pieces" \
  timeout -k 15 900 mpirun -np 2 bash -c 'exec /usr/bin/time -f "peak %M" -o "two.mem.$OMPI_COMM_WORLD_RANK" "$0" "$1"' "$NTKD" two.conf
echo "    mpirun: rank 0 peak $(($(peak two.mem.0) / 1024)) MiB, worker peak $(($(peak two.mem.1) / 1024)) MiB"
bytes=$("$NTKD" info two.ntk | sed -n 's/^compression: *\([0-9]*\) bytes.*/\1/p')
check "... the result (${bytes:-?} bytes) was larger than one MPI message" [ "${bytes:-0}" -gt 2147483647 ]
expect_rc 0 "the store verifies" "$NTKD" verify two.ntk
"$NTKD" export one.ntk one.npy --kernel ntk >/dev/null 2>&1
"$NTKD" export two.ntk two.npy --kernel ntk >/dev/null 2>&1
check "the NTK is byte-identical to the single-process run" bash -c "[ -s one.npy ] && cmp -s one.npy two.npy"

echo "e2e_large_tile: $passed passed, $failed failed"
[ "$failed" = 0 ]
