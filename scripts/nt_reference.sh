#!/usr/bin/env bash
# Generate neural-tangents reference kernels for ntkd's tests.
#
# Creates (once) a private virtualenv with exactly pinned versions of
# neural-tangents and its dependencies, then runs scripts/nt_reference.py
# with that venv's python, passing all arguments through.
#
#   scripts/nt_reference.sh                 # writes the five files of tests/data:
#                                           # ref_fc.txt, ref_cnn.txt, ref_solve.txt,
#                                           # ref_readme.npz and ref_graph.txt
#   scripts/nt_reference.sh --only cnn      # only tests/data/ref_cnn.txt
#   scripts/nt_reference.sh --only graph    # only tests/data/ref_graph.txt
#   scripts/nt_reference.sh --only fc --fc-out /tmp/fc.txt   # one file elsewhere
#   (each file has its --X-out: --fc-out, --cnn-out, --solve-out,
#   --readme-out, --graph-out; without --only all five are written)
#
# Environment:
#   NTKD_REF_VENV   venv location (default /opt/ntkd-ref-venv)
#   NTKD_REF_PYTHON interpreter used to create the venv (default python3;
#                   must be CPython 3.11 for these pins)
#
# Pin notes: neural-tangents 0.6.5 imports TensorFlow and tf2jax at import
# time (neural_tangents.experimental), and both it and tf2jax declare a
# dependency on the full `tensorflow` package (tensorflow-cpu does not satisfy
# it). jax/jaxlib 0.4.23 is the last release pair that still has
# jax.random.KeyArray and predates the numpy-2 era; tensorflow 2.15.1 needs
# numpy < 2. Every package of the resolved set is pinned so the environment is
# reproducible.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${NTKD_REF_VENV:-/opt/ntkd-ref-venv}"
base_python="${NTKD_REF_PYTHON:-python3}"

pins=(
  neural-tangents==0.6.5
  jax==0.4.23
  jaxlib==0.4.23
  numpy==1.26.4
  scipy==1.12.0   # jax 0.4.23 wraps scipy.linalg.tril (nt.predict), gone in scipy 1.13
  ml-dtypes==0.3.2
  opt_einsum==3.4.0
  frozendict==2.4.0
  tensorflow==2.15.1
  tensorflow-estimator==2.15.0
  tensorflow-io-gcs-filesystem==0.37.1
  keras==2.15.0
  tensorboard==2.15.2
  tensorboard-data-server==0.7.2
  tf2jax==0.3.6
  dm-tree==0.1.10
  absl-py==2.5.1
  astunparse==1.6.3
  flatbuffers==25.12.19
  gast==0.7.0
  google-pasta==0.2.0
  grpcio==1.85.3
  h5py==3.16.0
  libclang==18.1.1
  protobuf==4.25.9
  six==1.17.0
  termcolor==3.3.0
  typing_extensions==4.16.0
  wrapt==1.14.2
  attrs==26.1.0
  google-auth==2.63.0
  google-auth-oauthlib==1.5.0
  Markdown==3.11.3
  MarkupSafe==3.0.4
  Werkzeug==3.1.9
  requests==2.34.2
  requests-oauthlib==2.0.0
  oauthlib==4.0.1
  certifi==2026.10.19.post1
  charset-normalizer==3.5.3
  idna==3.20
  urllib3==2.8.0
  cryptography==50.0.2
  cffi==2.1.1
  pycparser==3.12
  pyasn1==0.6.5
  pyasn1_modules==0.4.2
  packaging==26.4
  mpmath==1.3.0   # scripts/numerical_reference.py: Gauss-Legendre nodes for the ElementwiseNumerical reference
  gmpy2==2.3.2    # scripts/numerical_reference.py: its MPFR arithmetic (113/120-bit nested quadrature)
)

# A stamp file records the exact pin set; the venv is (re)built only when the
# stamp is missing or differs, so repeated runs are cheap and idempotent.
stamp="$venv/.ntkd-ref-pins"
want="$(printf '%s\n' "${pins[@]}")"

if [[ ! -x "$venv/bin/python" ]] || [[ ! -f "$stamp" ]] || [[ "$(cat "$stamp")" != "$want" ]]; then
  echo "nt_reference.sh: setting up venv at $venv" >&2
  if [[ ! -x "$venv/bin/python" ]]; then
    "$base_python" -m venv "$venv"
  fi
  "$venv/bin/python" -m pip install --disable-pip-version-check -q "${pins[@]}"
  printf '%s\n' "$want" > "$stamp"
fi

export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-3}"
export JAX_PLATFORMS="${JAX_PLATFORMS:-cpu}"
cd "$here/.."
exec "$venv/bin/python" "$here/nt_reference.py" "$@"
