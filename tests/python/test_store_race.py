"""Two calls on one store path at once: ntkd.batch (new store, resume, staged job) and
gp_inference through `ntkd solve` must never return another call's store or predictions
as their own. Each race is made deterministic by running the other call inside the window
(from a stand-in for _program.run, the function that starts the program)."""

import os
import shutil

import numpy as np
import pytest

import ntkd
from ntkd import predict, stax

N1, N2, TILE = 23, 7, 8


def kernel_fn():
    return stax.serial(stax.Dense(64, W_std=1.5, b_std=0.05), stax.Relu(), stax.Dense(1))[2]


def other_kernel_fn():  # another network: the same data give another store
    return stax.serial(stax.Dense(64, W_std=1.5, b_std=0.05), stax.Erf(), stax.Dense(1))[2]


@pytest.fixture(scope="module")
def data(rng):
    xa = rng.standard_normal((N1, 5))
    xb = xa.copy()
    xb[0, 0] += 1.0  # another call's data: one value differs
    return xa, xb, rng.standard_normal((N2, 5))


def racing(monkeypatch, other, before=True, when=lambda args: True):
    """_program.run that runs `other` (another call on the same store path, with the real
    run) just before (or just after) this call's program, the first time when(args) holds."""
    real_run = ntkd._program.run
    state = {"raced": False, "busy": False}

    def run(args, cwd, **kw):
        if state["busy"] or state["raced"] or not when(args):
            return real_run(args, cwd, **kw)
        state["raced"] = True
        if not before:
            result = real_run(args, cwd, **kw)
        state["busy"] = True
        try:
            other()
        finally:
            state["busy"] = False
        return real_run(args, cwd, **kw) if before else result

    monkeypatch.setattr(ntkd._program, "run", run)
    return state


def test_resume_never_returns_the_store_another_call_replaced(tmp_path, data, monkeypatch):
    # The files beside a finished store hold this job: a rerun resumes, writing nothing. Another
    # call with overwrite=True replaces k.conf, k.x1.npy and the store as this call's program
    # starts; the program then finds the other job's finished store and exits 0. Seen returning
    # that store (kernel_fn of the other data) as this call's.
    xa, xb, _ = data
    st = tmp_path / "k.ntk"
    kf = kernel_fn()
    ntkd.batch(kf, xa, store=st, tile=TILE, progress=False)
    state = racing(monkeypatch, lambda: ntkd.batch(kf, xb, store=st, tile=TILE, progress=False, overwrite=True))
    with pytest.raises(ntkd.StoreError, match=r"k\.conf, k\.x1\.npy\) were replaced while the program ran"):
        S = ntkd.batch(kf, xa, store=st, tile=TILE, progress=False)
        assert np.array_equal(S["ntk"][:, :], kf(xa).ntk), "the store of the other call's data was returned"
    assert state["raced"]
    monkeypatch.undo()
    # Undisturbed: the store computed again, then resumed, holds kernel_fn of this data.
    S = ntkd.batch(kf, xa, store=st, tile=TILE, progress=False, overwrite=True)
    assert np.array_equal(S["ntk"][:, :], kf(xa).ntk)
    S = ntkd.batch(kf, xa, store=st, tile=TILE, progress=False)
    assert np.array_equal(S["ntk"][:, :], kf(xa).ntk) and S.complete


def test_resume_through_mpirun_never_returns_another_calls_store(tmp_path, data, monkeypatch):
    # The same through a launcher (NTKD_MPIRUN) that lets the other call run before it starts
    # the ranks, as a busy cluster's slow start does.
    xa, xb, _ = data
    st = tmp_path / "k.ntk"
    kf = kernel_fn()
    ntkd.batch(kf, xa, store=st, tile=TILE, progress=False)
    # The other call's files, made elsewhere, put in place by the launcher as the ranks start.
    ntkd.batch(kf, xb, store=tmp_path / "b" / "k.ntk", tile=TILE, progress=False)
    launcher = tmp_path / "mpirun.sh"
    launcher.write_text("#!/bin/sh\nfor f in k.conf k.x1.npy k.ntk k.ntk.index; do\n"
                        f"  cp {tmp_path}/b/$f {tmp_path}/.$f.other && mv {tmp_path}/.$f.other {tmp_path}/$f\n"
                        "done\nexec mpirun \"$@\"\n")
    launcher.chmod(0o755)
    monkeypatch.setenv("NTKD_MPIRUN", str(launcher))
    with pytest.raises(ntkd.StoreError, match="were replaced while the program ran"):
        S = ntkd.batch(kf, xa, store=st, ranks=2, tile=TILE, progress=False)
        assert np.array_equal(S["ntk"][:, :], kf(xa).ntk), "the store of the other call's data was returned"
    assert np.array_equal(np.load(tmp_path / "k.x1.npy"), xb), "the launcher did not race"


