#!/usr/bin/env python3
"""neural-tangents' own predictions for ntkd.predict's tests (tests/python/test_predict.py):
writes tests/data/ref_predict.npz.

Run with the pinned neural-tangents venv of scripts/nt_reference.sh (0.6.5, jax 0.4.23):

    /opt/ntkd-ref-venv/bin/python scripts/nt_predict_reference.py [OUT.npz]

One fully-connected network, float64 (jax_enable_x64), 24 train and 7 test samples of
dimension 5, real targets of 3 columns (every row distinct: the hard case for ntkd solve,
which solves class labels), and a 1-D target. Keys:

    x_train, x_test, y_train (24, 3), y_vec (24,)
    k_{dd,td,tt}_{nngp,ntk}                 stax kernel_fn(x_train, None), (x_test, x_train), (x_test, None)
    gp_{case}_{get}_mean, gp_{case}_{get}_cov
        nt.predict.gp_inference(k_dd, y_train, diag_reg, diag_reg_absolute_scale)(get, k_td, k_tt)
        get: nngp, ntk, ntkgp; case: rel (diag_reg = 0.01), abs (diag_reg = 0.05, absolute scale)
    gp_rel_{get}_mean_nocov                 the same without k_test_test (means only)
    gp_vec_{get}_mean                       y_vec with trace_axes=(), diag_reg = 0.01
    gd_{get}_mean, gd_{get}_cov
        nt.predict.gradient_descent_mse_ensemble(kernel_fn, x_train, y_train,
        diag_reg=0.01)(t=None, x_test=x_test, get=get, compute_cov=True), get: nngp, ntk
    gd_train_{get}_mean, gd_train_{get}_cov x_test=None (the train set)
    arch                                    the network in ntkd's stax, as a string of Python
    t_grid                                  times, shape (2, 2)
    gdt_{grid,num}_{get}_{mean,cov}         gradient_descent_mse_ensemble(..., learning_rate=2,
                                            diag_reg=0.01)(t, x_test, get, compute_cov=True), t: t_grid, 7
    gdt_train_{grid,num}_{get}_{mean,cov}   the same with x_test=None (the train set)
    fx_train_0 (24, 3), fx_test_0 (7, 3)    outputs at t = 0
    mse_{case}_{inf,grid,num}_{train,test}  gradient_descent_mse(k_dd.ntk, y_train, learning_rate=0.5,
                                            diag_reg, diag_reg_absolute_scale)(t, fx_train_0, fx_test_0,
                                            k_td.ntk), t: None, t_grid, 7; case: rel, abs as above
    mse_vec_grid_test                       gradient_descent_mse(k_dd.nngp, y_vec, trace_axes=())(t_grid, 0,
                                            0, k_td.nngp)[1]
    lr_max, lr_max_momentum                 max_learning_rate(k_dd.ntk), (k_dd.ntk, 72, 0.9)
    y_onehot (24, 3)                        classes 0, 1, 2, 0, 1, ... one-hot
    ode_{plain,mom}_{grid,num}_{train,test} gradient_descent(cross_entropy, k_dd.ntk, y_onehot, learning_rate=2,
                                            momentum=None or 0.9)(t, fx_train_0, fx_test_0, k_td.ntk),
                                            cross_entropy(fx, y) = -mean(log_softmax(fx) * y), t: t_grid, 7
    ode_testonly_test                       the same, momentum None, (t_grid, None, fx_test_0, k_td.ntk)
    qx_train_0 (24, 3), qx_test_0 (7, 3)    velocities at t = 0
    ode_state_{fx,qx}_{train,test}          momentum 0.9: the ODEState at t = 3 from ODEState(fx_train_0,
                                            fx_test_0, qx_train_0, qx_test_0)
    ode_vec_grid_test                       gradient_descent(logistic, k_dd.nngp, y_vec, learning_rate=0.5,
                                            trace_axes=())(t_grid, 0., 0., k_td.nngp)[1], logistic(fx, y) =
                                            mean(softplus(-sign(y) fx))

The network: stax.serial(Dense(512, W_std=1.5, b_std=0.1), Relu(), Dense(512, W_std=1.5,
b_std=0.1), Erf(), Dense(3, W_std=1.5, b_std=0.1)).
"""

