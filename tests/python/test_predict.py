"""ntkd.predict against neural-tangents' own predictions (tests/data/ref_predict.npz, made by
scripts/nt_predict_reference.py with neural-tangents 0.6.5), and over stores (written by
ntkd.batch, solved with numpy or `ntkd solve`) against the same predictions over arrays."""

import collections
import os
import subprocess

import numpy as np
import pytest

import ntkd
from ntkd import predict, stax
from conftest import SRC

R = np.load(os.path.join(SRC, "tests", "data", "ref_predict.npz"))
K = collections.namedtuple("K", "nngp ntk")
KDD = K(R["k_dd_nngp"], R["k_dd_ntk"])
KTD = K(R["k_td_nngp"], R["k_td_ntk"])
KTT = K(R["k_tt_nngp"], R["k_tt_ntk"])
TOL = 1e-8  # as the C solve's tests: the largest error relative to the largest entry


def close(got, want, tol=TOL):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == np.float64, (got.shape, want.shape, got.dtype)
    err = np.abs(got - want).max() / np.abs(want).max()
    assert err <= tol, err


def the_kernel_fn():
    return eval(str(R["arch"]), {"stax": stax})[2]  # the reference's network in ntkd's stax


@pytest.mark.parametrize("case, reg, absolute", [("rel", 0.01, False), ("abs", 0.05, True)])
def test_gp_inference_equals_neural_tangents(case, reg, absolute):
    fn = predict.gp_inference(KDD, R["y_train"], reg, absolute)
    res = fn(("nngp", "ntk", "ntkgp"), KTD, KTT)
    assert type(res).__name__ == "Gaussians" and res._fields == ("nngp", "ntk", "ntkgp")
    for g in res._fields:
        got = getattr(res, g)
        assert isinstance(got, predict.Gaussian)
        close(got.mean, R[f"gp_{case}_{g}_mean"])
        close(got.covariance, R[f"gp_{case}_{g}_cov"])


def test_gp_inference_means_and_return_types():
    fn = predict.gp_inference(KDD, R["y_train"], diag_reg=0.01)
    for g in ("nngp", "ntk", "ntkgp"):
        got = fn(g, KTD)
        assert isinstance(got, np.ndarray) and got.shape == (7, 3)
        close(got, R[f"gp_rel_{g}_mean_nocov"])
    both = fn(None, KTD)
    assert both._fields == ("nngp", "ntk")
    close(both.ntk, R["gp_rel_ntk_mean_nocov"])
    assert fn(("ntk",), KTD)._fields == ("ntk",)
    # one array for every kernel, as neural-tangents reads an array
    close(predict.gp_inference(KDD.ntk, R["y_train"], diag_reg=0.01)("ntk", KTD.ntk), R["gp_rel_ntk_mean_nocov"])
    vec = predict.gp_inference(KDD, R["y_vec"], diag_reg=0.01, trace_axes=())
    for g in ("nngp", "ntk"):
        close(vec(g, KTD), R[f"gp_vec_{g}_mean"])
    # the train set: its targets, covariance 0
    assert np.array_equal(fn("ntk"), R["y_train"])
    train = fn("nngp", None, True)
    assert np.array_equal(train.mean, R["y_train"]) and np.array_equal(train.covariance, np.zeros((24, 24)))


def test_gradient_descent_mse_ensemble_equals_neural_tangents():
    # ntkd's kernels against neural-tangents' (whose ReLU NTK diagonal is 2e-9 off, relative):
    # the means and covariances within 1e-8 as the C solve's tests.
    fn = predict.gradient_descent_mse_ensemble(the_kernel_fn(), R["x_train"], R["y_train"], diag_reg=0.01)
    for g in ("nngp", "ntk"):
        res = fn(None, R["x_test"], g, compute_cov=True)
        close(res.mean, R[f"gd_{g}_mean"])
        close(res.covariance, R[f"gd_{g}_cov"])
        close(fn(x_test=R["x_test"], get=g), R[f"gd_{g}_mean"])
        train = fn(None, None, g, compute_cov=True)
        assert np.array_equal(train.mean, R[f"gd_train_{g}_mean"])
        assert np.array_equal(train.covariance, R[f"gd_train_{g}_cov"])
    both = fn(np.inf, R["x_test"])  # t = inf is t = None
    assert both._fields == ("nngp", "ntk")
    close(both.ntk, R["gd_ntk_mean"])


def stored_kernel_fn(x1, x2=None, get=None, **kw):
    """neural-tangents' own kernels of the reference (stored), as a kernel_fn: the predictions'
    arithmetic against neural-tangents', apart from the kernels (ntkd's ReLU NTK is 2e-9 away)."""
    if np.array_equal(x1, R["x_train"]) and x2 is None:
        k = KDD
    elif np.array_equal(x1, R["x_test"]):
        k = KTT if x2 is None else KTD
        assert x2 is None or np.array_equal(x2, R["x_train"])
    else:
        raise AssertionError("not the reference's inputs")
    return getattr(k, get) if isinstance(get, str) else K(*(getattr(k, g) if g in get else None for g in K._fields))


FINE = 1e-12  # the same kernels: float64 rounding (eigh against eigh)


