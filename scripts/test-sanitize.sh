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
ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -E "e2e|crash"
ASAN_OPTIONS=detect_leaks=0 ctest --output-on-failure -R "e2e|crash" --timeout 1800
