#!/usr/bin/env bash
# pytest on tests/python (ntkd.batch, ntkd.predict, ntkd.store) against a build.
# Usage: tests/python/run.sh path/to/ntkd path/to/libntkd.so [pytest arguments]
# Exit 77 (skipped) only when pytest is missing (python3-pytest: scripts/install-deps.sh).
set -u
PY=/usr/bin/python3
SRC=$(dirname "$(dirname "$(dirname "$(readlink -f "$0")")")")
if ! $PY -c 'import pytest' 2>/dev/null; then
  echo "pytest is not installed (Debian: python3-pytest, scripts/install-deps.sh): skipped"
  exit 77
fi
export NTKD_PROGRAM=$(readlink -f "${1:?usage: run.sh path/to/ntkd path/to/libntkd.so}")
export NTKD_LIBRARY=$(readlink -f "${2:?usage: run.sh path/to/ntkd path/to/libntkd.so}")
export PYTHONPATH="$SRC/python${PYTHONPATH:+:$PYTHONPATH}"
# libntkd switches OpenBLAS to the program's kernels itself when loaded (include/ntkd.h):
# no OPENBLAS_CORETYPE here, so that the tests see what a user gets.
shift 2
cd "$SRC/tests/python" || exit 1
# Arguments (test files, -k ...) replace the default: every test here.
[ $# -gt 0 ] || set -- "$SRC/tests/python"
exec $PY -m pytest -p no:cacheprovider -q "$@"
