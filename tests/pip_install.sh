#!/usr/bin/env bash
# `pip install ./python`, as README.md says, into a fresh venv, then the
# installed package used as a user would: from another folder, with no
# NTKD_LIBRARY, NTKD_PROGRAM or PYTHONPATH. It must find its own libntkd
# and ntkd program, compute neural-tangents' README examples to 1e-10
# (tests/python/test_readme.py against tests/data/ref_readme.npz), write a
# store with ntkd.batch through its bundled program and read it back equal
# to kernel_fn, and keep ntkd_store importable.
# The build backend (scikit-build-core and what it needs) is downloaded from
# PyPI once, first: without a route to PyPI the test is skipped (exit 77),
# saying so; with it xxhash, which the package needs at >= 2.0 and Debian's
# python3-xxhash 3.2 declares as version 0.0.0, and ninja, which
# scikit-build-core asks for where no ninja is on the PATH (install-deps.sh
# installs none). pip then installs from that
# download only (--no-index: the build isolation's backend, xxhash, and the
# system's numpy and zstandard), so a PyPI that fails later cannot fail it.
# The package builds libntkd and ntkd from this tree (about 2 minutes on two
# cores). Usage: tests/pip_install.sh
set -u
SRC=$(dirname "$(dirname "$(readlink -f "$0")")")
PY=/usr/bin/python3
W=$(mktemp -d /tmp/ntkd-pip.XXXXXX)
trap 'rm -rf "$W" "$SRC/python/build"' EXIT
unset PYTHONPATH NTKD_LIBRARY NTKD_PROGRAM
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 OPENBLAS_NUM_THREADS=1

$PY -m venv --system-site-packages "$W/venv" || { echo "FAILED: python3 -m venv (python3-venv)"; exit 1; }
if ! timeout 300 "$W/venv/bin/pip" download -d "$W/dl" "scikit-build-core>=0.8" "xxhash>=2.0" ninja >"$W/dl.log" 2>&1; then
  echo "skipped: PyPI cannot be reached for the build backend (scikit-build-core):"
  tail -2 "$W/dl.log"
  exit 77
fi
start=$SECONDS
if ! "$W/venv/bin/pip" install --no-index --find-links "$W/dl" "$SRC/python" >"$W/pip.log" 2>&1; then
  echo "FAILED: pip install ./python"; tail -20 "$W/pip.log"; exit 1
fi
echo "ok: pip install ./python ($((SECONDS - start)) s)"

cd "$W" || exit 1
"$W/venv/bin/python" - <<'PYEOF' || exit 1
import os, subprocess, numpy as np
import ntkd, ntkd_store
from ntkd import stax
venv = os.path.realpath(os.environ.get("VIRTUAL_ENV", "venv"))
pkg = os.path.dirname(ntkd.__file__)
assert "/venv/" in pkg and "/venv/" in ntkd_store.__file__, (pkg, ntkd_store.__file__)
prog = os.path.join(pkg, "bin", "ntkd")
out = subprocess.run([prog, "--version"], capture_output=True, text=True, check=True).stdout
print("ok: the package's own program:", out.splitlines()[0])
assert os.path.exists(os.path.join(pkg, "lib", "libntkd.so.0"))
x = np.random.default_rng(3).standard_normal((30, 6))
_, _, kernel_fn = stax.serial(stax.Dense(64, W_std=1.5, b_std=0.1), stax.Relu(), stax.Dense(1))
k = kernel_fn(x, None, ("nngp", "ntk"))
S = ntkd.batch(kernel_fn, x, store="b.ntk", ranks=1, progress=False)
for name in ("nngp", "ntk"):
    got = np.asarray(S[name][:, :])
    assert np.array_equal(got, getattr(k, name)), name
print("ok: ntkd.batch through the bundled program equals kernel_fn bit for bit (30 x 30, NNGP and NTK)")
PYEOF
NTKD_TEST_DATA="$SRC/tests/data" "$W/venv/bin/python" -m pytest -q -p no:cacheprovider \
  "$SRC/tests/python/test_readme.py" || { echo "FAILED: the README examples through the installed package"; exit 1; }
echo "ok: neural-tangents' README examples through the installed package"