@pytest.mark.parametrize("tname", ["grid", "num"])
def test_finite_time_ensemble_equals_neural_tangents(tname):
    # neural-tangents' gradient_descent_mse_ensemble at finite times (learning_rate 2, times of
    # shape (2, 2), whose axes lead the outputs, and one number): ntkd raised NotImplementedError
    t = R["t_grid"] if tname == "grid" else 7.0
    lead = np.shape(t)
    fn = predict.gradient_descent_mse_ensemble(stored_kernel_fn, R["x_train"], R["y_train"], learning_rate=2.,
                                               diag_reg=0.01)
    for g in ("nngp", "ntk"):
        res = fn(t, R["x_test"], g, compute_cov=True)
        assert res.mean.shape == lead + (7, 3) and res.covariance.shape == lead + (7, 7)
        close(res.mean, R[f"gdt_{tname}_{g}_mean"], FINE)
        close(res.covariance, R[f"gdt_{tname}_{g}_cov"], FINE)
        close(fn(t, R["x_test"], g), R[f"gdt_{tname}_{g}_mean"], FINE)  # means alone
        train = fn(t, None, g, compute_cov=True)  # the train set
        close(train.mean, R[f"gdt_train_{tname}_{g}_mean"], FINE)
        close(train.covariance, R[f"gdt_train_{tname}_{g}_cov"], FINE)
    both = fn(t, R["x_test"])
    assert both._fields == ("nngp", "ntk")
    close(both.ntk, R[f"gdt_{tname}_ntk_mean"], FINE)
    # ntkd's own kernels: as at t = infinity, within the C solve's tolerance
    real = predict.gradient_descent_mse_ensemble(the_kernel_fn(), R["x_train"], R["y_train"], learning_rate=2.,
                                                 diag_reg=0.01)
    for g in ("nngp", "ntk"):
        res = real(t, R["x_test"], g, compute_cov=True)
        close(res.mean, R[f"gdt_{tname}_{g}_mean"], 1e-7)
        close(res.covariance, R[f"gdt_{tname}_{g}_cov"], 1e-7)


def test_finite_time_ends_where_training_starts_and_stops():
    # t = 0: the prior (mean 0, covariance the test x test NNGP, 0 on the train set); a long
    # time: the t = infinity solve (Cholesky), also for times given as an array holding inf
    fn = predict.gradient_descent_mse_ensemble(stored_kernel_fn, R["x_train"], R["y_train"], diag_reg=0.01)
    for g in ("nngp", "ntk"):
        start = fn(0., R["x_test"], g, compute_cov=True)
        assert np.array_equal(start.mean, np.zeros((7, 3)))
        close(start.covariance, KTT.nngp, FINE)
        end = fn(np.array([1e9, np.inf]), R["x_test"], g, compute_cov=True)
        for i in range(2):
            close(end.mean[i], R[f"gd_{g}_mean"], 1e-10)
            close(end.covariance[i], R[f"gd_{g}_cov"], 1e-10)
        train = fn(np.array([1e9]), None, g, compute_cov=True)
        close(train.mean[0], R["y_train"], 1e-10)
        assert np.abs(train.covariance).max() < 1e-10 * np.abs(KDD.nngp).max()


@pytest.mark.parametrize("case, reg, absolute", [("rel", 0.01, False), ("abs", 0.05, True)])
@pytest.mark.parametrize("tname", ["inf", "grid", "num"])
def test_gradient_descent_mse_equals_neural_tangents(case, reg, absolute, tname):
    t = {"inf": None, "grid": R["t_grid"], "num": 7.0}[tname]
    lead = np.shape(t) if t is not None else ()
    fn = predict.gradient_descent_mse(KDD.ntk, R["y_train"], learning_rate=0.5, diag_reg=reg,
                                      diag_reg_absolute_scale=absolute)
    f0, ft0 = R["fx_train_0"], R["fx_test_0"]
    train, test = fn(t, f0, ft0, KTD.ntk)
    assert train.shape == lead + (24, 3) and test.shape == lead + (7, 3)
    close(train, R[f"mse_{case}_{tname}_train"], FINE)
    close(test, R[f"mse_{case}_{tname}_test"], FINE)
    # neural-tangents' return conventions: the train outputs alone, the test outputs alone
    assert np.array_equal(fn(t, f0), train)
    close(fn(t, None, ft0, KTD.ntk), fn(t, 0., ft0, KTD.ntk)[1], FINE)  # no train outputs: from 0


def test_gradient_descent_mse_shapes_and_refusals():
    T = R["t_grid"]
    vec = predict.gradient_descent_mse(KDD.nngp, R["y_vec"], trace_axes=())
    got = vec(T, 0., 0., KTD.nngp)[1]
    assert got.shape == (2, 2, 7)
    close(got, R["mse_vec_grid_test"], FINE)
    fn = predict.gradient_descent_mse(KDD.ntk, R["y_train"])
    assert np.array_equal(fn(0., R["fx_train_0"]), R["fx_train_0"])  # t = 0: where it starts
    close(fn(np.inf, R["fx_train_0"]), R["y_train"], FINE)
    with pytest.raises(ValueError, match="Both `fx_train_0` and `fx_test_0` are `None`"):
        fn(1., None)
    with pytest.raises(ValueError, match="provide `k_test_train`"):
        fn(1., 0., 0.)
    with pytest.raises(ValueError, match=r"fx_train_0 has shape \(5,\), not \(24, 3\)"):
        fn(1., np.zeros(5))
    with pytest.raises(ValueError, match="k_test_train has shape"):
        fn(1., 0., 0., KTD.ntk[:, :5])
    with pytest.raises(TypeError, match="one kernel matrix"):
        predict.gradient_descent_mse(KDD, R["y_train"])
    with pytest.raises(TypeError, match="t must be"):
        fn("1", 0.)
    with pytest.raises(ValueError, match="NaN"):
        fn(np.array([1., np.nan]), 0.)
    # an eigenvalue exactly 0 (neural-tangents divides 0 by 0 there: NaN): the limit, a test output
    # moving at the rate of its train residual in that direction, 3 * t / y.size = 3 * 4 / 2
    zero = predict.gradient_descent_mse(np.diag([2., 0.]), np.array([[1.], [3.]]))(4., 0., 0., np.array([[0., 1.]]))
    assert zero[1][0, 0] == 6.
    bad = np.array(KDD.ntk, copy=True)
    bad[0, 2] = np.inf
    with pytest.raises(ntkd.SolveError, match=r"given train kernel is not finite: entry \(0, 2\)"):
        predict.gradient_descent_mse(bad, R["y_train"])(1., 0.)


