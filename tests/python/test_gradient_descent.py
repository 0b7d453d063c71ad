"""ntkd.predict.gradient_descent (the dynamics of any loss, integrated) against
neural-tangents' own (tests/data/ref_predict.npz, scripts/nt_predict_reference.py), against
ntkd's closed form of the MSE loss (gradient_descent_mse), and its refusals. These run
without JAX: the losses' gradients are given as numpy functions (grad_loss=)."""

import importlib.util
import os

import numpy as np
import pytest

from ntkd import predict
from ntkd.errors import SolveError
from conftest import SRC

R = np.load(os.path.join(SRC, "tests", "data", "ref_predict.npz"))
T = R["t_grid"]
TOL = 1e-7  # the integrator's tolerances (1.4e-8 per step, JAX odeint's) against the largest output: 2e-8 seen


def close(got, want, tol=TOL):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == np.float64, (got.shape, want.shape, got.dtype)
    err = np.abs(got - want).max() / np.abs(want).max()
    assert err <= tol, err


def softmax(f):
    e = np.exp(f - f.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def cross_entropy_gradient(f, y):
    """The gradient of -mean(log_softmax(f) * y) in f."""
    return (softmax(f) * y.sum(axis=-1, keepdims=True) - y) / f.size


def logistic_gradient(f, y):
    """The gradient of mean(softplus(-sign(y) f)) in f."""
    s = np.sign(y)
    return -s / (1 + np.exp(s * f)) / f.size


def mse_gradient(f, y):
    """The gradient of 0.5 mean((f - y)^2), neural-tangents' MSE (gradient_descent_mse's)."""
    return (f - y) / f.size


def cross_entropy_fn(momentum):
    return predict.gradient_descent(None, R["k_dd_ntk"], R["y_onehot"], learning_rate=2., momentum=momentum,
                                    grad_loss=cross_entropy_gradient)


@pytest.mark.parametrize("name, momentum", [("plain", None), ("mom", 0.9)])
def test_cross_entropy_equals_neural_tangents(name, momentum):
    fn = cross_entropy_fn(momentum)
    for tname, t in (("grid", T), ("num", 7.0)):
        train, test = fn(t, R["fx_train_0"], R["fx_test_0"], R["k_td_ntk"])
        close(train, R[f"ode_{name}_{tname}_train"])
        close(test, R[f"ode_{name}_{tname}_test"])
    assert train.shape == (24, 3) and test.shape == (7, 3)


def test_test_outputs_alone_and_the_state():
    close(cross_entropy_fn(None)(T, None, R["fx_test_0"], R["k_td_ntk"]), R["ode_testonly_test"])
    s = cross_entropy_fn(0.9)(3.0, predict.ODEState(R["fx_train_0"], R["fx_test_0"], R["qx_train_0"],
                                                    R["qx_test_0"]), None, R["k_td_ntk"])
    assert isinstance(s, predict.ODEState)
    for a in ("fx_train", "fx_test", "qx_train", "qx_test"):
        close(getattr(s, a), R[f"ode_state_{a}"])
    s = cross_entropy_fn(None)(3.0, predict.ODEState(R["fx_train_0"]))
    assert s.fx_test is None and s.qx_train is None
    close(s.fx_train, cross_entropy_fn(None)(3.0, R["fx_train_0"]))


def test_vector_targets_equal_neural_tangents():
    fn = predict.gradient_descent(None, R["k_dd_nngp"], R["y_vec"], learning_rate=0.5, trace_axes=(),
                                  grad_loss=logistic_gradient)
    close(fn(T, 0., 0., R["k_td_nngp"])[1], R["ode_vec_grid_test"])


def test_mse_loss_equals_the_closed_form():
    # Independent of neural-tangents: the MSE loss's ODE has gradient_descent_mse's solution.
    y, f0, ft0 = R["y_train"], R["fx_train_0"], R["fx_test_0"]
    ode = predict.gradient_descent(None, R["k_dd_ntk"], y, learning_rate=0.5, grad_loss=mse_gradient)
    exact = predict.gradient_descent_mse(R["k_dd_ntk"], y, learning_rate=0.5)
    t = np.array([0.0, 1e-3, 2.5, 40.0, 3e3])
    for got, want in zip(ode(t, f0, ft0, R["k_td_ntk"]), exact(t, f0, ft0, R["k_td_ntk"])):
        close(got, want)
    close(ode(0.0, f0), f0, 0.0)  # t = 0: the start itself


def test_a_gradient_computed_in_place():
    # A helper's find: a grad_loss that works in place on fx (fx -= y) changed the integrator's state.
    def in_place(f, y):
        f -= y
        f /= f.size
        y *= 0  # and one that spoils its targets
        return f
    y = R["y_train"].copy()
    ode = predict.gradient_descent(None, R["k_dd_ntk"], y, learning_rate=0.5, grad_loss=in_place)
    exact = predict.gradient_descent_mse(R["k_dd_ntk"], R["y_train"], learning_rate=0.5)
    close(ode([1.0, 5.0], 0.), exact(np.array([1.0, 5.0]), 0.))
    assert np.array_equal(y, R["y_train"])


def test_neural_tangents_state_and_no_outputs():
    # neural-tangents' own ODEState (its fields, another class) is read as ntkd's; y_train of
    # shape (n, 0) gives empty outputs (it raised an internal reshape error).
    class ODEState:
        def __init__(self, fx_train=None, fx_test=None, qx_train=None, qx_test=None):
            self.fx_train, self.fx_test, self.qx_train, self.qx_test = fx_train, fx_test, qx_train, qx_test
    fn = cross_entropy_fn(0.9)
    s = fn(3.0, ODEState(R["fx_train_0"], R["fx_test_0"], R["qx_train_0"], R["qx_test_0"]), None, R["k_td_ntk"])
    assert type(s) is ODEState  # the class given
    close(s.fx_test, R["ode_state_fx_test"])
    empty = predict.gradient_descent(None, R["k_dd_ntk"], np.zeros((24, 0)), grad_loss=mse_gradient)
    train, test = empty([1.0, 2.0], 0., 0., R["k_td_ntk"])
    assert train.shape == (2, 24, 0) and test.shape == (2, 7, 0)


def test_times_in_any_order():
    fn = cross_entropy_fn(0.9)
    t = np.array([[20.0, 0.5], [3.0, 20.0]])  # unsorted, one repeated
    got = fn(t, R["fx_train_0"])
    assert got.shape == (2, 2, 24, 3)
    for i in np.ndindex(t.shape):
        close(got[i], fn(t[i], R["fx_train_0"]))
    assert np.array_equal(got[0, 0], got[1, 1])


def test_the_loss_gradient_steers():
    # A mutation check: the same targets under another loss (a sign flipped: ascent) are far off.
    fn = predict.gradient_descent(None, R["k_dd_ntk"], R["y_onehot"], learning_rate=2.,
                                  grad_loss=lambda f, y: -cross_entropy_gradient(f, y))
    got = fn(7.0, R["fx_train_0"])
    assert np.abs(got - R["ode_plain_num_train"]).max() > 0.1


def test_refusals():
    fn = cross_entropy_fn(None)
    f0 = R["fx_train_0"]
    for t in (None, np.inf, [1.0, np.inf]):
        with pytest.raises(ValueError, match="integrates to finite times"):
            fn(t, f0)
    with pytest.raises(ValueError, match="negative"):
        fn(-1.0, f0)
    with pytest.raises(ValueError, match="Both `fx_train_0` and `fx_test_0` are `None`"):
        fn(1.0, None)
    with pytest.raises(ValueError, match="please provide `k_test_train`"):
        fn(1.0, f0, R["fx_test_0"])
    with pytest.raises(ValueError, match="momentum state variables"):
        fn(1.0, predict.ODEState(f0, qx_train=f0))
    with pytest.raises(ValueError, match="`fx_test_0` is included in `ODEState`"):
        fn(1.0, predict.ODEState(f0), R["fx_test_0"], R["k_td_ntk"])
    with pytest.raises(ValueError, match="fx_train_0 has shape"):
        fn(1.0, np.zeros((5, 3)))
    with pytest.raises(ValueError, match=r"has shape \(24,\), not fx's \(24, 3\)"):
        predict.gradient_descent(None, R["k_dd_ntk"], R["y_onehot"], grad_loss=lambda f, y: f[:, 0])(1.0, f0)
    with pytest.raises(ValueError, match="matmul"):  # the user's own error, as it is
        predict.gradient_descent(None, R["k_dd_ntk"], R["y_onehot"], grad_loss=lambda f, y: f @ f)(1.0, f0)
    with pytest.raises(TypeError, match="returned complex values"):
        predict.gradient_descent(None, R["k_dd_ntk"], R["y_onehot"], grad_loss=lambda f, y: f + 1j)(1.0, f0)
    with pytest.raises(ValueError, match="y_train has 24 samples and k_train_train 7"):
        predict.gradient_descent(None, np.eye(7), R["y_onehot"], grad_loss=mse_gradient)
    with pytest.raises(ValueError, match="k_train_train is not finite"):
        predict.gradient_descent(None, np.full((24, 24), np.nan), R["y_onehot"], grad_loss=mse_gradient)
    with pytest.raises(ValueError, match="learning_rate -1.0 with momentum"):
        predict.gradient_descent(None, R["k_dd_ntk"], R["y_onehot"], -1.0, 0.9, grad_loss=mse_gradient)


def test_a_gradient_that_is_not_finite_says_when():
    def nan_late(f, y):  # finite until the outputs pass 2
        g = mse_gradient(f, 10 * y)
        return np.where(np.abs(f).max() > 2, np.nan, g)
    fn = predict.gradient_descent(None, R["k_dd_ntk"], R["y_onehot"], grad_loss=nan_late)
    with pytest.raises(SolveError, match=r"cannot integrate past t = 0\.[0-9]+ \(in t's units; integration "
                                         r"time [0-9.]+\): the derivative is not finite just after it"):
        fn(1e4, 0.)


def test_scales_beyond_squares():
    # A kernel of 1e150 (derivatives whose squares overflow) and outputs of 1e150 from 0: the first
    # step's estimate divided by zero (ZeroDivisionError) or said the step fell to 0 at t = 0.
    y = R["y_onehot"]
    big = predict.gradient_descent(None, R["k_dd_ntk"] * 1e150, y, learning_rate=1e-150, grad_loss=mse_gradient)
    small = predict.gradient_descent(None, R["k_dd_ntk"], y, grad_loss=mse_gradient)
    close(big([1.0, 3.0], 0.), small([1.0, 3.0], 0.))
    far = predict.gradient_descent(None, R["k_dd_ntk"], y * 1e150, grad_loss=mse_gradient)
    close(far(2.0, 0.) / 1e150, small(2.0, 0.))


def test_an_empty_test_set():
    # m = 0 test rows: "fx_test_0 has shape (0, 3), not (0, 3)" (gradient_descent_mse's too)
    kt = np.zeros((0, 24))
    train, test = cross_entropy_fn(None)(2.0, R["fx_train_0"], np.zeros((0, 3)), kt)
    assert test.shape == (0, 3)
    close(train, cross_entropy_fn(None)(2.0, R["fx_train_0"]))
    _, test = predict.gradient_descent_mse(R["k_dd_ntk"], R["y_train"])(2.0, 0., 0., kt)
    assert test.shape == (0, 3)


@pytest.mark.skipif(importlib.util.find_spec("jax") is not None, reason="JAX is installed here")
def test_without_jax_the_loss_needs_its_gradient():
    with pytest.raises(ImportError, match="differentiates loss with JAX, which is not installed.*grad_loss="):
        predict.gradient_descent(lambda f, y: 0.0, R["k_dd_ntk"], R["y_onehot"])


NT_PYTHON = os.environ.get("NTKD_NT_PYTHON", "/opt/ntkd-ref-venv/bin/python")
JAX_CHECK = """
import sys
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
import numpy as np
from ntkd import predict
R = np.load(sys.argv[1])
fn = predict.gradient_descent(lambda f, y: -jnp.mean(jax.nn.log_softmax(f) * y), R["k_dd_ntk"], R["y_onehot"],
                              learning_rate=2., momentum=0.9)
tr, te = fn(R["t_grid"], R["fx_train_0"], R["fx_test_0"], R["k_td_ntk"])
print(max(np.abs(a - R[k]).max() / np.abs(R[k]).max() for a, k in ((tr, "ode_mom_grid_train"),
                                                                     (te, "ode_mom_grid_test"))))
"""


def _python_with_jax():
    import subprocess
    if not os.access(NT_PYTHON, os.X_OK):
        return False
    probe = subprocess.run([NT_PYTHON, "-c", "import jax, numpy, xxhash, zstandard"], capture_output=True)
    return probe.returncode == 0


@pytest.mark.skipif(not _python_with_jax(), reason=f"no Python with JAX and ntkd's dependencies ({NT_PYTHON})")
def test_a_jax_loss_as_neural_tangents_code_has_it(tmp_path):
    # neural-tangents' code as it stands: the loss in jax.numpy, differentiated by JAX.
    import subprocess
    script = tmp_path / "jax_loss.py"
    script.write_text(JAX_CHECK)
    env = dict(os.environ, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=os.path.join(SRC, "python"))
    r = subprocess.run([NT_PYTHON, str(script), os.path.join(SRC, "tests", "data", "ref_predict.npz")],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert float(r.stdout.split()[-1]) <= TOL