@pytest.mark.parametrize("path", ["new", "resume", "staged"])
@pytest.mark.parametrize("differs", ["data", "network"])
def test_a_store_replaced_after_the_run_is_not_returned(tmp_path, data, monkeypatch, path, differs):
    # The files beside the store stay this call's; only the store (and its index) is replaced
    # between the program's end and its opening. The opened store's own job text must be this
    # call's job: its data values, and its layers.
    xa, xb, xt = data
    st = tmp_path / "k.ntk"
    kf = kernel_fn()
    other = os.path.join(tmp_path, "b", "k.ntk")
    if differs == "data":
        ntkd.batch(kf, xb, xt, store=other, tile=TILE, progress=False)
    else:
        ntkd.batch(other_kernel_fn(), xa, xt, store=other, tile=TILE, progress=False)

    def swap():
        for f in ("k.ntk", "k.ntk.index"):
            shutil.copy(os.path.join(tmp_path, "b", f), os.path.join(tmp_path, f".{f}.other"))
            os.replace(os.path.join(tmp_path, f".{f}.other"), os.path.join(tmp_path, f))

    kw = dict(store=st, tile=TILE, progress=False)
    if path != "new":
        ntkd.batch(kf, xa, xt, **kw)
    if path == "staged":  # a job file that differs (progress lines), accepted for the store
        kw["progress"] = lambda done, total: None
    state = racing(monkeypatch, swap, before=False)
    with pytest.raises(ntkd.StoreError, match="the store is not of this call's job \\((%s)" %
                       ("data values" if differs == "data" else "layers")):
        S = ntkd.batch(kf, xa, xt, **kw)
        assert np.array_equal(S["ntk"][:N1, :N1], kf(xa).ntk), "another call's store was returned"
    assert state["raced"]
    monkeypatch.undo()
    S = ntkd.batch(kf, xa, xt, store=st, tile=TILE, progress=False, overwrite=True)
    assert np.array_equal(S["ntk"][:N1 + N2, :N1], kf(np.concatenate([xa, xt]), xa).ntk)


def test_ensemble_through_a_resumed_store_never_uses_another_calls(tmp_path, data, monkeypatch, rng):
    # gradient_descent_mse_ensemble(store=) computes through ntkd.batch: the same race raises.
    xa, xb, xt = data
    y = rng.standard_normal((N1, 2))
    st = tmp_path / "k.ntk"
    kf = kernel_fn()
    fn = predict.gradient_descent_mse_ensemble(kf, xa, y, diag_reg=1e-3, store=st, tile=TILE, progress=False)
    want = predict.gradient_descent_mse_ensemble(kf, xa, y, diag_reg=1e-3)(x_test=xt, get="ntk")
    np.testing.assert_allclose(fn(x_test=xt, get="ntk"), want, rtol=1e-9, atol=1e-12)
    state = racing(monkeypatch, lambda: ntkd.batch(kf, xb, xt, store=st, tile=TILE, progress=False, overwrite=True),
                   when=lambda args: args[0] != "solve")
    with pytest.raises(ntkd.StoreError, match="were replaced while the program ran"):
        got = fn(x_test=xt, get="ntk")
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12, err_msg="another call's store was used")
    assert state["raced"]


def solved(tmp_path, data, method):
    xa, xb, xt = data
    y = np.linspace(-1, 1, 2 * N1).reshape(N1, 2)
    kf = kernel_fn()
    st = tmp_path / "k.ntk"
    S = ntkd.batch(kf, xa, xt, store=st, tile=TILE, progress=False)
    want = predict.gp_inference(kf(xa).ntk, y, diag_reg=1e-3)("ntk", k_test_train=kf(xt, xa).ntk)
    fn = predict.gp_inference(S, y, diag_reg=1e-3, method=method)
    return S, fn, want, lambda: ntkd.batch(kf, xb, xt, store=st, tile=TILE, progress=False, overwrite=True)


@pytest.mark.parametrize("method", ["lapack", "cg", "auto"])
def test_solve_refuses_a_store_replaced_at_its_path(tmp_path, data, method):
    # `ntkd solve` is handed the store's path: after another call replaced the store there,
    # it solved that file, not the store S the caller opened (method='numpy' used S).
    S, fn, want, replace = solved(tmp_path, data, method)
    np.testing.assert_allclose(fn("ntk", k_test_train=S), want, rtol=1e-6, atol=1e-9)  # undisturbed
    S, fn, want, replace = solved(tmp_path / "2", data, method)
    fn_numpy = predict.gp_inference(S, np.linspace(-1, 1, 2 * N1).reshape(N1, 2), diag_reg=1e-3, method="numpy")
    replace()
    with pytest.raises(ntkd.StoreError, match=r"k\.ntk: the store at this path is no longer the one opened"):
        got = fn("ntk", k_test_train=S)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9, err_msg="another store was solved")
    # S itself, still open, holds its own kernel: method='numpy' predicts from it.
    np.testing.assert_allclose(fn_numpy("ntk", k_test_train=S), want, rtol=1e-9, atol=1e-12)


def test_solve_refuses_a_store_replaced_while_it_ran(tmp_path, data, monkeypatch):
    # The store replaced after the check before the solve, while the program starts.
    S, fn, want, replace = solved(tmp_path, data, "lapack")
    state = racing(monkeypatch, replace, when=lambda args: args[0] == "solve")
    with pytest.raises(ntkd.StoreError, match="no longer the one opened for this prediction"):
        got = fn("ntk", k_test_train=S)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9, err_msg="another store was solved")
    assert state["raced"]


def test_solve_of_a_closed_store_raises(tmp_path, data):
    S, fn, _, _ = solved(tmp_path, data, "lapack")
    S.close()
    with pytest.raises(ValueError, match="is closed"):
        fn("ntk", k_test_train=S)
