#!/usr/bin/env bash
# scripts/side_by_side.py (issue 27): every command docs/PERFORMANCE.md shows for it
# must parse (--parse-only), then the quick run: ntkd.stax against neural-tangents in
# float64 on tiny cases, each tool in its own process, and the pool's kernels against
# mpirun -np 3's store, bit for bit. Exit 77 (skipped) without neural-tangents' pinned
# venv /opt/ntkd-ref-venv (scripts/nt_reference.sh creates it; .ci/run does not).
#   tests/side_by_side.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: side_by_side.sh BUILD_DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# The shown commands: lines from "/usr/bin/python3 scripts/side_by_side.py" through
# their "\" continuations.
found=0
while IFS= read -r cmd; do
  found=$((found + 1))
  read -ra words <<< "$cmd"
  "${words[@]}" --parse-only || { echo "FAIL: docs/PERFORMANCE.md: $cmd"; exit 1; }
done < <(awk '/^\/usr\/bin\/python3 scripts\/side_by_side\.py/ {c = $0; while (c ~ /\\$/) {sub(/\\$/, "", c); getline l; c = c l} print c}' docs/PERFORMANCE.md)
[ "$found" -ge 3 ] || { echo "FAIL: expected the side_by_side.py commands in docs/PERFORMANCE.md, found $found"; exit 1; }
echo "docs/PERFORMANCE.md: $found side_by_side.py commands parse"
exec /usr/bin/python3 scripts/side_by_side.py --quick --pool-n fc=64 --pool-n cnn=8 --build "$build"