def test_max_learning_rate_equals_neural_tangents():
    assert np.isclose(predict.max_learning_rate(KDD.ntk), float(R["lr_max"]), rtol=1e-13, atol=0)
    assert np.isclose(predict.max_learning_rate(KDD, 72, 0.9), float(R["lr_max_momentum"]), rtol=1e-13, atol=0)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """The reference's data computed by ntkd.batch, test x test too, tile 5 (tiles straddle the
    train/test boundary), and the same kernels from kernel_fn over arrays."""
    folder = tmp_path_factory.mktemp("predict")
    kf = the_kernel_fn()
    xtr, xte = R["x_train"], R["x_test"]
    S = ntkd.batch(kf, xtr, xte, store=folder / "p.ntk", tile=5, test_test=True, progress=False)
    return S, kf(xtr), kf(xte, xtr), kf(xte)


TARGETS = {"real": R["y_train"], "one-hot": np.eye(4)[np.arange(24) % 4] - 0.25}


@pytest.mark.parametrize("method, ranks", [("numpy", None), ("lapack", None), ("auto", None), (None, None),
                                           ("scalapack", None), ("scalapack", 2), ("cg", None)])
@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("reg, absolute", [(0.01, False), (0.05, True)])
def test_store_equals_arrays(store, method, ranks, target, reg, absolute):
    S, kdd, ktd, ktt = store
    y = TARGETS[target]
    want = predict.gp_inference(kdd, y, reg, absolute)(("nngp", "ntk"), ktd, ktt)
    fn = predict.gp_inference(S, y, reg, absolute, method=method, ranks=ranks)
    assert fn.method == (method or "numpy")
    with_cov = method in ("numpy", "lapack", "auto", None)  # ntkd solve's covariance: lapack only
    got = fn(("nngp", "ntk"), S, S if with_cov else None)
    for g in ("nngp", "ntk"):
        if with_cov:
            close(getattr(got, g).mean, getattr(want, g).mean)
            close(getattr(got, g).covariance, getattr(want, g).covariance)
        else:
            close(getattr(got, g), getattr(want, g).mean)
    assert not [f for f in os.listdir(os.path.dirname(S.path)) if f.startswith(".ntkd-predict")]


@pytest.mark.parametrize("note", ["", "   # a comment ntkd reads past"])
def test_store_with_a_job_written_by_hand(tmp_path, note):
    # A store computed by `ntkd job.conf`, its data in another folder: the solve job made from it
    # keeps the job's paths (relative to its folder). Section headers may carry comments (`note`).
    (tmp_path / "data").mkdir()
    (tmp_path / "jobs").mkdir()
    np.save(tmp_path / "data" / "tr.npy", R["x_train"])
    np.save(tmp_path / "data" / "te.npy", R["x_test"])
    kf = the_kernel_fn()
    job = tmp_path / "jobs" / "j.conf"
    np.save(tmp_path / "data" / "ytr.npy", np.arange(24) % 2)
    np.save(tmp_path / "data" / "yte.npy", np.arange(7) % 2)
    # Its own labels and [solve] give way to the targets and [solve] of the prediction.
    job.write_text(f"[data]{note}\npath = ../data/tr.npy   # the train set\nlabels = ../data/ytr.npy\n"
                   f"[test]{note}\npath = ../data/te.npy\nlabels = ../data/yte.npy\n"
                   f"[model]\narch = {kf.arch}\n[compute]\nprecision = float64\ntile = 6\n"
                   f"[output]{note}\npath = ../out/s.ntk\n[solve]{note}\nridge = 1\npredictions = ../out/p\n")
    subprocess.run([os.environ["NTKD_PROGRAM"], str(job)], check=True, capture_output=True)
    S = ntkd.store.open(tmp_path / "out" / "s.ntk")
    want = predict.gp_inference(kf(R["x_train"]), R["y_train"], 0.01)("ntk", kf(R["x_test"], R["x_train"]))
    with pytest.raises(ValueError, match="job="):
        predict.gp_inference(S, R["y_train"], 0.01, method="lapack")("ntk", S)
    close(predict.gp_inference(S, R["y_train"], 0.01, method="lapack", job=job)("ntk", S), want)
    assert sorted(os.listdir(tmp_path / "jobs")) == ["j.conf"]


def test_store_gradient_descent_mse_ensemble(tmp_path):
    kf = the_kernel_fn()
    fn = predict.gradient_descent_mse_ensemble(kf, R["x_train"], R["y_train"], diag_reg=0.01,
                                               store=tmp_path / "g.ntk", method="lapack", progress=False)
    res = fn(x_test=R["x_test"], get=("nngp", "ntk"), compute_cov=True)
    for g in ("nngp", "ntk"):
        close(getattr(res, g).mean, R[f"gd_{g}_mean"])
        close(getattr(res, g).covariance, R[f"gd_{g}_cov"])
    S = ntkd.store.open(tmp_path / "g.ntk")
    assert S.n_train == 24 and S.test_test and S.complete
    # finite times through the store: its blocks in the eigenbasis, as over arrays
    want = predict.gradient_descent_mse_ensemble(kf, R["x_train"], R["y_train"], diag_reg=0.01)(
        R["t_grid"], R["x_test"], compute_cov=True)
    got = fn(R["t_grid"], R["x_test"], compute_cov=True)
    for g in ("nngp", "ntk"):
        close(getattr(got, g).mean, getattr(want, g).mean, FINE)
        close(getattr(got, g).covariance, getattr(want, g).covariance, FINE)
    with pytest.raises(NotImplementedError, match="give x_test"):
        fn(1., None)


