#!/usr/bin/env bash
# The store damage corpus (issue 25, items 3-5): small stores built with
# ntkd, finished, killed at random moments, read while a job writes them,
# damaged, their index forged, repaired then interrupted; on each, `ntkd
# verify` / `ntkd export` and the Python reader (python/ntkd_store) must
# agree, and give the verdicts the issue asks for; memory and time follow
# the store (a 4 GB sparse index, a header of 1.7e10 tiles). The work is in
# tests/store_corpus.py. Usage: tests/store_corpus.sh path/to/ntkd [SEED]
set -u
NTKD=$(readlink -f "${1:?usage: store_corpus.sh path/to/ntkd [SEED]}")
SEED=${2:-$$}
source "$(dirname "$(readlink -f "$0")")/e2e_lib.sh"
export OPENBLAS_NUM_THREADS=1
PYTHONPATH="$SRC/python${PYTHONPATH:+:$PYTHONPATH}" $PY "$SRC/tests/store_corpus.py" "$NTKD" "$SEED"
