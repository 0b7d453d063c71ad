#!/usr/bin/env bash
# The library's calls in a loop under valgrind (issue 27: "1 000 calls in a
# loop leak nothing"): test_lib's `leak` case (networks made and freed,
# FC and CNN blocks with both kernels, a bad architecture, shapes that
# disagree, cancelled calls, a store opened, read and closed), each round
# checked for definite and indirect leaks and memory errors.
# The sanitizer stage (scripts/test-sanitize.sh) runs the same case under
# LeakSanitizer; this is the check for a build without ASan.
# Usage: scripts/leak-check.sh [BUILD_DIR [ROUNDS]]  (default build, 1000;
# ~30 s a 100 rounds on a 2-core VM). Exit 1 on a leak or an error.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(readlink -f "${1:-$SRC/build}")
ROUNDS=${2:-1000}
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "leak-check: ROUNDS must be a whole number >= 1, not '$ROUNDS'" >&2; exit 2; }
[ -d "$BUILD" ] || { echo "leak-check: $BUILD is not a build folder" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "leak-check: valgrind is not installed (apt-get install valgrind)"; exit 1; }
W=$(mktemp -d "${TMPDIR:-/tmp}/ntkd-leak-XXXXXX")
trap 'rm -rf "$W"' EXIT
source "$SRC/scripts/env.sh"
bash "$SRC/tests/lib_store.sh" "$BUILD/ntkd" "$W"
t0=$(date +%s)
CK_FORK=no CK_RUN_CASE=leak OPENBLAS_NUM_THREADS=1 NTKD_TEST_STORE="$W/s.ntk" NTKD_TEST_ROUNDS="$ROUNDS" \
  valgrind -q --leak-check=full --errors-for-leak-kinds=definite,indirect --show-leak-kinds=definite,indirect \
  --error-exitcode=1 "$BUILD/tests/test_lib"
echo "leak-check: $ROUNDS rounds under valgrind, no leak, no error ($(($(date +%s) - t0)) s)"