def test_graph_predictions_take_each_kernels_patterns(tmp_path):
    # A graph network's patterns as neural-tangents passes them: the train kernel's pair to
    # gradient_descent_mse_ensemble, the test graphs' pair to predict_fn; test x train takes
    # (the test's, the train's). The same as gp_inference on the kernels computed by hand, in
    # memory and through a store.
    rng = np.random.default_rng(11)
    v = 6
    xtr, xte = rng.standard_normal((10, v, 2)), rng.standard_normal((4, v, 2))
    ptr = (rng.uniform(size=(10, v, v)) < 0.4) * 1.0
    pte = (rng.uniform(size=(4, v, v)) < 0.4) * 1.0
    ytr = rng.standard_normal((10, 2))
    kf = stax.serial(stax.Dense(8, W_std=1.3, b_std=0.1), stax.Relu(), stax.Aggregate(), stax.Dense(8, b_std=0.1),
                     stax.Relu(), stax.GlobalAvgPool(), stax.Dense(1))[2]
    ktt = kf(xtr, None, "ntk", pattern=(ptr, ptr))
    kte = kf(xte, xtr, "ntk", pattern=(pte, ptr))
    want = predict.gp_inference(ktt, ytr, diag_reg=1e-3)("ntk", kte)
    fn = predict.gradient_descent_mse_ensemble(kf, xtr, ytr, diag_reg=1e-3, pattern=(ptr, ptr))
    close(fn(x_test=xte, get="ntk", pattern=(pte, pte)), want, FINE)
    via = predict.gradient_descent_mse_ensemble(kf, xtr, ytr, diag_reg=1e-3, pattern=(ptr, ptr),
                                                store=tmp_path / "g.ntk", method="lapack", progress=False)
    close(via(x_test=xte, get="ntk", pattern=(pte, pte)), want, FINE)
    assert np.array_equal(np.load(tmp_path / "g.p2.npy"), pte)
    with pytest.raises(TypeError, match="both or neither"):
        via(x_test=xte, get="ntk")


@pytest.mark.parametrize("method", ["numpy", "lapack", "cg"])
def test_unsolvable_raises_solve_error(tmp_path, method):
    kf = stax.serial(stax.Dense(8), stax.Relu(), stax.Dense(1))[2]
    x = np.random.default_rng(3).standard_normal((10, 4))
    x = np.vstack([x, x[:3]])  # repeated samples: singular without a ridge
    S = ntkd.batch(kf, x, x[:4], store=tmp_path / "s.ntk", progress=False)
    y = np.random.default_rng(4).standard_normal((13, 2))
    with pytest.raises(ntkd.SolveError) as e:
        predict.gp_inference(S, y, 0.0, method=method)("ntk", S)
    assert isinstance(e.value, np.linalg.LinAlgError) and "train kernel" in str(e.value)


def test_one_duplicate_sample_is_too_ill_conditioned():
    # One train sample twice and diag_reg 0: the kernel is singular (the two rows equal bit for
    # bit), yet numpy's Cholesky passed on a pivot of rounding, and t = None returned predictions
    # 10 % off the t -> inf limit without a word. It raises, as ntkd solve refuses the kernel
    # (rcond below 1e-13); a ridge that conditions it is solved.
    kf = stax.serial(stax.Dense(64, W_std=1.5, b_std=0.1), stax.Relu(), stax.Dense(1, W_std=1.5, b_std=0.1))[2]
    rng = np.random.default_rng(0)
    x, y, xt = rng.standard_normal((10, 3)), rng.standard_normal((10, 1)), rng.standard_normal((4, 3))
    x[5] = x[2]
    k, kt = kf(x, None, "ntk"), kf(xt, x, "ntk")
    np.linalg.cholesky(k)  # (what let it through)
    for call in (lambda: predict.gp_inference(k, y)("ntk", kt),
                 lambda: predict.gradient_descent_mse_ensemble(kf, x, y)(x_test=xt, get="ntk"),
                 lambda: predict.gradient_descent_mse(k, y)(None, 0., 0., kt),
                 # an infinite time among finite ones (the eigenbasis path) as t = inf alone
                 lambda: predict.gradient_descent_mse_ensemble(kf, x, y)(t=[1., np.inf], x_test=xt, get="ntk"),
                 lambda: predict.gradient_descent_mse(k, y)(np.array([[np.inf], [2.]]), 0., 0., kt)):
        with pytest.raises(ntkd.SolveError, match=r"train kernel with diag_reg 0 is too ill-conditioned to "
                                                  r"solve \(reciprocal condition number .* < 1e-13\)"):
            call()
    got = predict.gp_inference(k, y, 1e-6)("ntk", kt)
    A = k + 1e-6 * np.trace(k) / 10 * np.eye(10)
    close(got, kt @ np.linalg.solve(A, y), 1e-8)
    # finite times whose rounding modes have not moved, and the train set, divide by no rounding
    # eigenvalue: computed; the train set at t = inf is its targets, as at t = None (it followed the
    # sign of a rounding eigenvalue)
    assert np.all(np.isfinite(predict.gradient_descent_mse_ensemble(kf, x, y)(t=[1., 10.], x_test=xt, get="ntk")))
    train = predict.gradient_descent_mse(k, y)(np.array([1., np.inf]), 0.)
    assert np.all(np.isfinite(train[0])) and np.array_equal(train[1], y)


