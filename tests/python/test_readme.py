"""neural-tangents' README examples with `from ntkd import stax` as the only
change (tests/python/nt_readme.py) against neural-tangents' own float64
kernels (tests/data/ref_readme.npz, scripts/nt_reference.py --only readme):
x1 against x2, x2 = None, every `get` form, the README WideResNet."""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nt_readme  # noqa: E402
from ntkd import stax  # noqa: E402

DATA = os.environ.get("NTKD_TEST_DATA", os.path.join(os.path.dirname(__file__), "..", "data"))


@pytest.fixture(scope="module")
def results():
    ref = np.load(os.path.join(DATA, "ref_readme.npz"))
    x = {k[3:]: ref[k] for k in ref.files if k.startswith("in_")}
    assert x.keys() == nt_readme.inputs().keys()
    for k, v in nt_readme.inputs().items():  # the same inputs as the reference's
        assert np.array_equal(v, x[k]), k
    return ref, nt_readme.examples(stax, x)


NAMES = ["intro_nngp", "intro_ntk", "intro_both_nngp", "intro_both_ntk", "intro_rev_0", "intro_rev_1",
         "intro_none_nngp", "intro_none_ntk", "intro_train_train", "intro_test_train", "wrn_nngp", "wrn_ntk",
         "wrn_self"]


@pytest.mark.parametrize("name", NAMES)
def test_example(results, name):
    ref, got = results
    want = ref[name]
    assert got[name].shape == want.shape
    scale = np.max(np.abs(want))
    err = np.max(np.abs(got[name] - want)) / scale
    assert err < 1e-10, f"{name}: relative error {err:.3g}"


def test_every_result_checked(results):
    ref, got = results
    assert sorted(got) == sorted(NAMES) == sorted(k for k in ref.files if not k.startswith("in_"))
