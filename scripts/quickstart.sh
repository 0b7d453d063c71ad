#!/usr/bin/env bash
# Install what is missing, build, and compute a real kernel: the 3-layer
# ReLU NTK of the first 10 000 Fashion-MNIST training images, under mpirun;
# then go from images to test accuracy: the same kernel over 10 000 train
# and 2 000 test images and a kernel regression (docs/SOLVE.md).
set -euo pipefail
source "$(dirname "$0")/args.sh"
script_args 0 -- "$@"
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh >/dev/null
source scripts/env.sh
ranks=$(( $(nproc) + 1 ))   # one coordinator + one worker per core
rm -f out/fc.ntk
start=$(date +%s.%N)
mpirun -np "$ranks" build/ntkd configs/fc-fashion.conf
end=$(date +%s.%N)
build/ntkd info out/fc.ntk
build/ntkd export out/fc.ntk out/fc_ntk.npy --kernel ntk
/usr/bin/python3 -c "
import numpy
K = numpy.load('out/fc_ntk.npy')
print('numpy sees', K.shape, K.dtype, 'symmetric:', bool((K == K.T).all()))"
echo
echo "Kernel regression: 10 000 train, 2 000 test images (configs/fc-fashion-solve.conf)"
rm -f out/fc-fashion-solve.ntk
mpirun -np "$ranks" build/ntkd configs/fc-fashion-solve.conf
echo
echo "A test x train block of that store from Python (python/ntkd_store), without exporting it:"
PYTHONPATH=python /usr/bin/python3 -c "
import ntkd_store
with ntkd_store.open('out/fc-fashion-solve.ntk') as S:
    B = S['ntk'][10000:, :10000]
    print(S.shape, S.kernels, S.precision, 'complete:', S.complete, '- test x train block', B.shape, B.dtype)"
echo
echo "README.md's \"From Python\" examples, run as they stand (in out/readme-python/):"
sed -n '/^## From Python/,/^## /p' README.md | awk '/^```python/ {f = 1; next} /^```/ {f = 0} f' > out/readme_python.py
grep -q 'from ntkd import stax' out/readme_python.py   # the examples are there (set -e stops the quickstart if not)
rm -rf out/readme-python && mkdir -p out/readme-python
# The package over this build (pip install ./python installs the same), with the
# OpenBLAS kernels the program picks (docs/CLI.md, Environment), as tests/python/run.sh.
core=$(build/ntkd --version | sed -n 's/^OpenBLAS kernels: //p')
[ -n "${OPENBLAS_CORETYPE:-}" ] || [ -z "$core" ] || export OPENBLAS_CORETYPE=$core
(cd out/readme-python && NTKD_LIBRARY="$OLDPWD/build/libntkd.so" NTKD_PROGRAM="$OLDPWD/build/ntkd" \
   PYTHONPATH="$OLDPWD/python" /usr/bin/python3 ../readme_python.py)

cat <<MSG

The 10 000 x 10 000 kernel took $(printf '%.1f' "$(echo "$end - $start" | bc -l)") s with $ranks ranks.
  store (checkpoint, all tiles): out/fc.ntk       (rerun the mpirun line to resume a stopped job)
  NTK as .npy:                   out/fc_ntk.npy
  test predictions:              out/fc-fashion-solve-{nngp,ntk}-ridge*.npy (accuracy table above)
Load it in Python:
  import numpy; K = numpy.load('out/fc_ntk.npy')
Or read any block of a store without exporting (pip install ./python, or PYTHONPATH=python):
  import ntkd_store; K = ntkd_store.open('out/fc-fashion-solve.ntk')['ntk']; B = K[10000:, :10000]
From Python, neural-tangents' stax and kernel_fn, ntkd.batch, ntkd.predict: README.md "From Python"
MSG
