"""stax.ElementwiseNumerical through ntkd's Python package: the networks of
tests/data/ref_numerical.txt (an independent 30-digit reference,
scripts/numerical_reference.py) within 1e-10 in float64 and 1e-5 in
float32, as the C tests require; fn given as numpy's functions and as
names; what is refused."""

import numpy as np
import pytest

from test_refcases import read_cases, relative_error  # puts scripts/ on the path, for nt_cases

import nt_cases  # noqa: E402
from ntkd import stax  # noqa: E402

CASES = read_cases("ref_numerical.txt")


def network(arch):
    """The case's network from its arch string: Dense(W_std=, b_std=) and
    ElementwiseNumerical(NAME), the only layers these cases use."""
    layers = []
    for name, args, kwargs in nt_cases.parse_arch(arch):
        if name == "Dense":
            layers.append(stax.Dense(512, **kwargs))
        elif name == "ElementwiseNumerical":
            layers.append(stax.ElementwiseNumerical(*args, **kwargs))
        else:
            raise ValueError(f"unexpected layer {name} in {arch}")
    return stax.serial(*layers)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
@pytest.mark.parametrize("dtype,bound", [(np.float64, 1e-10), (np.float32, 1e-5)])
def test_case(case, dtype, bound):
    _, _, kernel_fn = network(case["arch"])
    assert "ElementwiseNumerical(" in kernel_fn.arch
    k = kernel_fn(case["x"].astype(dtype), None, ("nngp", "ntk"))
    for name, got in (("nngp", k.nngp), ("ntk", k.ntk)):
        err = relative_error(got.astype(np.float64), case[name])
        assert err < bound, f"{case['name']} {name} {np.dtype(dtype).name}: relative error {err:.3g}"


def test_numpy_functions_and_names():
    x = np.random.default_rng(3).standard_normal((5, 4))
    by_fn = stax.serial(stax.Dense(8), stax.ElementwiseNumerical(np.tanh, deg=25), stax.Dense(1))[2]
    by_name = stax.serial(stax.Dense(8), stax.ElementwiseNumerical("tanh"), stax.Dense(1))[2]
    a, b = by_fn(x, None, "ntk"), by_name(x, None, "ntk")
    assert np.array_equal(a, b)
    # a closed form: jnp.sin / np.sin is Sin, exactly
    closed = stax.serial(stax.Dense(8), stax.ElementwiseNumerical(np.sin, 9), stax.Dense(1))[2]
    sin = stax.serial(stax.Dense(8), stax.Sin(), stax.Dense(1))[2]
    assert np.array_equal(closed(x, None, "nngp"), sin(x, None, "nngp"))


def test_refused():
    def tanh(v):  # a function of the user's own, whatever its name
        return v ** 3
    with pytest.raises(NotImplementedError, match="named functions only"):
        stax.ElementwiseNumerical(tanh, 9)
    with pytest.raises(NotImplementedError, match="named functions only"):
        stax.ElementwiseNumerical(lambda v: v, 9)
    with pytest.raises(NotImplementedError, match="df must be None"):
        stax.ElementwiseNumerical(np.tanh, 9, df=np.cos)
    with pytest.raises(ValueError):
        stax.ElementwiseNumerical(np.tanh, 0)


def test_wrapper_with_a_library_name_refused():
    # jax.grad(jnp.tanh) and jnp.vectorize(jax.grad(jnp.tanh)) carry the name
    # and module of jnp.tanh (functools.wraps): stax computes the kernel of
    # the derivative, ntkd once computed tanh's (NNGP 0.48 in stax, -0.012
    # in ntkd). functools.wraps of math's and numpy's functions does the same.
    import functools
    import math

    @functools.wraps(math.tanh)
    def dtanh(v):
        return 1 - math.tanh(v) ** 2
    assert dtanh.__name__ == "tanh" and dtanh.__module__ == "math"
    with pytest.raises(NotImplementedError, match="named functions only"):
        stax.ElementwiseNumerical(dtanh, 9)
    dsin = functools.wraps(np.sin)(np.vectorize(np.cos))
    with pytest.raises(NotImplementedError, match="named functions only"):
        stax.ElementwiseNumerical(dsin, 9)
    for fn in (math.tanh, np.tanh, np.abs, np.absolute, math.erf, "erf"):  # the libraries' own: computed
        stax.ElementwiseNumerical(fn, 9)


def test_every_case_read():
    assert len(CASES) >= 10