import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402
import neural_tangents as nt  # noqa: E402
from neural_tangents import stax  # noqa: E402

ARCH = ("stax.serial(stax.Dense(512, W_std=1.5, b_std=0.1), stax.Relu(), stax.Dense(512, W_std=1.5, b_std=0.1), "
        "stax.Erf(), stax.Dense(3, W_std=1.5, b_std=0.1))")


def _dynamics(k_dd, k_td, y_vec, f0, ft0, T):
    """nt.predict.gradient_descent on two losses (a second generator: the arrays before stay as they were)."""
    import jax.numpy as jnp
    r = np.random.default_rng(2028)
    out = {"y_onehot": np.eye(3)[np.arange(24) % 3], "qx_train_0": r.standard_normal((24, 3)),
           "qx_test_0": r.standard_normal((7, 3))}

    def cross_entropy(fx, y):
        return -jnp.mean(jax.nn.log_softmax(fx) * y)

    def logistic(fx, y):
        return jnp.mean(jax.nn.softplus(-jnp.sign(y) * fx))

    for name, momentum in (("plain", None), ("mom", 0.9)):
        fn = nt.predict.gradient_descent(cross_entropy, k_dd.ntk, out["y_onehot"], learning_rate=2., momentum=momentum)
        for tname, t in (("grid", T), ("num", 7.0)):
            tr, te = fn(t, f0, ft0, k_td.ntk)
            out[f"ode_{name}_{tname}_train"], out[f"ode_{name}_{tname}_test"] = np.asarray(tr), np.asarray(te)
        if momentum is None:
            out["ode_testonly_test"] = np.asarray(fn(T, None, ft0, k_td.ntk))
        else:
            s = fn(3.0, nt.predict.ODEState(f0, ft0, out["qx_train_0"], out["qx_test_0"]), None, k_td.ntk)
            for a in ("fx_train", "fx_test", "qx_train", "qx_test"):
                out[f"ode_state_{a}"] = np.asarray(getattr(s, a))
    fn = nt.predict.gradient_descent(logistic, k_dd.nngp, y_vec, learning_rate=0.5, trace_axes=())
    out["ode_vec_grid_test"] = np.asarray(fn(T, 0., 0., k_td.nngp)[1])
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    usage = "usage: nt_predict_reference.py [OUT.npz] (default tests/data/ref_predict.npz)"
    if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
        print(usage)
        return
    if len(sys.argv) > 2 or (len(sys.argv) == 2 and sys.argv[1].startswith("-")):
        sys.exit(f"{usage}; not: {' '.join(sys.argv[1:])}")
    out_path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "tests", "data", "ref_predict.npz")
    if not out_path.endswith(".npz"):
        out_path += ".npz"  # np.savez_compressed appends it: the message names the file written
    _, _, kernel_fn = eval(ARCH)
    r = np.random.default_rng(2027)
    x_train = r.standard_normal((24, 5))
    x_test = r.standard_normal((7, 5))
    y_train = r.standard_normal((24, 3))
    y_vec = r.standard_normal(24)
    out = {"x_train": x_train, "x_test": x_test, "y_train": y_train, "y_vec": y_vec, "arch": np.array(ARCH)}
    k_dd = kernel_fn(x_train, None, ("nngp", "ntk"))
    k_td = kernel_fn(x_test, x_train, ("nngp", "ntk"))
    k_tt = kernel_fn(x_test, None, ("nngp", "ntk"))
    for name, k in (("dd", k_dd), ("td", k_td), ("tt", k_tt)):
        for g in ("nngp", "ntk"):
            out[f"k_{name}_{g}"] = np.asarray(getattr(k, g))
    gets = ("nngp", "ntk", "ntkgp")
    for case, reg, absolute in (("rel", 0.01, False), ("abs", 0.05, True)):
        fn = nt.predict.gp_inference(k_dd, y_train, diag_reg=reg, diag_reg_absolute_scale=absolute)
        res = fn(gets, k_td, k_tt)
        for g in gets:
            out[f"gp_{case}_{g}_mean"] = np.asarray(getattr(res, g).mean)
            out[f"gp_{case}_{g}_cov"] = np.asarray(getattr(res, g).covariance)
    fn = nt.predict.gp_inference(k_dd, y_train, diag_reg=0.01)
    res = fn(gets, k_td)
    for g in gets:
        out[f"gp_rel_{g}_mean_nocov"] = np.asarray(getattr(res, g))
    fn = nt.predict.gp_inference(k_dd, y_vec, diag_reg=0.01, trace_axes=())
    for g in ("nngp", "ntk"):
        out[f"gp_vec_{g}_mean"] = np.asarray(fn(g, k_td))
    fn = nt.predict.gradient_descent_mse_ensemble(kernel_fn, x_train, y_train, diag_reg=0.01)
    for g in ("nngp", "ntk"):
        res = fn(None, x_test, g, compute_cov=True)
        out[f"gd_{g}_mean"], out[f"gd_{g}_cov"] = np.asarray(res.mean), np.asarray(res.covariance)
        res = fn(None, None, g, compute_cov=True)
        out[f"gd_train_{g}_mean"], out[f"gd_train_{g}_cov"] = np.asarray(res.mean), np.asarray(res.covariance)
    # finite times, learning_rate 2: an array of times (its axes lead) and a number
    out["t_grid"] = T = np.array([[0.5, 3.0], [20.0, 1e3]])
    fn = nt.predict.gradient_descent_mse_ensemble(kernel_fn, x_train, y_train, learning_rate=2., diag_reg=0.01)
    for tname, t in (("grid", T), ("num", 7.0)):
        for g in ("nngp", "ntk"):
            res = fn(t, x_test, g, compute_cov=True)
            out[f"gdt_{tname}_{g}_mean"], out[f"gdt_{tname}_{g}_cov"] = np.asarray(res.mean), np.asarray(res.covariance)
            res = fn(t, None, g, compute_cov=True)
            out[f"gdt_train_{tname}_{g}_mean"] = np.asarray(res.mean)
            out[f"gdt_train_{tname}_{g}_cov"] = np.asarray(res.covariance)
    out["fx_train_0"] = f0 = r.standard_normal((24, 3))
    out["fx_test_0"] = ft0 = r.standard_normal((7, 3))
    for case, reg, absolute in (("rel", 0.01, False), ("abs", 0.05, True)):
        fn = nt.predict.gradient_descent_mse(k_dd.ntk, y_train, learning_rate=0.5, diag_reg=reg,
                                             diag_reg_absolute_scale=absolute)
        for tname, t in (("inf", None), ("grid", T), ("num", 7.0)):
            tr, te = fn(t, f0, ft0, k_td.ntk)
            out[f"mse_{case}_{tname}_train"], out[f"mse_{case}_{tname}_test"] = np.asarray(tr), np.asarray(te)
    fn = nt.predict.gradient_descent_mse(k_dd.nngp, y_vec, trace_axes=())
    out["mse_vec_grid_test"] = np.asarray(fn(T, 0., 0., k_td.nngp)[1])
    out["lr_max"] = np.asarray(nt.predict.max_learning_rate(k_dd.ntk))
    out["lr_max_momentum"] = np.asarray(nt.predict.max_learning_rate(k_dd.ntk, 72, 0.9))
    out.update(_dynamics(k_dd, k_td, y_vec, f0, ft0, T))
    for k, v in out.items():
        if v.dtype.kind == "f":
            assert v.dtype == np.float64 and np.all(np.isfinite(v)), k
    np.savez_compressed(out_path, **out)
    print(f"wrote {out_path}: {len(out)} arrays (neural-tangents {nt.__version__}, jax {jax.__version__})")


if __name__ == "__main__":
    main()