def test_a_time_that_moves_a_rounding_mode_is_refused():
    # An eigenvalue of 1e-15 beside 2 (below 1e-13 of the largest: rounding, for a kernel of two
    # equal samples) divides the test outputs once its mode has moved (w t/size > 1), as at t = inf:
    # a singular kernel's predictions were 50 % off at t = 1e20 (a hunt). Refused; t = 1 is not.
    v, _ = np.linalg.qr(np.random.default_rng(4).standard_normal((4, 4)))
    k = (v * [2., 1., .5, 1e-15]) @ v.T
    k = (k + k.T) / 2
    y, kt = np.ones((4, 1)), np.random.default_rng(5).standard_normal((3, 4))
    fn = predict.gradient_descent_mse(k, y)
    with pytest.raises(ntkd.SolveError, match=r"given train kernel with diag_reg 0 is too ill-conditioned for "
                                              r"t = 1e\+20: 1 of its eigenvalues are below 1e-13 of the largest"):
        fn(np.array([1., 1e20]), 0., 0., kt)
    assert np.all(np.isfinite(fn(np.array([1., 1e6]), 0., 0., kt)[1]))  # 2 * 1e-15 * 1e6 / 4: not moved
    # moved by a third of its way (2 w t / size = 0.3), the outputs were 118 % off (a second hunt)
    with pytest.raises(ntkd.SolveError, match=r"too ill-conditioned for t = 6e\+14.*\(2 w t/size > 1e-08\)"):
        fn(np.array([1., 6e14]), 0., 0., kt)
    assert np.all(np.isfinite(fn(1e20, 0.)))  # the train set divides by no eigenvalue
    assert np.all(np.isfinite(predict.gradient_descent_mse(k, y, diag_reg=1e-6)(1e20, 0., 0., kt)[1]))


def test_condition_estimate_comes_close():
    # Near-duplicate pairs (5e-5 apart): the estimate of ||A^-1||_1 (a lower bound) must come
    # within 2x of the true norm. Hager's stop compared with the sign vector instead of the
    # iterate, ended after its first step and fell 4-14x short: method='numpy' then accepted a
    # kernel that ntkd solve (method='lapack') refused, on the same store.
    rng = np.random.default_rng(1)
    n = 400
    x = rng.standard_normal((n, 20))
    x[1::2] = x[0::2] + 5e-5 * rng.standard_normal(x[0::2].shape)
    kf = stax.serial(*([stax.Dense(512, W_std=1.5, b_std=0.05), stax.Relu()] * 3), stax.Dense(1))[2]
    A = kf(x, None, "nngp")

    est = predict._inverse_norm1(lambda B: np.linalg.solve(A, B), n)
    true = np.abs(np.linalg.inv(A)).sum(axis=0).max()
    assert true / 2 <= est <= true * (1 + 1e-8), (est, true)


def test_rcond_limit_is_the_c_solves():
    # method='numpy' refuses a kernel below the limit `ntkd solve` refuses (method='lapack'): the
    # two must be one number, or the same store is solvable by one method and not the other.
    with open(os.path.join(SRC, "src", "solve", "solve.h")) as f:
        defined = [ln.split()[2] for ln in f if ln.startswith("#define NTK_SOLVE_MIN_RCOND ")]
    assert len(defined) == 1 and float(defined[0]) == predict.MIN_RCOND, (defined, predict.MIN_RCOND)


@pytest.mark.parametrize("method", ["lapack", "cg"])
def test_one_kernel_unsolvable_leaves_the_other(tmp_path, method):
    # W_std = 0 in a standard-parameterised readout: the NNGP is the constant b_std^2 (rank 1, not
    # solvable without a ridge) while the NTK holds the hidden layer's kernel (well conditioned).
    # `ntkd solve` solves both, fails the NNGP's ridge and writes the NTK's predictions: those are
    # returned, and the NNGP alone raises.
    kf = stax.serial(stax.Dense(8, W_std=1.5, parameterization="standard"), stax.Relu(),
                     stax.Dense(1, W_std=0., b_std=1., parameterization="standard"))[2]
    rng = np.random.default_rng(3)
    x, xt, y = rng.standard_normal((10, 4)), rng.standard_normal((4, 4)), rng.standard_normal((10, 2))
    S = ntkd.batch(kf, x, xt, store=tmp_path / "s.ntk", precision="float64", progress=False)
    want = predict.gp_inference(kf(x, None, "ntk"), y, 0.0)("ntk", kf(xt, x, "ntk"))
    fn = predict.gp_inference(S, y, 0.0, method=method)
    close(fn("ntk", S), want)
    with pytest.raises(ntkd.SolveError, match="nngp train kernel with ridge 0"):
        fn("nngp", S)
    # -0.0 is the ridge 0: its predictions file is ridge0 (looked for as ridge-0, it was "not written")
    close(predict.gp_inference(S, y, -0.0, method=method)("ntk", S), want)


def test_flags_as_neural_tangents_takes_them():
    # 0 and 1 are flags there (used as truth values): gp_inference refused 1, the ensemble took it
    a = predict.gp_inference(KDD, R["y_train"], 0.05, diag_reg_absolute_scale=1)("nngp", KTD)
    b = predict.gp_inference(KDD, R["y_train"], 0.05, diag_reg_absolute_scale=True)("nngp", KTD)
    assert np.array_equal(a, b)
    fn = predict.gradient_descent_mse_ensemble(the_kernel_fn(), R["x_train"], R["y_train"], diag_reg=0.01)
    got, want = fn(None, R["x_test"], "nngp", compute_cov=1), fn(None, R["x_test"], "nngp", compute_cov=True)
    assert np.array_equal(got.covariance, want.covariance)


