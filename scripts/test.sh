#!/usr/bin/env bash
# Install what is missing, build, run every test (ctest: unit tests with
# check, and the end-to-end tests under mpirun).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
source scripts/env.sh
cd build
ctest --output-on-failure --timeout 1200
