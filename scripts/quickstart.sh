#!/usr/bin/env bash
# Install what is missing, build, and compute a real kernel: the 3-layer
# ReLU NTK of the first 10 000 Fashion-MNIST training images, under mpirun;
# then go from images to test accuracy: the same kernel over 10 000 train
# and 2 000 test images and a kernel regression (docs/SOLVE.md).
set -euo pipefail
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
echo "A block of that store from Python (python/ntkd_store), no export: README.md's example, run as is"
sed -n '/^## From Python/,/^## /p' README.md | awk '/^```python/ {f = 1; next} /^```/ {f = 0} f' > out/readme_python.py
grep -q ntkd_store out/readme_python.py   # the example is there (set -e stops the quickstart if not)
PYTHONPATH=python /usr/bin/python3 out/readme_python.py

cat <<MSG

The 10 000 x 10 000 kernel took $(printf '%.1f' "$(echo "$end - $start" | bc -l)") s with $ranks ranks.
  store (checkpoint, all tiles): out/fc.ntk       (rerun the mpirun line to resume a stopped job)
  NTK as .npy:                   out/fc_ntk.npy
  test predictions:              out/fc-fashion-solve-{nngp,ntk}-ridge*.npy (accuracy table above)
Load it in Python:
  import numpy; K = numpy.load('out/fc_ntk.npy')
Or read any block of a store without exporting (pip install ./python, or PYTHONPATH=python):
  import ntkd_store; K = ntkd_store.open('out/fc-fashion-solve.ntk')['ntk']; B = K[10000:, :10000]
MSG