@pytest.mark.parametrize("call, exc", [
    (lambda S: predict.gp_inference(KDD, R["y_train"][:20]), ValueError),
    (lambda S: predict.gp_inference(KDD.ntk[:, :20], R["y_train"]), ValueError),
    (lambda S: predict.gp_inference(KDD, R["y_vec"]), ValueError),  # trace_axes=(-1,) is the sample axis
    (lambda S: predict.gp_inference(KDD, R["y_train"], trace_axes=()), ValueError),
    (lambda S: predict.gp_inference(KDD, R["y_train"], trace_axes=(0,)), ValueError),
    (lambda S: predict.gp_inference(KDD, R["y_train"], trace_axes=(5,)), ValueError),
    (lambda S: predict.gp_inference(KDD, R["y_train"].astype(str)), TypeError),
    (lambda S: predict.gp_inference(KDD, R["y_train"], diag_reg="a"), TypeError),
    (lambda S: predict.gp_inference(KDD, R["y_train"], diag_reg=np.nan), ValueError),
    (lambda S: predict.gp_inference(KDD, R["y_train"], diag_reg_absolute_scale=2), TypeError),  # 0, 1: flags
    (lambda S: predict.gp_inference(KDD, R["y_train"], method="svd"), ValueError),
    (lambda S: predict.gp_inference(KDD, R["y_train"], method="lapack"), ValueError),
    (lambda S: predict.gp_inference(S, R["y_train"], ranks=0), ValueError),
    (lambda S: predict.gp_inference(KDD, R["y_train"])("gp", KTD), ValueError),
    (lambda S: predict.gp_inference(KDD, R["y_train"])(("ntk", "ntk"), KTD), ValueError),
    (lambda S: predict.gp_inference(KDD, R["y_train"])("ntk", KTD.ntk[:, :20]), ValueError),
    (lambda S: predict.gp_inference(KDD, R["y_train"])("nngp", KTD, KTT.nngp[:3]), ValueError),
    (lambda S: predict.gp_inference(KDD.ntk, R["y_train"])("ntk", KTD.ntk, KTT.ntk), ValueError),  # both kernels
    (lambda S: predict.gp_inference(S, R["y_train"], method="cg")("ntk", S, S), ValueError),  # lapack only
    (lambda S: predict.gp_inference(S, R["y_train"], method="lapack")("ntkgp", S, S), NotImplementedError),
    (lambda S: predict.gp_inference(S, R["y_train"], method="lapack")("ntk", KTD), ValueError),
    (lambda S: predict.gp_inference(S, R["y_train"])("ntk", KTD.ntk[:, :5]), ValueError),
    (lambda S: predict.gradient_descent_mse_ensemble(None, R["x_train"], R["y_train"]), TypeError),
    (lambda S: predict.gradient_descent_mse_ensemble(the_kernel_fn(), R["x_train"], R["y_train"][:3]), ValueError),
    (lambda S: predict.gradient_descent_mse_ensemble(the_kernel_fn(), R["x_train"], R["y_train"], ranks=2),
     TypeError),  # a store's keyword without store=
    (lambda S: predict.gradient_descent_mse_ensemble(the_kernel_fn(), R["x_train"], R["y_train"])(
        None, R["x_test"], "ntkgp"), ValueError),
    # a flag that is not one: 'no' was taken as true (absolute) here, unchecked
    (lambda S: predict.gradient_descent_mse_ensemble(the_kernel_fn(), R["x_train"], R["y_train"],
                                                     diag_reg_absolute_scale="no"), TypeError),
    (lambda S: predict.gradient_descent_mse_ensemble(the_kernel_fn(), R["x_train"], R["y_train"])(
        None, R["x_test"], "nngp", compute_cov="yes"), TypeError),
])
def test_bad_arguments(store, call, exc):
    with pytest.raises(exc):
        call(store[0])


def test_store_without_test_set_or_test_x_test(tmp_path):
    kf = the_kernel_fn()
    S = ntkd.batch(kf, R["x_train"], store=tmp_path / "a.ntk", progress=False)
    fn = predict.gp_inference(S, R["y_train"], 0.01)
    assert np.array_equal(fn("ntk"), R["y_train"])  # the train set needs no test set
    with pytest.raises(ValueError, match="no test set"):
        fn("ntk", S)
    close(fn("ntk", kf(R["x_test"], R["x_train"])),
          predict.gp_inference(kf(R["x_train"]), R["y_train"], 0.01)("ntk", kf(R["x_test"], R["x_train"])))
    T = ntkd.batch(kf, R["x_train"], R["x_test"], store=tmp_path / "b.ntk", progress=False)
    for method in ("numpy", "lapack"):
        with pytest.raises(ValueError, match="test_test=True"):
            predict.gp_inference(T, R["y_train"], 0.01, method=method)("nngp", T, T)


def test_a_store_s_test_blocks_go_with_its_train_block(tmp_path):
    # Found by a hunt: k_test_test from another store (of as many test samples) was taken, its
    # covariance returned; from one of another size, numpy's broadcast error. Both are refused as
    # k_test_train from another store was.
    kf = the_kernel_fn()
    S = ntkd.batch(kf, R["x_train"], R["x_test"], store=tmp_path / "a.ntk", test_test=True, progress=False)
    T = ntkd.batch(kf, R["x_train"], R["x_test"][::-1], store=tmp_path / "b.ntk", test_test=True, progress=False)
    U = ntkd.batch(kf, R["x_train"], R["x_test"][:3], store=tmp_path / "c.ntk", test_test=True, progress=False)
    fn = predict.gp_inference(S, R["y_train"], 0.01)
    good = fn("nngp", S, S)
    for other in (T, U):
        for args in ((other, S), (S, other)):
            with pytest.raises(ValueError, match="not the store of k_train_train"):
                fn("nngp", *args)
    with pytest.raises(ValueError, match="k_test_test is a store, and not the store of k_train_train"):
        predict.gp_inference(KDD, R["y_train"], 0.01)("nngp", KTD, S)
    close(fn("nngp", S, S).covariance, good.covariance)
    # a negative diag_reg: named as such where `ntkd solve` cannot take it (it was "[solve] ridge:
    # '-9.5e-06' is not a number >= 0" at a line of a deleted temporary job file)
    for method in ("lapack", "cg", "auto"):
        with pytest.raises(ValueError, match=r"diag_reg = -0.001 is negative: method='%s'" % method):
            predict.gp_inference(S, R["y_train"], -1e-3, method=method)
    predict.gp_inference(S, R["y_train"], -1e-3)("nngp", S)  # numpy takes it, as neural-tangents does


