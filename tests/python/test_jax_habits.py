"""What neural-tangents code does with what it gets back, taken by ntkd's
results: JAX's block_until_ready() (neural-tangents' examples/infinite_fcn.py
and its notebooks time with it) on kernels and predictions, and nt.Kernel
(type hints, isinstance). The results stay numpy arrays."""

import pickle

import numpy as np
import pytest

import ntkd as nt
from ntkd import stax

rng = np.random.default_rng(3)
X_TRAIN, X_TEST = rng.standard_normal((12, 5)), rng.standard_normal((4, 5))
Y_TRAIN = np.eye(3)[rng.integers(0, 3, 12)]
_, _, KERNEL_FN = stax.serial(stax.Dense(64, W_std=1.5, b_std=0.05), stax.Relu(), stax.Dense(1, W_std=1.5))


def ready_arrays(tree):
    """Every array of a result (nested tuples and namedtuples): each an np.ndarray whose
    block_until_ready() returns itself."""
    leaves = [tree] if isinstance(tree, np.ndarray) else [v for t in tree for v in ready_arrays(t)]
    for a in leaves:
        assert isinstance(a, np.ndarray)
        assert a.block_until_ready() is a
    return leaves


@pytest.mark.parametrize("get", ["ntk", ("nngp", "ntk"), None])
def test_kernels_take_block_until_ready(get):
    k = KERNEL_FN(X_TRAIN, X_TEST, get)
    ready_arrays(k)
    batched = nt.batch(KERNEL_FN, batch_size=4, device_count=-1, store_on_device=False)
    for a, b in zip(ready_arrays(batched(X_TEST, None, get)), ready_arrays(KERNEL_FN(X_TEST, None, get))):
        assert np.array_equal(a, b)


def test_predictions_take_block_until_ready():
    """neural-tangents' examples/infinite_fcn.py, the import changed."""
    predict_fn = nt.predict.gradient_descent_mse_ensemble(KERNEL_FN, X_TRAIN, Y_TRAIN, diag_reg=1e-3)
    fx_nngp, fx_ntk = predict_fn(x_test=X_TEST, get=("nngp", "ntk"))
    fx_nngp.block_until_ready()
    fx_ntk.block_until_ready()
    ready_arrays(predict_fn(x_test=X_TEST, get="ntk", compute_cov=True))  # a Gaussian (mean, covariance)
    ready_arrays(predict_fn(t=[1.0, 10.0], x_test=X_TEST, get=("nngp", "ntk")))
    k = KERNEL_FN(X_TRAIN, None, "ntk")
    kt = KERNEL_FN(X_TEST, X_TRAIN, "ntk")
    ready_arrays(nt.predict.gp_inference(k, Y_TRAIN, diag_reg=1e-3)("ntk", kt))
    ready_arrays(nt.predict.gradient_descent_mse(k, Y_TRAIN)(t=5.0, fx_train_0=0.0, fx_test_0=0.0, k_test_train=kt))

    def grad_loss(f, y):
        return (f - y) / f.size
    ready_arrays(nt.predict.gradient_descent(None, k, Y_TRAIN, grad_loss=grad_loss)(
        2.0, np.zeros_like(Y_TRAIN), np.zeros((4, 3)), kt))


def test_what_is_computed_from_results_is_plain_numpy():
    """Only the results themselves carry block_until_ready(): a reduction is a numpy scalar
    (round(), json, hash take it), an operation a plain ndarray, and a result prints as one."""
    k = KERNEL_FN(X_TRAIN, None, "ntk")
    for m in (k.max(), np.max(k), k.sum(), k[0, 0], k.trace()):
        assert type(m) is np.float64, type(m)
    assert round(k.max(), 2) == round(float(k.max()), 2)
    for a in (k + 1, k @ k, np.exp(k), k.mean(axis=0), np.linalg.solve(k + np.eye(len(k)), np.ones(len(k)))):
        assert type(a) is np.ndarray, type(a)
    assert repr(k) == repr(np.asarray(k)) and str(k) == str(np.asarray(k))
    k32 = KERNEL_FN(X_TRAIN.astype(np.float32), None, "ntk")
    assert type(k32.max()) is np.float32


def test_in_place_arithmetic_keeps_the_result():
    """`k += reg * np.eye(n)` then `k.block_until_ready()` (JAX allows it): the name still
    holds the result, and np.add(k, 1, out=k) returns k, as for any ndarray (it returned a
    plain view, and the call after += raised AttributeError)."""
    k = KERNEL_FN(X_TRAIN, None, "ntk")
    before = np.array(k)
    k += 1e-3 * np.eye(len(k))
    assert k.block_until_ready() is k
    np.testing.assert_array_equal(np.asarray(k), before + 1e-3 * np.eye(len(k)))
    c = k.copy()
    assert np.add(c, 1.0, out=c) is c and type(c) is type(k)
    assert type(k + 1) is np.ndarray


def test_results_are_numpy_and_pickle_as_numpy():
    k = KERNEL_FN(X_TRAIN, None, "ntk")
    assert np.array_equal(np.asarray(k), k) and type(np.asarray(k)) is np.ndarray
    back = pickle.loads(pickle.dumps(k))
    assert type(back) is np.ndarray and np.array_equal(back, k)  # loads where ntkd is not installed


def test_nt_kernel_is_what_get_none_returns():
    assert isinstance(KERNEL_FN(X_TRAIN, None, None), nt.Kernel)
    assert not isinstance(KERNEL_FN(X_TRAIN, None, ("nngp", "ntk")), nt.Kernel)  # neural-tangents' namedtuple
