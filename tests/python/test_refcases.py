"""Every reference case of the C tests (tests/data/ref_fc.txt, ref_cnn.txt:
neural-tangents 0.6.5 in float64) through ntkd's Python package: each
network built with `from ntkd import stax` by the very calls that built it
with neural-tangents' stax (scripts/nt_cases.py), computed by kernel_fn,
against the reference within 1e-10 relative in float64 and 1e-5 in float32,
as the C tests require."""

import os
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
import nt_cases  # noqa: E402
from ntkd import stax  # noqa: E402

nt_cases.stax = stax
DATA = os.environ.get("NTKD_TEST_DATA", os.path.join(HERE, "..", "data"))


def read_cases(name):
    cases, lines = [], open(os.path.join(DATA, name)).read().split("\n")
    i = 0
    while i < len(lines):
        if not lines[i].startswith("case "):
            i += 1
            continue
        c = {"name": lines[i][5:].strip(), "arch": lines[i + 1][5:], "standard": False}
        i += 2
        if lines[i].startswith("parameterization standard"):
            c["standard"] = True
            i += 1
        shape = [int(v) for v in lines[i].split()[1:]]
        i += 1
        n = shape[0]
        for label in ("x", "pattern", "nngp", "ntk"):
            if label == "pattern" and not lines[i].startswith("pattern "):  # graph cases only (ref_graph.txt)
                continue
            if label == "pattern":  # "pattern V": V the positions the Aggregates see
                c["positions"] = int(lines[i].split()[1])
                lines[i] = label
            assert lines[i] == label, (c["name"], lines[i])
            rows = [np.array(lines[i + 1 + k].split(), dtype=np.float64) for k in range(n)]
            c[label] = np.stack(rows)
            i += 1 + n
        c["x"] = c["x"].reshape(shape)
        if "pattern" in c:
            v = c["positions"]
            c["pattern"] = c["pattern"].reshape(n, v, v)
        cases.append(c)
    return cases


SPECS = {c["name"]: c for c in nt_cases.fc_cases() + nt_cases.cnn_cases() + nt_cases.graph_cases()}
CASES = read_cases("ref_fc.txt") + read_cases("ref_cnn.txt") + read_cases("ref_graph.txt")


def relative_error(got, want):
    ok = np.isfinite(want)  # stax's own NaN diagonals (nan_diag cases) are skipped, as in the C tests
    scale = np.max(np.abs(want[ok]))  # a kernel that is 0 everywhere (the NTK after Sign): absolute
    return np.max(np.abs(got[ok] - want[ok])) / (scale if scale > 0 else 1.0)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
@pytest.mark.parametrize("dtype,bound", [(np.float64, 1e-10), (np.float32, 1e-5)])
def test_case(case, dtype, bound):
    spec = SPECS[case["name"]]
    assert spec["arch"] == case["arch"]
    assert np.array_equal(nt_cases.case_inputs(spec).reshape(case["x"].shape), case["x"])
    _, _, kernel_fn = nt_cases.build_network(spec)
    x = case["x"].astype(dtype)
    if spec.get("one_d") and "pattern" in case:  # graph cases: (N, L, C) sequences, as neural-tangents took them
        x = x.reshape(x.shape[0], x.shape[1], x.shape[3])
    if "pattern" in case:  # a graph case: stax's (N, positions, positions) pattern on both sides
        assert np.array_equal(nt_cases.case_pattern(spec), case["pattern"])
        agg = tuple(spec.get("agg", x.shape[1:-1]))  # the positions the Aggregates see
        p = case["pattern"].reshape((x.shape[0],) + agg * 2)
        k = kernel_fn(x, None, ("nngp", "ntk"), pattern=(p, p))
    else:
        k = kernel_fn(x, None, ("nngp", "ntk"))
    assert k.nngp.dtype == dtype and k.ntk.dtype == dtype
    for name, got in (("nngp", k.nngp), ("ntk", k.ntk)):
        err = relative_error(got.astype(np.float64), case[name])
        assert err < bound, f"{case['name']} {name} {np.dtype(dtype).name}: relative error {err:.3g} ({kernel_fn.arch})"


def test_every_case_read():
    assert len(CASES) == 100 + 151 + 12 and len({c["name"] for c in CASES}) == len(CASES)


def test_dropout_diagonal_follows_x1_is_x2():
    """neural-tangents scales the diagonal of Dropout (mode='train') only
    when x2 is None or equals x1 (its x1_is_x2); a cross kernel keeps the
    pair's value, and every variance after the layer is scaled either way:
    here, with Dropout last, a cross kernel's entry of a sample with itself
    is rate times the self kernel's diagonal."""
    _, _, kernel_fn = stax.serial(stax.Dense(16, W_std=1.5, b_std=0.1), stax.Relu(), stax.Dense(8), stax.Dropout(0.5))
    x = np.random.default_rng(5).standard_normal((5, 3))
    k = kernel_fn(x, None)
    for same in (x, x.copy(), x + 1e-13):
        kk = kernel_fn(x, same)
        assert np.array_equal(kk.nngp, k.nngp) and np.array_equal(kk.ntk, k.ntk)
    cross = kernel_fn(x[:3], x)
    for name in ("nngp", "ntk"):
        full, part = getattr(k, name), getattr(cross, name)
        off = ~np.eye(5, dtype=bool)[:3]
        assert np.allclose(part[off], full[:3][off], rtol=1e-13, atol=0)
        # (a computed pair of a sample with itself: the ReLU angle's rounding noise, docs/MATH.md)
        assert np.allclose(np.diag(part[:, :3]), 0.5 * np.diag(full)[:3], rtol=1e-7, atol=0)
    assert kernel_fn.arch.count("Dropout(0.5, mode='train')") == 1
    assert "Dropout" not in stax.serial(stax.Dense(4), stax.Dropout(0.5, mode="test"), stax.Dense(1))[2].arch
    with pytest.raises(ValueError):
        stax.Dropout(0.0)
    with pytest.raises(ValueError):
        stax.Dropout(0.5, mode="eval")