def test_a_matrix_that_is_no_kernel_is_refused_at_finite_times():
    # Found by a hunt: a negative-definite "train kernel" was refused at t = None (its Cholesky)
    # but at a finite time its eigenvalues were clipped to 0 as rounding, the outputs never moved,
    # and max_learning_rate returned a negative rate (neural-tangents does both).
    rng = np.random.default_rng(0)
    X = rng.standard_normal((12, 4))
    K = -(X @ X.T / 4 + 0.1 * np.eye(12))
    y = rng.standard_normal((12, 2))
    with pytest.raises(ntkd.SolveError, match="not positive semi-definite: its smallest eigenvalue is"):
        predict.gradient_descent_mse(K, y)(100., 0.)
    with pytest.raises(ntkd.SolveError, match="largest eigenvalue is"):
        predict.max_learning_rate(K)
    # rounding stays taken: a PSD kernel with an eigenvalue of -1e-15 of the largest computes
    w, v = np.linalg.eigh(X @ X.T / 4 + 0.1 * np.eye(12))
    w[0] = -1e-15 * w[-1]
    out = predict.gradient_descent_mse((v * w) @ v.T, y)(100., 0.)
    assert np.isfinite(out).all() and np.abs(out).max() > 0
    assert predict.max_learning_rate((v * w) @ v.T) > 0
    # a kernel of trace 0: a relative diag_reg adds nothing, and the message says what does
    with pytest.raises(ntkd.SolveError, match="its trace is 0, so a relative diag_reg adds nothing"):
        predict.gp_inference(np.zeros((4, 4)), y[:4], diag_reg=1e-3)("nngp", np.zeros((2, 4)))


def test_a_nan_in_the_train_kernel_is_named():
    # A NaN in k_train_train was reported as "diag_reg 0.0001 gave a factor that is not
    # finite", blaming the ridge; the entry is named now.
    K = np.array(KDD.ntk, dtype=np.float64, copy=True)
    K[3, 5] = K[5, 3] = np.nan
    with pytest.raises(ntkd.SolveError, match=r"NTK train kernel is not finite: entry \(3, 5\) is nan"):
        predict.gp_inference(K, R["y_train"], diag_reg=1e-4)("ntk", KTD.ntk)


def test_times_that_give_no_number_are_refused():
    fn = predict.gradient_descent_mse(np.diag([2., 0.]), np.array([[1.], [3.]]))
    with pytest.raises(ValueError, match="negative: training runs forward"):
        fn(-1., 0.)
    with pytest.raises(ValueError, match="negative"):
        predict.gradient_descent_mse(np.diag([2., 1.]), np.ones((2, 1)), learning_rate=-0.5)(2., 0.)
    # an infinite time in an array meets the eigenvalue 0: refused as t = None refuses the kernel
    with pytest.raises(ntkd.SolveError, match=r"given train kernel with diag_reg 0 .* not positive definite"):
        fn(np.array([1., np.inf]), 0., 0., np.array([[0., 1.]]))
    assert np.isfinite(fn(np.array([1., np.inf]), 0.)).all()  # the train outputs do not move there
    # a finite time that large: the mode of eigenvalue 0 moves at a constant rate, overflowing
    with pytest.raises(ntkd.SolveError, match=r"test prediction at t = 1e\+308 .* overflowed .* eigenvalue of 0"):
        fn(np.array([1., 1e308]), 0., 0., np.array([[0., 1e10]]))


def test_no_times_no_outputs():
    # t an empty array: outputs with an empty time axis, as neural-tangents (np.stack of nothing raised)
    fn = predict.gradient_descent_mse_ensemble(stored_kernel_fn, R["x_train"], R["y_train"], diag_reg=0.01)
    res = fn(np.zeros((0, 2)), R["x_test"], "ntk", compute_cov=True)
    assert res.mean.shape == (0, 2, 7, 3) and res.covariance.shape == (0, 2, 7, 7)
    train, test = predict.gradient_descent_mse(KDD.ntk, R["y_train"])(np.zeros(0), 0., 0., KTD.ntk)
    assert train.shape == (0, 24, 3) and test.shape == (0, 7, 3)


def test_kernels_that_are_not_finite_are_named():
    # A NaN in k_test_train gave NaN predictions, returned as such at t = None, and at a finite t
    # an error blaming an infinite time; a NaN in the NNGP train kernel's lower triangle (which
    # the Cholesky factor does not read) gave an NTK covariance of NaNs.
    ktd = np.array(KTD.ntk, copy=True)
    ktd[1, 2] = np.nan
    for t in (None, 5.):
        with pytest.raises(ValueError, match=r"k_test_train is not finite: entry \(1, 2\) is nan"):
            predict.gradient_descent_mse(KDD.ntk, R["y_train"], diag_reg=0.1)(t, 0., 0., ktd)
        with pytest.raises(ValueError, match=r"k_test_train \(ntk\) is not finite: entry \(1, 2\)"):
            predict.gp_inference(KDD, R["y_train"], 0.01)("ntk", K(KTD.nngp, ktd))
    knn = np.array(KDD.nngp, copy=True)
    knn[7, 2] = np.inf
    with pytest.raises(ntkd.SolveError, match=r"NNGP train kernel is not finite: entry \(7, 2\) is inf"):
        predict.gp_inference(K(knn, KDD.ntk), R["y_train"], 0.01)("ntk", KTD, KTT)


def test_an_asymmetric_train_kernel_is_symmetrised_for_the_eigenbasis():
    # as JAX's eigh reads it (neural-tangents' finite t): (K + K^T)/2; ntkd read the upper triangle
    noise = np.random.default_rng(5).standard_normal(KDD.ntk.shape) * 1e-3 * np.abs(KDD.ntk).max()
    asym = KDD.ntk + np.triu(noise, 1)
    sym = (asym + asym.T) / 2
    a = predict.gradient_descent_mse(asym, R["y_train"])(5., R["fx_train_0"], R["fx_test_0"], KTD.ntk)
    b = predict.gradient_descent_mse(sym, R["y_train"])(5., R["fx_train_0"], R["fx_test_0"], KTD.ntk)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


