#!/usr/bin/env bash
# Install what is missing, build, run the tests (ctest: unit tests with
# check, the end-to-end tests under mpirun, the Python package's tests),
# two at a time. The long runs (ctest label `long`: the stress tests, the
# 4 GiB tile, the GPU scripts' CUDA builds, the cg solve at scale) are a
# stage of their own: scripts/test.sh --long runs only them (.ci/run runs
# both). Prints how long it took.
set -euo pipefail
cd "$(dirname "$0")/.."
select=(-LE long) what="the tests"
case "${1:-}|$#" in
  "|0") ;;
  "--long|1") select=(-L long) what="the long tests" ;;
  *) echo "test.sh: usage: scripts/test.sh [--long] (not: $*)" >&2; exit 2 ;;
esac
scripts/install-deps.sh
scripts/build.sh
source scripts/env.sh
cd build
start=$SECONDS
ctest --output-on-failure --timeout 1200 -j "${NTKD_TEST_JOBS:-2}" "${select[@]}"
echo "test.sh: $what took $((SECONDS - start)) s"
