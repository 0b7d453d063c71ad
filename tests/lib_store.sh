#!/usr/bin/env bash
# A small finished store for test_lib's store reads (NTKD_TEST_STORE): an
# FC job of 40 samples, tile 16. Usage: tests/lib_store.sh NTKD DIR
# (writes DIR/s.ntk). Run by ctest before `lib` (a fixture).
set -eu
ntkd=$(readlink -f "$1")
mkdir -p "$2"
cd "$2"
rm -f s.ntk s.ntk.* x.npy
/usr/bin/python3 -c "
import numpy as np
np.save('x.npy', np.random.default_rng(27).standard_normal((40, 6)))"
printf '[data]\npath = x.npy\n[model]\narch = Dense Relu Dense\nkernel = ntk\n[compute]\ntile = 16\n[output]\npath = s.ntk\n' > s.conf
"$ntkd" s.conf >/dev/null 2>s.log || { cat s.log; exit 1; }
