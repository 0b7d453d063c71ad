#!/usr/bin/env bash
# Install what is missing, build, and compute a real kernel: the 3-layer
# ReLU NTK of the first 10 000 Fashion-MNIST training images, under mpirun.
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
cat <<MSG

Done in $(printf '%.1f' "$(echo "$end - $start" | bc -l)") s with $ranks ranks.
  store (checkpoint, all tiles): out/fc.ntk       (rerun the mpirun line to resume a stopped job)
  NTK as .npy:                   out/fc_ntk.npy
Load it in Python:
  import numpy; K = numpy.load('out/fc_ntk.npy')
MSG