def test_neural_tangents_arguments_taken_as_it_takes_them(tmp_path):
    fn = predict.gradient_descent_mse_ensemble(stored_kernel_fn, R["x_train"], R["y_train"], diag_reg=0.01)
    a = fn(5., R["x_test"], "ntk", compute_cov=np.array(True))  # a 0-d array as the flag: TypeError
    assert isinstance(a, predict.Gaussian) and np.array_equal(a.covariance, fn(5., R["x_test"], "ntk", True).covariance)
    # t = inf times learning rate 0 is not a time (it returned the end of training)
    with pytest.raises(ValueError, match="not a number"):
        predict.gradient_descent_mse_ensemble(stored_kernel_fn, R["x_train"], R["y_train"], learning_rate=0.)(
            np.inf, R["x_test"], "ntk")
    lr = predict.max_learning_rate(KDD.ntk)
    assert type(lr) is np.float64  # as neural-tangents' (scipy's) value
    with pytest.raises(ValueError, match=r"shape \(0, 0\)"):
        predict.max_learning_rate(np.zeros((0, 0)))
    # keywords holding arrays for kernel_fn, given for the train and the test kernels: the
    # truth value of an array was asked ("ambiguous")
    seen = []

    def kf(x1, x2=None, get=None, mask=None):
        seen.append(mask)
        return stored_kernel_fn(x1, x2, get)

    fn = predict.gradient_descent_mse_ensemble(kf, R["x_train"], R["y_train"], diag_reg=0.01, mask=np.ones(3))
    close(fn(None, R["x_test"], "ntk", mask=np.zeros(3)), R["gd_ntk_mean"], FINE)
    assert np.array_equal(seen[-1], np.zeros(3))


def test_store_predictions_with_and_without_covariance_in_any_order(tmp_path):
    # A predict_fn through a store asked ntkd.batch for test_test=compute_cov at each call: after
    # one call with compute_cov, a call without it was refused as "another job".
    kf = the_kernel_fn()
    fn = predict.gradient_descent_mse_ensemble(kf, R["x_train"], R["y_train"], diag_reg=0.01,
                                               store=tmp_path / "c.ntk", progress=False)
    for t in (None, 5.):
        res = fn(t, R["x_test"], "ntk", compute_cov=True)
        close(fn(t, R["x_test"], "ntk"), res.mean, FINE)
    means = predict.gradient_descent_mse_ensemble(kf, R["x_train"], R["y_train"], diag_reg=0.01,
                                                  store=tmp_path / "m.ntk", progress=False)
    means(None, R["x_test"], "ntk")
    with pytest.raises(ValueError, match="holds no test x test block .* pass test_test=True"):
        means(None, R["x_test"], "ntk", compute_cov=True)


def test_bench_predict_runs_as_performance_md_shows_it():
    # docs/PERFORMANCE.md's command for the cost of a finite t, run at small sizes: one line per
    # size with the eigendecomposition / factor ratio
    import re
    import sys
    text = open(os.path.join(SRC, "docs", "PERFORMANCE.md")).read()
    cmds = re.findall(r"OPENBLAS_NUM_THREADS=1 /usr/bin/python3 scripts/bench_predict\.py((?: \d+)+)", text)
    assert cmds and all(c.split() == ["1000", "2000", "4000"] for c in cmds), cmds
    out = subprocess.run([sys.executable, os.path.join(SRC, "scripts", "bench_predict.py"), "60", "80"],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0].split()[:3] == ["n", "eigh", "(s)"] and [l.split()[0] for l in out[1:]] == ["60", "80"]
    for line in out[1:]:
        n, te, tc, ratio, rss = (float(v) for v in line.split())
        assert te > 0 and tc > 0 and ratio > 0 and rss > 0  # (the ratio of the unrounded times)


def test_predict_fn_under_jax_transforms_says_why():
    # jax.jit of ntkd's predict_fn raised "k_test_train (ntk) must be an array, not
    # DynamicJaxprTracer", a keyword the user never passed (a migration hunt). A stand-in for
    # JAX's tracers (by their class name, as ntkd tells them: it never imports JAX).
    class DynamicJaxprTracer:
        shape, dtype = (7, 5), np.float32

    tracer = DynamicJaxprTracer()
    fn = predict.gradient_descent_mse_ensemble(stored_kernel_fn, R["x_train"], R["y_train"], diag_reg=0.01)
    with pytest.raises(TypeError, match="x_test is a JAX tracer .* outside JAX, so jax.jit"):
        fn(x_test=tracer, get="ntk")
    with pytest.raises(TypeError, match="k_test_train is a JAX tracer"):
        predict.gp_inference(KDD, R["y_train"], 0.01)("ntk", tracer)
    with pytest.raises(TypeError, match="fx_test_0 is a JAX tracer"):
        predict.gradient_descent_mse(KDD.ntk, R["y_train"])(1., 0., tracer, KTD.ntk)
    jax = pytest.importorskip("jax")
    jitted = jax.jit(fn, static_argnames=("get", "compute_cov"))
    with pytest.raises(TypeError, match="x_test is a JAX tracer"):
        jitted(x_test=R["x_test"], get="ntk")


def test_review_findings_on_predict_errors():
    # max_learning_rate of a Kernel computed without its NTK said "pass a Kernel (its .ntk)"
    with pytest.raises(ValueError, match="a Kernel without its NTK"):
        predict.max_learning_rate(K(KDD.nngp, None))
    # a t whose product with the learning rate overflows is infinity, without numpy's warning
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = predict.gradient_descent_mse(KDD.ntk, R["y_train"], learning_rate=1e300)(1e300, 0.)
    assert np.array_equal(got, R["y_train"])
    # a crash of the program is not blamed on the last line it wrote
    from ntkd.errors import raise_for_exit
    with pytest.raises(ntkd.NtkdError) as e:
        raise_for_exit(-11, "ntkd: no usable GPU: the job runs on the CPU")
    assert str(e.value).startswith("the ntkd program was killed by signal 11 (the last line it wrote before: ")
