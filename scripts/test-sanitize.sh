#!/usr/bin/env bash
# Build with AddressSanitizer + UndefinedBehaviorSanitizer into
# build-sanitize/ and run the test suite there (what it leaves out, and
# why, is said below). Leak checking is on for
# the unit tests and off for the end-to-end tests: Open MPI keeps
# allocations until exit in plugins it has unloaded by then, which cannot be
# suppressed by name.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build-sanitize -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNTKD_SANITIZE=ON -DNTKD_CUDA=OFF >/dev/null
cmake --build build-sanitize -j "$(nproc)"
source scripts/env.sh
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
cd build-sanitize
start=$SECONDS
# Every test but the binary's end-to-end runs, with leak checking: the
# modules' unit tests and the library's (test_lib: 1 000 rounds of calls
# that must leak nothing). The Python tests load libntkd into python3,
# where ASan's run-time would have to be preloaded: the library's C test
# stands for them here (side_by_side too runs Python over libntkd). Nor
# `install`: it links a user's program, built without the sanitizers,
# against the installed library (the normal build runs it).
binary="e2e|crash|trust|docs_ini|large_tile|attack25|store_corpus|gpu_scripts|bench_ridges"
ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j 2 -E "$binary|^python$|^side_by_side$|^install$"
# The binary's tests, without leak checking. Optimised (-O2 -g, as the
# release build): a debug build with ASan computed ~100x slower than the
# release build and made this stage the longest of CI (e2e.sh alone 19 min);
# optimised, ASan costs a few times. Still, trust.sh's racing jobs and
# e2e_hangs's networks get fewer layers (e2e_hangs also leaves out its two
# scenarios sized by this machine's speed), and trust.sh runs 4 racing
# pairs and 15 damage trials (the normal suite runs 20 and 50). Not here:
# the 4 GiB tile (a memory-scale test), the GPU scripts (no CUDA in this
# build), and the two Python-driven attack corpora (attack25, store_corpus:
# checks of results, run by the normal build's long stage; scripts/fuzz.sh
# fuzzes the store reader under ASan). bench_ridges runs a kernel job
# under mpirun, so it is one of the binary's tests.
ASAN_OPTIONS=detect_leaks=0 NTKD_TRUST_DEPTH=20 NTKD_TRUST_PAIRS=4 NTKD_TRUST_TRIALS=15 NTKD_TEST_SLOW=100 \
  ctest --output-on-failure -j 2 -R "$binary" -E "large_tile|attack25|store_corpus|gpu_scripts" --timeout 1800
echo "test-sanitize.sh: took $((SECONDS - start)) s"
