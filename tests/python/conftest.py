"""Shared by the pytest tests of the Python package (tests/python/run.sh runs them
against a build: NTKD_PROGRAM, NTKD_LIBRARY and PYTHONPATH point at it)."""

import os
import re
import subprocess

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))


def last_to_compute(log_path):
    """(to compute, total) of the last run in a store's log (ntkd: K of N tiles to compute)."""
    found = re.findall(r"^ntkd: (\d+) of (\d+) tiles to compute", open(log_path).read(), re.M)
    assert found, f"no 'tiles to compute' line in {log_path}"
    return tuple(map(int, found[-1]))


def program_blas_core():
    out = subprocess.run([os.environ["NTKD_PROGRAM"], "--version"], capture_output=True, text=True).stdout
    m = re.search(r"^OpenBLAS kernels: (\S+)", out, re.M)
    return m.group(1) if m else None


def inprocess_blas_core():
    """The OpenBLAS kernels this process computes with (after libntkd was loaded)."""
    import ctypes
    from ntkd import _lib  # noqa: F401  (loads libntkd)
    blas = ctypes.CDLL("libopenblas.so.0")
    blas.openblas_get_corename.restype = ctypes.c_char_p
    name = blas.openblas_get_corename()
    return name.decode() if name else None


@pytest.fixture(scope="session")
def rng():
    return np.random.default_rng(27)
