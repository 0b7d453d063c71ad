#!/usr/bin/env bash
# Build with AddressSanitizer + UndefinedBehaviorSanitizer into
# build-sanitize/ and run the whole test suite there. Leak checking is on for
# the unit tests and off for the end-to-end tests: Open MPI keeps
# allocations until exit in plugins it has unloaded by then, which cannot be
# suppressed by name.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build-sanitize -DCMAKE_BUILD_TYPE=Debug -DNTKD_SANITIZE=ON -DNTKD_CUDA=OFF >/dev/null
cmake --build build-sanitize -j "$(nproc)"
source scripts/env.sh
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
cd build-sanitize
# The binary's tests (they run mpirun) without leak checking; large_tile is
# a memory-scale test (4 GiB in one tile), not one for the sanitizers.
binary="e2e|crash|trust|docs_ini|large_tile"
ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -E "$binary"
# A debug build is ~10x slower: trust.sh's racing jobs get fewer layers.
ASAN_OPTIONS=detect_leaks=0 NTKD_TRUST_DEPTH=300 ctest --output-on-failure -R "$binary" -E large_tile --timeout 1800
