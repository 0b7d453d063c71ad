"""neural-tangents' stax semantics that ntkd.stax must keep or refuse, found
by running the same user code under both libraries (cases where ntkd once
returned other numbers than neural-tangents without saying so)."""

import functools
import numpy as np
import pytest

import ntkd
from ntkd import stax


def test_spatial_data_without_readout_is_refused(rng):
    # neural-tangents applies Dense position by position to (N, L, C) or
    # (N, H, W, C) data and returns an (n1, n2, L, L) or (n1, n2, H, H, W, W)
    # kernel; ntkd once returned the (n1, n2) kernel of the flattened samples.
    _, _, kernel_fn = stax.serial(stax.Dense(3, W_std=1.4, b_std=0.1), stax.Relu(), stax.Dense(1))
    for shape in ((3, 6, 2), (3, 5, 4, 2)):
        x = rng.standard_normal(shape)
        with pytest.raises(NotImplementedError, match="no Flatten, GlobalAvgPool or GlobalSumPool"):
            kernel_fn(x, None, "ntk")
    _, _, identity = stax.Identity()
    with pytest.raises(NotImplementedError, match="keeps the spatial axes"):
        identity(rng.standard_normal((2, 3, 3, 1)))


def test_spatial_data_with_readout(rng):
    # With a readout the numbers are neural-tangents': Flatten first is the
    # MLP of the flattened samples.
    x = rng.standard_normal((3, 6, 2))
    _, _, flat_first = stax.serial(stax.Flatten(), stax.Dense(3, W_std=1.4, b_std=0.1), stax.Relu(), stax.Dense(1))
    _, _, mlp = stax.serial(stax.Dense(3, W_std=1.4, b_std=0.1), stax.Relu(), stax.Dense(1))
    np.testing.assert_allclose(flat_first(x, None, "ntk"), mlp(x.reshape(3, -1), None, "ntk"), rtol=1e-13)


def test_neural_tangents_keywords(rng):
    # diagonal_batch=True is neural-tangents' default, and with mask_constant=None
    # and pattern=None it leaves the kernel as it is: ntkd once raised TypeError
    # ("unexpected keyword argument") for them.
    x = rng.standard_normal((3, 4))
    _, _, kernel_fn = stax.serial(stax.Dense(3), stax.Relu(), stax.Dense(1))
    k = kernel_fn(x, None, "ntk")
    for kw in ({"diagonal_batch": True}, {"diagonal_batch": False}, {"diagonal_spatial": True},
               {"diagonal_spatial": False}, {"mask_constant": None}, {"pattern": None}, {"batch_size": 2}):
        np.testing.assert_array_equal(kernel_fn(x, None, "ntk", **kw), k)
    with pytest.raises(NotImplementedError, match="mask_constant"):
        kernel_fn(x, None, "ntk", mask_constant=1e9)
    with pytest.raises(TypeError, match="unexpected keyword argument 'diagonal_batches'"):
        kernel_fn(x, None, "ntk", diagonal_batches=False)
    _, _, cnn = stax.serial(stax.Conv(3, (2, 2)), stax.Relu(), stax.Flatten(), stax.Dense(1))
    with pytest.raises(NotImplementedError, match="diagonal_spatial"):
        cnn(rng.standard_normal((2, 4, 4, 1)), None, "ntk", diagonal_spatial=True)


def test_jax_transforms_and_kernel_inputs_say_why(rng):
    # vmap and grad pass tracers with values JAX computes, which ntkd cannot
    # give derivatives or batches of; ntkd refused them as "not an array".
    # (JAX is not needed here: a tracer is recognised by its type's name;
    # jax.jit's tracers are computed: test_jax_jit_computes_the_kernels.)
    class BatchTracer:
        shape = (3, 4)

    _, _, kernel_fn = stax.serial(stax.Dense(3), stax.Relu(), stax.Dense(1))
    with pytest.raises(TypeError, match=r"JAX tracer \(BatchTracer\).*vmap and grad cannot trace it \(jax.jit can\)"):
        kernel_fn(BatchTracer(), None, "ntk")
    k = kernel_fn(rng.standard_normal((3, 4)))
    with pytest.raises(TypeError, match="is a Kernel"):
        kernel_fn(k, None, "ntk")
    # a list of arrays is neural-tangents' multi-input form: ntkd stacked it
    # into one array and returned a kernel of the wrong samples
    xa, xb = rng.standard_normal((4, 5)), rng.standard_normal((4, 5))
    with pytest.raises(TypeError, match="x1 is a list: .*multi-input"):
        kernel_fn([xa, xb], None, "ntk")
    with pytest.raises(TypeError, match="x2 is a tuple"):
        kernel_fn(xa, (xa, xb), "nngp")
    # get in x2's place: it said "x2 must hold real numbers, not <U3"
    with pytest.raises(TypeError, match=r"x2 is the string 'ntk': .*kernel_fn\(x1, None, 'ntk'\)"):
        kernel_fn(xa, "ntk")


def test_predict_has_neural_tangents_names():
    # neural-tangents' predict.gradient_descent (any loss) and ODEState were refused by name;
    # they are computed now (tests/python/test_gradient_descent.py), as the MSE functions are
    # (tests/python/test_predict.py). Every public name of neural_tangents.predict is here.
    from ntkd import predict
    import importlib.util
    nt_names = ("gradient_descent", "gradient_descent_mse", "gradient_descent_mse_ensemble", "gp_inference",
                "max_learning_rate", "ODEState", "Gaussian")  # neural_tangents.predict's public names (0.6.5)
    assert all(callable(getattr(predict, name)) for name in nt_names)
    s = predict.ODEState(fx_train=np.zeros(3))
    assert s.fx_train.shape == (3,) and s.fx_test is None and s.qx_train is None and s.qx_test is None
    if importlib.util.find_spec("neural_tangents"):
        import neural_tangents
        assert {n for n in dir(neural_tangents.predict) if not n.startswith("_")} <= set(dir(predict))


def test_negative_stds(rng):
    # stax squares W_std and b_std (a negative one gives the kernel of its absolute
    # value); ntkd refused them ("W_std must be a number >= 0").
    x = rng.standard_normal((3, 4))
    k = {}
    for sign in (1, -1):
        _, _, kernel_fn = stax.serial(stax.Dense(3, W_std=1.4 * sign, b_std=0.3 * sign), stax.Relu(),
                                      stax.Dense(1, W_std=-2.0 if sign < 0 else 2.0))
        k[sign] = kernel_fn(x, None, "ntk")
    np.testing.assert_array_equal(k[-1], k[1])
    images = rng.standard_normal((2, 4, 4, 1))
    _, _, cnn = stax.serial(stax.Conv(2, (2, 2), W_std=-1.5, b_std=-0.1), stax.Relu(), stax.Flatten(), stax.Dense(1))
    _, _, cnn_pos = stax.serial(stax.Conv(2, (2, 2), W_std=1.5, b_std=0.1), stax.Relu(), stax.Flatten(), stax.Dense(1))
    np.testing.assert_array_equal(cnn(images, None, "ntk"), cnn_pos(images, None, "ntk"))


def test_network_errors_come_before_data_errors(rng, tmp_path):
    # neural-tangents' parallel without FanOut takes a tuple of inputs; ntkd
    # computes parallel only after FanOut, and must say that, not judge the
    # tuple stacked into one (2, 3, 4) array ("no Flatten ... spatial axes").
    xa, xb = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    _, _, kernel_fn = stax.serial(stax.parallel(stax.Dense(3), stax.Dense(3)), stax.FanInSum())
    with pytest.raises(ValueError, match=r"FanOut\(n\) parallel"):
        kernel_fn((xa, xb), None, "ntk")
    import ntkd
    with pytest.raises(ValueError, match=r"FanOut\(n\) parallel"):
        ntkd.batch(kernel_fn, (xa, xb), store=str(tmp_path / "k.ntk"))


def test_mixed_dtypes_promote_to_float64(rng):
    # JAX promotes float32 with float64 to float64; ntkd once took x1's
    # dtype and computed such a pair in float32.
    _, _, kernel_fn = stax.serial(stax.Dense(3, W_std=1.4, b_std=0.1), stax.Erf(), stax.Dense(1))
    x1, x2 = rng.standard_normal((3, 5)), rng.standard_normal((4, 5))
    want = kernel_fn(x1, x2, "ntk")
    for a, b in ((x1.astype(np.float32), x2), (x1, x2.astype(np.float32))):
        got = kernel_fn(a, b, "ntk")
        assert got.dtype == np.float64
        np.testing.assert_allclose(got, kernel_fn(a.astype(np.float64), b.astype(np.float64), "ntk"), rtol=1e-15)
    assert kernel_fn(x1.astype(np.float32), x2.astype(np.float32), "ntk").dtype == np.float32
    assert want.dtype == np.float64


class _FakeJaxConfig:
    def __init__(self, x64):
        self.jax_enable_x64 = x64


def test_jax_enable_x64_gives_float64_kernels(rng, monkeypatch, tmp_path):
    # Under jax_enable_x64 neural-tangents computes float32 (and integer)
    # data in float64; ntkd computed them in float32, and an ill-conditioned
    # regression's predictions were up to 78 % off neural-tangents'. JAX is
    # not installed here: a module of its name with the flag stands in.
    import sys
    import types
    _, _, kernel_fn = stax.serial(stax.Dense(3, W_std=1.4, b_std=0.1), stax.Erf(), stax.Dense(1))
    x1, x2 = rng.standard_normal((3, 5)).astype(np.float32), rng.standard_normal((4, 5)).astype(np.float32)
    want = kernel_fn(x1.astype(np.float64), x2.astype(np.float64), "ntk")
    jax = types.ModuleType("jax")
    for x64 in (False, True):
        jax.config = _FakeJaxConfig(x64)
        monkeypatch.setitem(sys.modules, "jax", jax)
        for a, b in ((x1, x2), (x1, None), ((x1 * 4).astype(np.int32), None)):
            got = kernel_fn(a, b, "ntk")
            assert got.dtype == (np.float64 if x64 else np.float32), (x64, a.dtype)
        np.testing.assert_array_equal(kernel_fn(x1, x2, "ntk") if x64 else want, want)
        S = ntkd.batch(kernel_fn, x1, x2, store=tmp_path / f"b{x64}.ntk", progress=False)
        assert S.precision == ("float64" if x64 else "float32")
        S.close()
    jax.config = object()  # a JAX whose config has neither spelling: its default, float32
    assert kernel_fn(x1, x2, "ntk").dtype == np.float32


class DynamicJaxprTracer:
    """jax.jit's abstract input as ntkd meets it: a shape and a dtype at tracing
    (the value rides along here only for the stand-in pure_callback)."""

    def __init__(self, value):
        self.value, self.shape, self.dtype, self.ndim = value, value.shape, value.dtype, value.ndim


def _canonical(a, x64):
    """An array as JAX holds it: float64 becomes float32 without jax_enable_x64."""
    return a.astype(np.float32) if not x64 and a.dtype == np.float64 else a


def _fake_jax(x64):
    """A module named jax with what a jitted kernel_fn uses: ShapeDtypeStruct and
    pure_callback (calls the host function with the values, and checks what it
    returns against the shapes declared at tracing)."""
    import collections
    import types
    jax = types.ModuleType("jax")
    jax.config = _FakeJaxConfig(x64)
    jax.ShapeDtypeStruct = collections.namedtuple("ShapeDtypeStruct", "shape dtype")
    jax.declared = []

    def pure_callback(fn, shapes, *args):
        jax.declared.append(shapes)
        out = fn(*[_canonical(a.value if isinstance(a, DynamicJaxprTracer) else a, x64) for a in args])
        assert [(o.shape, o.dtype) for o in out] == [(s.shape, np.dtype(s.dtype)) for s in shapes]
        return out

    jax.pure_callback = pure_callback
    return jax


def test_jax_jit_computes_the_kernels(rng, monkeypatch):
    # neural-tangents' examples jit kernel_fn: jax.jit(kernel_fn,
    # static_argnames='get'). JAX then traces it with abstract inputs (no
    # values), which ntkd refused with a TypeError; it now declares the
    # kernels' shapes and dtype at tracing and computes them in a
    # jax.pure_callback. A stand-in JAX here (JAX is not in this test's
    # environment); test_jax_jit_with_jax runs the real one where installed.
    import sys
    _, _, kernel_fn = stax.serial(stax.Dense(3, W_std=1.4, b_std=0.1), stax.Erf(), stax.Dense(1))
    x1, x2 = rng.standard_normal((3, 5)).astype(np.float32), rng.standard_normal((4, 5)).astype(np.float32)
    for x64 in (False, True):
        jax = _fake_jax(x64)
        monkeypatch.setitem(sys.modules, "jax", jax)
        # a float64 input too (a numpy array beside a traced one): JAX hands
        # it over as float32 without x64, and refuses a float64 result there
        for a, b in ((x1, x2), (x1, None), (x1.astype(np.float64), x2), (x1, x2.astype(np.float64))):
            want = kernel_fn(_canonical(a, x64), None if b is None else _canonical(b, x64))
            ta, tb = DynamicJaxprTracer(a), None if b is None else DynamicJaxprTracer(b)
            got = kernel_fn(ta, tb, "ntk")
            np.testing.assert_array_equal(got, want.ntk)
            assert jax.declared[-1] == (jax.ShapeDtypeStruct((3, len(b) if b is not None else 3), want.ntk.dtype),)
            pair = kernel_fn(ta, b, ("ntk", "nngp"))  # one input traced, the other concrete
            assert type(pair).__name__ == "AnalyticKernel"
            np.testing.assert_array_equal(pair.ntk, want.ntk)
            np.testing.assert_array_equal(pair.nngp, want.nngp)
            k = kernel_fn(ta, tb)  # get=None: a Kernel (a namedtuple: a pytree to JAX)
            assert isinstance(k, tuple) and k._fields == ("nngp", "ntk")
            np.testing.assert_array_equal(k.nngp, want.nngp)
        assert np.dtype(jax.declared[0][0].dtype) == (np.float64 if x64 else np.float32)
    # what shapes tell is judged at tracing, not inside the compiled call
    with pytest.raises(ValueError, match="x2's samples have shape"):
        kernel_fn(DynamicJaxprTracer(x1), DynamicJaxprTracer(x2[:, :4]), "ntk")
    with pytest.raises(NotImplementedError, match="no Flatten"):
        kernel_fn(DynamicJaxprTracer(x1[:, :, None, None]), None, "ntk")
    with pytest.raises(TypeError, match="must hold real numbers"):
        kernel_fn(DynamicJaxprTracer(x1.astype(np.complex64)), None, "ntk")
    calls = len(jax.declared)
    with pytest.raises(NotImplementedError, match="mask_constant"):
        kernel_fn(DynamicJaxprTracer(x1), None, "ntk", mask_constant=0.0)
    assert len(jax.declared) == calls  # at tracing, not from inside the compiled call


def test_jax_jit_with_jax(rng):
    # The real JAX where it is installed (not in CI's test environment; run
    # with /opt/ntkd-ref-venv, scripts/nt_reference.sh's venv).
    jax = pytest.importorskip("jax")
    _, _, kernel_fn = stax.serial(stax.Dense(16, W_std=1.5, b_std=0.1), stax.Relu(), stax.Dense(1))
    x1, x2 = rng.standard_normal((6, 5)).astype(np.float32), rng.standard_normal((7, 5)).astype(np.float32)
    want = kernel_fn(x1, x2)
    jitted = jax.jit(kernel_fn, static_argnames="get")
    np.testing.assert_array_equal(np.asarray(jitted(x1, x2, "ntk")), want.ntk)
    np.testing.assert_array_equal(np.asarray(jitted(x1, x2, ("nngp", "ntk")).nngp), want.nngp)
    k = jax.jit(kernel_fn)(x1, x2)
    np.testing.assert_array_equal(np.asarray(k.ntk), want.ntk)
    # a float64 array closed over beside a traced input: float32 without
    # jax_enable_x64, as JAX holds it (a float64 result was declared, refused)
    x2_64 = x2.astype(np.float64)
    got = jax.jit(lambda a: kernel_fn(a, x2_64, "ntk"))(x1)
    assert got.dtype == (np.float64 if jax.config.jax_enable_x64 else np.float32)
    np.testing.assert_allclose(np.asarray(got), want.ntk, rtol=1e-6)
    assert float(jax.jit(lambda a, b: kernel_fn(a, b, "ntk").sum())(x1, x2)) == pytest.approx(float(want.ntk.sum()),
                                                                                              rel=1e-6)


def test_neural_tangents_batch_takes_the_kernel(rng):
    # A user who changes only the stax import keeps nt.batch(kernel_fn,
    # batch_size): for get=None it raised "Expected kernel to be either a
    # namedtuple, `Kernel`, or `jnp.ndarray`" on ntkd's Kernel, now a
    # namedtuple. Where neural-tangents is installed (the reference venv).
    nt = pytest.importorskip("neural_tangents")
    _, _, kernel_fn = stax.serial(stax.Dense(16, W_std=1.5, b_std=0.1), stax.Relu(), stax.Dense(1))
    x1, x2 = rng.standard_normal((10, 5)).astype(np.float32), rng.standard_normal((15, 5)).astype(np.float32)
    want = kernel_fn(x1, x2)
    got = nt.batch(kernel_fn, batch_size=5)(x1, x2)
    np.testing.assert_allclose(np.asarray(got.nngp), want.nngp, rtol=1e-5)  # float32, block by block
    np.testing.assert_allclose(np.asarray(got.ntk), want.ntk, rtol=1e-5)


def test_kernel_is_a_namedtuple(rng):
    # what nt.batch and JAX take (above), without either installed
    _, _, kernel_fn = stax.serial(stax.Dense(16, W_std=1.5, b_std=0.1), stax.Relu(), stax.Dense(1))
    x = rng.standard_normal((4, 5))
    k = kernel_fn(x)
    nngp, ntk = k
    assert k._fields == ("nngp", "ntk") and nngp is k.nngp and ntk is k.ntk
    assert type(k)(*k) == k and "nngp=(4, 4)" in repr(k)


def test_ensemble_kernels_in_one_precision(rng):
    # float64 x_train with float32 x_test: the test x test kernel was float32
    # beside float64 train and test x train kernels, and the covariance was
    # 1.5e-3 off; all three are now float64, as JAX computes them.
    _, _, kernel_fn = stax.serial(stax.Dense(16, W_std=1.5, b_std=0.1), stax.Erf(), stax.Dense(2))
    xtr = rng.standard_normal((40, 5)).astype(np.float32).astype(np.float64)  # the same values in both dtypes
    xte = (xtr[:8] + 0.01 * rng.standard_normal((8, 5))).astype(np.float32)
    ytr = rng.standard_normal((40, 2))
    want = ntkd.predict.gradient_descent_mse_ensemble(kernel_fn, xtr, ytr, diag_reg=1e-6)(
        x_test=xte.astype(np.float64), get="nngp", compute_cov=True)
    for a, b in ((xtr, xte), (xtr.astype(np.float32), xte.astype(np.float64))):
        fn = ntkd.predict.gradient_descent_mse_ensemble(kernel_fn, a, ytr, diag_reg=1e-6)
        fn(x_test=a[:3].astype(np.float32), get="nngp", compute_cov=True)  # another precision first (float32 pair)
        got = fn(x_test=b, get="nngp", compute_cov=True)
        np.testing.assert_array_equal(got.covariance, want.covariance)
        np.testing.assert_array_equal(got.mean, want.mean)


def test_dense_channel_axis_1_on_vectors(rng):
    # On (N, D) vectors axis 1 is the channel axis (neural-tangents computes
    # the same kernel as with -1); ntkd once refused it. On images it is
    # another axis than ntkd's channels: refused by kernel_fn, naming it.
    _, _, one = stax.serial(stax.Dense(3, W_std=1.4, b_std=0.1, channel_axis=1), stax.Relu(), stax.Dense(1))
    _, _, last = stax.serial(stax.Dense(3, W_std=1.4, b_std=0.1), stax.Relu(), stax.Dense(1))
    x = rng.standard_normal((4, 6))
    np.testing.assert_array_equal(one(x, None, "ntk"), last(x, None, "ntk"))
    _, _, cnn = stax.serial(stax.Conv(2, (2, 2)), stax.Relu(), stax.Flatten(),
                            stax.Dense(1, channel_axis=1))
    with pytest.raises(NotImplementedError, match=r"stax.Dense\(channel_axis=1\) takes axis 1"):
        cnn(rng.standard_normal((2, 4, 4, 1)), None, "ntk")
    with pytest.raises(NotImplementedError, match="channel_axis=2"):
        stax.Dense(1, channel_axis=2)


def test_concat_axis_is_resolved_against_the_data(rng):
    # FanInConcat(axis=1) joins the channels of (N, D) vectors and axis=2
    # those of (N, L, C) sequences: the output is not Gaussian, so
    # neural-tangents refuses a nonlinearity after it. ntkd once took the
    # axis for a spatial one while parsing and returned the nonlinearity of
    # the mixed covariance (21 % off the network's kernel), with no error.
    from ntkd.errors import ArchError

    def net(axis, *after):
        return stax.serial(stax.Dense(2), stax.FanOut(2),
                           stax.parallel(stax.Dense(2, W_std=1.5), stax.Dense(3, b_std=0.5)),
                           stax.FanInConcat(axis=axis), *after, stax.Dense(1))[2]

    vectors, sequences = rng.standard_normal((3, 4)), rng.standard_normal((3, 5, 2))
    with pytest.raises(ArchError, match=r"layer 7 \(Erf\).*must be Gaussian"):
        net(1, stax.Erf())(vectors, None, "nngp")
    with pytest.raises(ArchError, match=r"layer 7 \(Erf\).*must be Gaussian"):
        net(2, stax.Erf(), stax.GlobalAvgPool())(sequences, None, "nngp")
    # Along the rows of sequences (equal widths) the output is Gaussian: Erf may follow.
    rows = stax.serial(stax.Dense(2), stax.FanOut(2), stax.parallel(stax.Dense(2, W_std=1.5), stax.Dense(2)),
                       stax.FanInConcat(axis=1), stax.Erf(), stax.GlobalAvgPool(), stax.Dense(1))[2]
    assert np.isfinite(rows(sequences, None, "nngp")).all()
    # Axis 1 of vectors is the channels whatever the branches end with, as -1.
    _, _, one = stax.serial(stax.Dense(2), stax.FanOut(2), stax.parallel(stax.Relu(), stax.Dense(3)),
                            stax.FanInConcat(axis=1), stax.Dense(1))
    _, _, last = stax.serial(stax.Dense(2), stax.FanOut(2), stax.parallel(stax.Relu(), stax.Dense(3)),
                             stax.FanInConcat(), stax.Dense(1))
    np.testing.assert_array_equal(one(vectors, None, "ntk"), last(vectors, None, "ntk"))


def test_1d_layers_on_images_are_refused_by_name(rng):
    # The other way round (neural-tangents refuses it too): a 1-D pool in an
    # image network was taken as a sign of sequences, and the message blamed
    # the 2-D Conv before it and called the images "(N, L, C) data".
    from ntkd.errors import ArchError
    images = rng.standard_normal((4, 5, 5, 2))
    for layer, what in ((stax.AvgPool((2,)), r"layer 2: AvgPool is 1-D \(window \(2,\)\)"),
                        (stax.Conv(3, (2,)), r"layer 2: Conv is 1-D \(filter \(2,\)\)")):
        kernel_fn = stax.serial(stax.Conv(4, (2, 2), padding="SAME"), layer, stax.Flatten(), stax.Dense(1))[2]
        with pytest.raises(ArchError, match=what + r" on \(N, H, W, C\) images 5 wide: .*e.g. \(2, 2\)"):
            kernel_fn(images, None, "nngp")
    # images of width 1 are sequences to 1-D layers, as before
    kernel_fn = stax.serial(stax.Conv(4, (2,), padding="SAME"), stax.Relu(), stax.Flatten(), stax.Dense(1))[2]
    np.testing.assert_array_equal(kernel_fn(images[:, :, :1, :], None, "nngp"), kernel_fn(images[:, :, 0, :], None,
                                                                                           "nngp"))


def test_2d_layers_on_sequences_are_refused(rng, tmp_path):
    # neural-tangents refuses a conv or pooling layer whose filter, window or
    # strides have two entries on (N, L, C) sequences. ntkd holds sequences as
    # L x 1 images and once computed such a layer as a 2-D one over them, with
    # no error: a 3 x 3 SAME filter gave another kernel than the 1-D (3,) one.
    import ntkd
    from ntkd.errors import ArchError
    seq = rng.standard_normal((3, 7, 2))

    def net(*layers):
        return stax.serial(stax.Conv(4, (1,)), *layers, stax.Relu(), stax.GlobalAvgPool(), stax.Dense(1))[2]

    for layers, given, fix in (
            ((stax.Conv(8, (3, 3), padding="SAME"),), r"stax.Conv\(8, filter_shape=\(3, 3\)\)",
             r"stax.Conv\(8, filter_shape=\(3,\), ...\)"),
            ((stax.Conv(8, (3, 1)),), r"stax.Conv\(8, filter_shape=\(3, 1\)\)", r"filter_shape=\(3,\)"),
            ((stax.Conv(8, (1, 1)),), r"stax.Conv\(8, filter_shape=\(1, 1\)\)", r"filter_shape=\(1,\)"),
            ((stax.Conv(8, (3,), strides=(2, 1)),), r"stax.Conv\(8, filter_shape=\(3,\), strides=\(2, 1\)\)",
             r"filter_shape=\(3,\), strides=\(2,\), ...\)"),
            ((stax.AvgPool((2, 2)), stax.Conv(4, (3,))), r"stax.AvgPool\(window_shape=\(2, 2\)\)",
             r"stax.AvgPool\(window_shape=\(2,\), ...\)"),
            ((stax.FanOut(2), stax.parallel(stax.SumPool((2, 1), (2, 1)), stax.SumPool((2,), (2,))), stax.FanInSum(),
              stax.Conv(4, (1,))), r"stax.SumPool\(window_shape=\(2, 1\), strides=\(2, 1\)\)",
             r"window_shape=\(2,\), strides=\(2,\), ...\)")):
        kernel_fn = net(*layers)
        with pytest.raises(NotImplementedError, match=r"x1 has shape \(3, 7, 2\), \(N, L, C\) sequences, which take "
                           r"1-D layers only: " + given + " is 2-D .*write its 1-D form, .*" + fix):
            kernel_fn(seq, None, "nngp")
        with pytest.raises(NotImplementedError, match="which take 1-D layers only"):
            ntkd.batch(kernel_fn, seq, store=str(tmp_path / "k.ntk"))
        assert not list(tmp_path.iterdir())  # refused before writing anything
    # The 1-D forms compute, and an int size is 1-D as in neural-tangents.
    one_d = net(stax.Conv(8, (3,), padding="SAME"), stax.AvgPool((2,), (2,)), stax.Conv(4, (1,)))(seq, None, "nngp")
    assert np.isfinite(one_d).all() and one_d[0, 0] > 0
    np.testing.assert_array_equal(net(stax.Conv(8, 3, padding="SAME"), stax.AvgPool(2, 2), stax.Conv(4, 1))(
        seq, None, "nngp"), one_d)
    # 2-D layers on images, H x 1 ones too, compute (a 2-D layer is theirs).
    conv = stax.serial(stax.Conv(8, (3, 3), padding="SAME"), stax.Relu(), stax.GlobalAvgPool(), stax.Dense(1))[2]
    assert np.isfinite(conv(rng.standard_normal((3, 7, 1, 2)), None, "nngp")).all()
    # The library under kernel_fn refuses it too (ArchError: the network against the data).
    import ctypes
    from ntkd import _kernel, _lib
    raw = _kernel.KernelFn(_kernel._Spec("Conv(8, (3, 3), padding='SAME') Relu GlobalAvgPool Dense(1)", []))
    out = np.empty((3, 3))
    with pytest.raises(ArchError, match=r"layer 1: Conv is 2-D \(filter \(3, 3\), strides \(1, 1\)\) on "
                       r"\(N, L, C\) data"):
        _kernel._compute(raw._handle(), np.ascontiguousarray(seq), None, out, None, 0, "cpu", 0, None)


def test_underflow_refused_vanishing_layer_kept(rng):
    # A kernel that underflowed to 0 is refused (ntkd once returned zeros);
    # a layer that maps everything to 0 gives neural-tangents' zero kernel.
    from ntkd.errors import NonFiniteKernelError
    x = rng.standard_normal((3, 5)).astype(np.float32)
    _, _, deep = stax.serial(*[stax.serial(stax.Dense(4), stax.Relu())] * 300, stax.Dense(1))
    with pytest.raises(NonFiniteKernelError, match="is 0 in float32 but"):
        deep(x, None, "nngp")
    _, _, vanish = stax.serial(stax.Dense(4), stax.Relu(), stax.Dense(4, W_std=0.0), stax.Relu(), stax.Dense(1))
    assert (vanish(x, None, "ntk") == 0).all()
    # Against x2 no tile holds a sample with itself: a line of zeros has
    # its sample's own entry computed (the cross kernel came back zeros).
    x2 = rng.standard_normal((4, 5)).astype(np.float32)
    with pytest.raises(NonFiniteKernelError, match="is 0 in float32 but"):
        deep(x, x2, "nngp")
    _, _, erf = stax.serial(stax.Dense(4), stax.Erf(1, 1e-25, 1))  # NTK ~1e-50 under an NNGP ~1
    with pytest.raises(NonFiniteKernelError, match="NTK entry .* is 0 in float32 but"):
        erf(x, x2, "ntk")
    _, _, sign = stax.serial(stax.Dense(4), stax.Sign())  # an NTK of 0 the network makes
    assert (sign(x, x2, "ntk") == 0).all()
    assert (vanish(x, x2, "ntk") == 0).all()


def test_a_sample_whose_own_variance_underflows_against_x2(rng):
    # x1's sample 0 scaled so that its variance with itself underflows while
    # its products with x2 do not: its row came back 164 % off (negative ReLU
    # NTK entries) with no error, where kernel_fn(x1) raised (a diagonal's
    # check; a cross block has none). The variances entering a Relu are
    # judged now, in the fully-connected and the CNN paths.
    from ntkd.errors import NonFiniteKernelError
    x1, x2 = rng.standard_normal((3, 5)), rng.standard_normal((4, 5))
    x1[0] *= 1e-30
    _, _, kf = stax.serial(stax.Dense(1, W_std=1.5), stax.Relu(), stax.Dense(1, W_std=1.5), stax.Relu(), stax.Dense(1))
    relu0 = r"sample 0: its variance entering layer 2 \(Relu\) is 0 \(underflowed"
    with pytest.raises(NonFiniteKernelError, match=relu0 + r".*float32's normal range"):
        kf(x1.astype(np.float32), x2.astype(np.float32), "ntk")
    x1[0] *= 1e-170  # float64: below its range too
    with pytest.raises(NonFiniteKernelError, match=relu0 + r".*float64's normal range"):
        kf(x1, x2, "ntk")
    # in range: computed, and K(s x, y) = s K(x, y) (Relu, b_std = 0)
    x1[0] /= 1e-200
    base = kf(x1, x2, "ntk")
    x1[0] *= 1e-10
    np.testing.assert_allclose(kf(x1, x2, "ntk")[0], base[0] * 1e-10, rtol=1e-12)
    # a CNN: its variance at a position (a window that is not all zeros)
    i1, i2 = rng.standard_normal((2, 4, 4, 2)), rng.standard_normal((3, 4, 4, 2))
    i1[0] *= 1e-30
    _, _, cnn = stax.serial(stax.Conv(1, (3, 3), padding="SAME", W_std=1.5), stax.Relu(),
                            stax.Conv(1, (3, 3), padding="SAME", W_std=1.5), stax.Relu(), stax.GlobalAvgPool(),
                            stax.Dense(1))
    with pytest.raises(NonFiniteKernelError, match=r"image 0: its variance entering layer 2 \(Relu\) at position "
                       r"\(0, 0\) is 0 \(underflowed: the window there is not all zeros\)"):
        cnn(i1.astype(np.float32), i2.astype(np.float32), "ntk")


def test_a_window_of_tiny_values_beside_normal_ones_computes(rng):
    # Judged per position, a Relu whose input is subnormal at a few positions
    # of a decaying signal (its values normal float32, the smallest 5e-30)
    # refused the image, where the kernel is right to float32's precision: a
    # position's error is as small as its own variance. The image's largest
    # variance is what is judged for the angle maps.
    t = np.arange(128)
    x = np.stack([a * np.exp(-t / tau) * np.cos(w * t) for a, tau, w in
                  zip(rng.uniform(.5, 2, 5), rng.uniform(1.6, 2.2, 5), rng.uniform(0, 1, 5))])[..., None]
    _, _, kf = stax.serial(stax.Conv(8, (5,), padding="SAME", W_std=1.5, b_std=0.), stax.Relu(),
                           stax.Conv(8, (5,), padding="SAME", W_std=1.5, b_std=0.), stax.Relu(), stax.GlobalAvgPool(),
                           stax.Dense(1, W_std=1.5, b_std=0.))
    k32, k64 = kf(x.astype(np.float32), None, "ntk"), kf(x, None, "ntk")
    np.testing.assert_allclose(k32, k64, rtol=1e-4)


def test_nonfinite_entry_of_a_cross_kernel_named_in_the_result(rng):
    # kernel_fn(x1, x2) computes on [x1; x2]: the sample or entry the engine
    # names counts x1's samples, then x2's; the message once gave the joined
    # numbers alone. (x1's sample 2, its variance past float32's range, was
    # named as the entry (row 3, column 2) it made inf; it is now refused
    # itself, before any entry, as an overflow.)
    from ntkd.errors import NonFiniteKernelError
    x1 = np.ones((3, 4), np.float32)
    x1[2] *= 3e19  # its variance past float32's largest value
    x2 = np.ones((2, 4), np.float32)
    _, _, kf = stax.serial(stax.Dense(1.0), stax.Relu(), stax.Dense(1.0))
    with pytest.raises(NonFiniteKernelError, match=r"sample 2: its variance entering layer 2 \(Relu\) is inf.* x2's "
                       r"sample i is 3 \+ i; entry \(row r, column c\) with r >= 3 > c is the result's \[c, r - 3\], "
                       r"one with r = c a sample with itself"):
        kf(x1, x2, "nngp")
    # a sample with itself (x2's sample 0, number 3): named, and said not in the result
    x = rng.standard_normal((3, 5)).astype(np.float32)
    _, _, deep = stax.serial(*[stax.serial(stax.Dense(4), stax.Relu())] * 300, stax.Dense(1))
    with pytest.raises(NonFiniteKernelError, match=r"\(row 3, column 3\) is 0 in float32 but .* x2's sample i is 3 "):
        deep(x, rng.standard_normal((4, 5)).astype(np.float32), "nngp")


def test_a_scale_with_a_subnormal_square(rng):
    # W_std = 4e-23: its float32 square is subnormal (few bits), and the kernel after it, in
    # range, came back 12 % off with no error (inputs scaled by 1e8 keep it normal). A float32
    # job with such a scale (W_std, or ABRelu's, Erf's or Sin's a and b) is computed in float64
    # now; below float64's normal range it is refused, naming the layer.
    x = rng.standard_normal((6, 5)) * 1e8
    for net in [stax.serial(stax.Dense(1, W_std=4e-23)),
                stax.serial(stax.Dense(8), stax.ABRelu(1e-21, 2e-21), stax.Dense(1)),
                stax.serial(stax.Dense(8, W_std=1e-20), stax.Relu(), stax.Dense(1))]:
        kf = net[2]
        k32, k64 = kf(x.astype(np.float32), None), kf(x, None)
        for a, b in ((k32.nngp, k64.nngp), (k32.ntk, k64.ntk)):
            scale = np.sqrt(np.outer(np.diag(b), np.diag(b)))
            assert np.max(np.abs(a - b) / scale) < 1e-6
    with pytest.raises(ntkd.errors.ArchError, match=r"layer 2 \(Dense\): W_std = 1.3e-161: its square is below "
                       "float64's normal range"):
        stax.serial(stax.Dense(4), stax.Dense(1, W_std=1.3e-161))[2](x * 1e142, None, "nngp")
    # One tiny slope beside a normal one loses nothing: computed, in either precision.
    leaky = stax.serial(stax.Dense(8), stax.LeakyRelu(1e-200), stax.Dense(1))[2]
    k32, k64 = leaky(x.astype(np.float32), None), leaky(x, None)
    assert np.max(np.abs(k32.ntk - k64.ntk) / np.sqrt(np.outer(np.diag(k64.ntk), np.diag(k64.ntk)))) < 1e-6


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rectified_monomial_0_at_a_zero_variance(rng, dtype):
    # stax's RectifiedMonomial(0) is (x >= 0) * x**0: f(0) = 1. An all-zeros sample (b_std = 0:
    # its pre-activation is exactly 0) has E[f(0) f(0)] = 1 and E[f(0) f(v)] = 1/2 against
    # another; ntkd stored 1/4 for both (the orthogonal pair's value), with exit 0.
    x = rng.standard_normal((3, 5)).astype(dtype)
    x[2] = 0
    kf = stax.serial(stax.Dense(4, b_std=0.0), stax.RectifiedMonomial(0), stax.Dense(1, b_std=0.0))[2]
    k = kf(x, None, "nngp")
    assert k[2, 2] == 1 and k[2, 0] == k[0, 2] == 0.5 and k[2, 1] == 0.5
    assert k[0, 0] == 0.5 and k[1, 1] == 0.5  # E[H(v)^2] = P(v >= 0)
    sign = stax.serial(stax.Dense(4, b_std=0.0), stax.Sign(), stax.Dense(1, b_std=0.0))[2]
    assert (sign(x, None, "nngp")[2] == 0).all()  # sign(0) = 0: the row is 0


def test_big_endian_float64_computes_in_float64(rng, tmp_path):
    # A '>f8' array (np.load of a big-endian file) is float64 to JAX, but
    # it is not == np.float64: ntkd computed it, and float32 against it, in
    # float32.
    _, _, kernel_fn = stax.serial(stax.Dense(3, W_std=1.4, b_std=0.1), stax.Erf(), stax.Dense(1))
    x1, x2 = rng.standard_normal((3, 5)), rng.standard_normal((4, 5))
    for a, b in ((x1.astype(">f8"), None), (x1.astype(np.float32), x2.astype(">f8")), (x1.astype(">f8"), x2)):
        got = kernel_fn(a, b, "ntk")
        assert got.dtype == np.float64
        want = kernel_fn(a.astype(np.float64), None if b is None else b.astype(np.float64), "ntk")
        np.testing.assert_allclose(got, want, rtol=1e-15)
    import ntkd
    S = ntkd.batch(kernel_fn, x1.astype(np.float32), x2.astype(">f8"), store=str(tmp_path / "k.ntk"), progress=False)
    assert S.dtype == np.float64


def test_duplicate_get_is_refused_before_computing(rng):
    # neural-tangents refuses get=('nngp', 'nngp') ("must be unique"); ntkd once
    # computed the whole kernel first and then failed building the namedtuple
    # ("Encountered duplicate field name").
    x = rng.standard_normal((3, 4))
    _, _, kernel_fn = stax.serial(stax.Dense(3), stax.Relu(), stax.Dense(1))
    calls = []
    with pytest.raises(ValueError, match="unique"):
        kernel_fn(x, None, ("nngp", "nngp"), progress=lambda done, total: calls.append(done))
    assert calls == []


def test_get_is_read_as_neural_tangents_reads_it(rng):
    # neural-tangents lowercases get (kernel_fn(x, None, 'NTK') is the NTK) and
    # returns a tuple get as a namedtuple 'AnalyticKernel'; ntkd once raised
    # ValueError for 'NTK' and named its namedtuple 'Kernel'.
    x = rng.standard_normal((3, 4))
    _, _, kernel_fn = stax.serial(stax.Dense(3), stax.Relu(), stax.Dense(1))
    k = kernel_fn(x, None)
    np.testing.assert_array_equal(kernel_fn(x, None, "NTK"), k.ntk)
    np.testing.assert_array_equal(kernel_fn(x, None, get="Nngp"), k.nngp)
    both = kernel_fn(x, None, ("NTK", "nngp"))
    assert type(both).__name__ == "AnalyticKernel" and both._fields == ("ntk", "nngp")
    np.testing.assert_array_equal(both.ntk, k.ntk)
    with pytest.raises(ValueError, match="unique"):
        kernel_fn(x, None, ("ntk", "NTK"))
    with pytest.raises(TypeError, match="tuple of strings"):
        kernel_fn(x, None, ("ntk", 1))


def test_x2_equal_to_x1_is_x1_against_itself(rng):
    # kernel_fn(x, x) is kernel_fn(x, None) in neural-tangents, to float32's
    # 1e-7. ntkd computed it as two sets, where each sample's pair with itself
    # took the input covariance of the pair, not its variance: through one Relu
    # a float32 NTK 4e-5 below the float64 one (a sample collinear with itself).
    x = rng.standard_normal((23, 5))
    _, _, kernel_fn = stax.serial(stax.Dense(8), stax.Relu(), stax.Dense(1))
    exact = kernel_fn(x, None, "ntk")
    x32 = x.astype(np.float32)
    for x2 in (x32, x32.copy(), np.asfortranarray(x32)):
        k = kernel_fn(x32, x2, "ntk")
        np.testing.assert_array_equal(k, kernel_fn(x32, None, "ntk"))
        assert np.abs(k - exact).max() <= 1e-6 * np.abs(exact).max()
    np.testing.assert_array_equal(kernel_fn(x, x.copy(), "ntk"), exact)


def test_equal_samples_are_one_sample(rng):
    # A sample given twice (a duplicate in the train set, a test sample that is
    # also a train sample) is the sample with itself: its pair's input covariance
    # is its variance. ntkd took the product of the two rows (float32 sums) for
    # it, an ulp or two off the variance (summed in double), and the float32 NTK
    # through one Relu came out 4e-5 low where neural-tangents' is within 1e-7.
    x = rng.standard_normal((40, 5))
    x[30:] = x[:10]
    _, _, kernel_fn = stax.serial(stax.Dense(8), stax.Relu(), stax.Dense(1))
    exact = kernel_fn(x, None, "ntk")
    x32 = x.astype(np.float32)
    for k, want in ((kernel_fn(x32, None, "ntk"), exact), (kernel_fn(x32[:35], x32[25:], "ntk"), exact[:35, 25:])):
        assert np.abs(k - want).max() <= 1e-6 * np.abs(want).max()
    k = kernel_fn(x, None, "ntk")
    np.testing.assert_array_equal(np.diag(k[30:, :10]), np.diag(k)[:10])  # each copy with the other: its variance


def test_negated_samples_are_at_pi(rng):
    # kernel_fn(x, -x) with neural-tangents' bias-free Dense: each pair's input
    # covariance is minus the variance, an angle of pi. From the rows' product
    # (float32 sums) it was an ulp off, and the float32 NTK through Relus came
    # out 5e-5 of the largest entry off, Abs's 2.3e-4, Sign's NNGP 1.3e-2.
    x = rng.standard_normal((5, 30))
    for act in (stax.Relu(), stax.Abs(), stax.Sign()):
        _, _, kernel_fn = stax.serial(stax.Dense(16, W_std=1.5), act, stax.Dense(16, W_std=1.5), act,
                                      stax.Dense(1, W_std=1.5))
        exact = kernel_fn(x, -x, ("nngp", "ntk"))
        x32 = x.astype(np.float32)
        for k, want in zip(kernel_fn(x32, -x32, ("nngp", "ntk")), exact):
            assert np.abs(k - want).max() <= 1e-6 * np.abs(want).max()


def test_finite_network_functions_say_why():
    # `import ntkd as nt` code calling nt.empirical_kernel_fn or nt.linearize
    # got only "module 'ntkd' has no attribute ..."; hasattr still answers False.
    import ntkd
    for name in ("empirical_kernel_fn", "empirical_ntk_fn", "linearize", "taylor_expand", "monte_carlo_kernel_fn"):
        assert not hasattr(ntkd, name)
        with pytest.raises(AttributeError, match="infinite-width kernels only"):
            getattr(ntkd, name)
    with pytest.raises(AttributeError, match="no attribute 'nothing'$"):
        ntkd.nothing


def test_nt_batch_call_is_kernel_fn(rng):
    # `import ntkd as nt` code: nt.batch(kernel_fn, batch_size, ...) raised TypeError ("it is not
    # neural-tangents' nt.batch"); it is now that wrapper, which ntkd's kernel_fn needs not: kernel_fn.
    import ntkd
    _, _, kernel_fn = stax.serial(stax.Dense(1), stax.Relu(), stax.Dense(1))
    for args, kwargs in (((), {"batch_size": 25, "store_on_device": False}), ((25,), {}), ((np.int64(25),), {}),
                         ((), {}), ((4,), {"device_count": 1}), ((25, 1), {}), ((25, 1, True), {}),
                         ((25, -1, False), {})):
        assert ntkd.batch(kernel_fn, *args, **kwargs) is kernel_fn, (args, kwargs)
    x = rng.standard_normal((6, 3))
    assert np.array_equal(ntkd.batch(kernel_fn, batch_size=2)(x, None, "ntk"), kernel_fn(x, None, "ntk"))
    with pytest.raises(TypeError, match=r"mixes neural-tangents' nt.batch arguments with x2.*returns kernel_fn"):
        ntkd.batch(kernel_fn, 25, np.ones((2, 3)))
    with pytest.raises(TypeError, match="mixes neural-tangents' nt.batch arguments with store, ranks"):
        ntkd.batch(kernel_fn, batch_size=4, store="a.ntk", ranks=2)
    with pytest.raises(TypeError, match="mixes neural-tangents' nt.batch arguments with pattern"):
        ntkd.batch(kernel_fn, batch_size=4, pattern=(np.eye(2)[None], np.eye(2)[None]))
    with pytest.raises(TypeError, match="got batch_size=-1, not an integer >= 0"):
        ntkd.batch(kernel_fn, -1)
    with pytest.raises(TypeError, match="got batch_size=2.5"):
        ntkd.batch(kernel_fn, batch_size=2.5)
    with pytest.raises(TypeError, match="got batch_size twice"):
        ntkd.batch(kernel_fn, 3, batch_size=3)
    with pytest.raises(TypeError, match="got device_count twice"):
        ntkd.batch(kernel_fn, 3, 1, device_count=1)
    with pytest.raises(TypeError, match="got store_on_device='no'"):
        ntkd.batch(kernel_fn, store_on_device="no")
    # any callable, as neural-tangents' nt.batch: ntkd's kernel_fn wrapped (partial, lambda) was refused
    wrapped = functools.partial(kernel_fn, get="ntk")
    assert ntkd.batch(wrapped, batch_size=2) is wrapped
    assert np.array_equal(ntkd.batch(wrapped, batch_size=2)(x, None), kernel_fn(x, None, "ntk"))
    with pytest.raises(TypeError, match="kernel_fn must be a kernel_fn .* not 3"):
        ntkd.batch(3, batch_size=2)
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        ntkd.batch(kernel_fn, np.ones((2, 3)), bogus=1)
    assert kernel_fn.__name__ == "kernel_fn"


def test_dropout_near_equal_x2_is_refused(rng):
    # x2 within 1e-12 of x1 but not by rounding: neural-tangents' Dropout takes it as x1 (the diagonal
    # scaled) yet computes on x2's values; ntkd computed kernel_fn(x1), 100 % off at scale 1e-13.
    _, _, kernel_fn = stax.serial(stax.Dense(8), stax.Relu(), stax.Dense(8), stax.Dropout(0.5, mode="train"))
    x = rng.standard_normal((4, 3)) * 1e-13
    with pytest.raises(ValueError, match="less than 1e-12"):
        kernel_fn(x, x / 2, "nngp")
    np.testing.assert_array_equal(kernel_fn(x, x.copy(), "nngp"), kernel_fn(x, None, "nngp"))


def test_threads_and_tile_take_numpy_integers_and_refuse_what_the_c_fields_cannot_hold(rng):
    """threads and tile go to a C int and size_t: numpy integers are taken,
    a value those fields cannot hold is refused instead of wrapping (2**32
    threads once became 0, 'every core', and tile 2**64 + 3 became 3)."""
    kf = stax.serial(stax.Dense(3), stax.Relu(), stax.Dense(1))[2]
    x = rng.standard_normal((5, 4))
    want = kf(x, None, "ntk")
    assert np.array_equal(kf(x, None, "ntk", threads=np.int64(2), tile=np.uint8(3)), want)
    for bad in (2**31, 2**32, -1):
        with pytest.raises(ValueError, match="threads must be"):
            kf(x, None, "ntk", threads=bad)
    for bad in (2**64 + 3, -1, 2.0, True):
        with pytest.raises(ValueError, match="tile must be"):
            kf(x, None, "ntk", tile=bad)


def test_a_bool_is_not_a_width():
    with pytest.raises(TypeError, match="must be an integer, not True"):
        stax.Dense(True)


def test_an_overflow_is_not_called_an_underflow(rng):
    # float32 data of 1e20 (their squares past float32's range) through two
    # Conv-Relu layers: refused as "0 (underflowed) ... scale the data up",
    # whose advice makes it worse (a hunt). The float64 kernel is finite.
    x = rng.standard_normal((3, 6, 2)) * 1e20
    layers = []
    for _ in range(2):
        layers += [stax.Conv(2, (3,), padding="SAME", W_std=1e-3, b_std=1e-3), stax.Relu()]
    _, _, cnn = stax.serial(*layers, stax.Flatten(), stax.Dense(1, b_std=0.1))
    _, _, fc = stax.serial(stax.Dense(1), stax.Relu(), stax.Dense(1))
    for kf, data in ((cnn, x), (fc, x.reshape(3, -1))):
        assert np.all(np.isfinite(kf(data, None, "nngp")))
        with pytest.raises(ntkd.NonFiniteKernelError, match=r"is inf: past float32's range .* scale the data down") as e:
            kf(data.astype(np.float32), None, "nngp")
        assert "underflow" not in str(e.value)


@pytest.mark.parametrize("ncoef", [12, 32])
def test_polynomial_of_many_coefficients_against_quadrature(rng, ncoef):
    # Polynomial took at most 8 coefficients ("arch, column 145: more than 8 values in a list",
    # where neural-tangents computes it; a migration hunt). Against an independent computation:
    # Dense -> Polynomial -> Dense by Gauss-Hermite quadrature, exact for these polynomials.
    coef = rng.standard_normal(ncoef) * 0.7 ** np.arange(ncoef)
    x = rng.standard_normal((4, 3)) * 0.8
    w1, b1, w2, b2 = 1.2, 0.1, 1.1, 0.2
    kernel_fn = stax.serial(stax.Dense(64, W_std=w1, b_std=b1), stax.Polynomial(list(coef)),
                            stax.Dense(3, W_std=w2, b_std=b2))[2]
    got = kernel_fn(x, None, ("nngp", "ntk"))
    z, wz = np.polynomial.hermite_e.hermegauss(48)
    wz = wz / np.sqrt(2 * np.pi)
    f = np.polynomial.Polynomial(coef)
    df = f.deriv()
    q = w1 ** 2 * x @ x.T / x.shape[1] + b1 ** 2
    want_nngp, want_ntk = np.empty_like(q), np.empty_like(q)
    for i in range(4):
        for j in range(4):
            a = np.sqrt(q[i, i])
            c = q[i, j] / a
            d = np.sqrt(max(q[j, j] - c * c, 0.0))
            u = a * z[:, None] + 0 * z[None, :]
            v = c * z[:, None] + d * z[None, :]
            ww = wz[:, None] * wz[None, :]
            k, kdot = np.sum(ww * f(u) * f(v)), np.sum(ww * df(u) * df(v))
            want_nngp[i, j] = w2 ** 2 * k + b2 ** 2
            want_ntk[i, j] = want_nngp[i, j] + w2 ** 2 * kdot * q[i, j]
    for g, want in (("nngp", want_nngp), ("ntk", want_ntk)):
        err = np.abs(getattr(got, g) - want).max() / np.abs(want).max()
        assert err < 1e-12, (g, err)
    with pytest.raises(NotImplementedError, match="at most 32 coefficients .* not 33"):
        stax.Polynomial([1.0] * 33)


def test_jax_narrow_floats_computed_as_float32(rng):
    # bfloat16 data (TPU users') raised "x1 must hold real numbers, not bfloat16"; float16 was
    # taken. ml_dtypes' floats (JAX's bfloat16 and float8s) are float32 values: computed as
    # float32 data, as neural-tangents computes them. Runs where ml_dtypes is installed (with JAX).
    ml_dtypes = pytest.importorskip("ml_dtypes")
    kernel_fn = stax.serial(stax.Dense(64, W_std=1.2, b_std=0.1), stax.Relu(), stax.Dense(3))[2]
    x = rng.standard_normal((6, 5))
    for t in (ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn):
        narrow = x.astype(t)
        got = kernel_fn(narrow, None, "ntk")
        assert got.dtype == np.float32 and np.array_equal(got, kernel_fn(narrow.astype(np.float32), None, "ntk"))
    with pytest.raises(TypeError, match="must hold real numbers, not \\|V2"):
        kernel_fn(np.zeros((3, 2), dtype=np.dtype((np.void, 2))))


def test_ntkd_limits_named_by_the_stax_layer():
    # They came back from the architecture's parser as "arch, column N: ..." (a migration hunt)
    with pytest.raises(NotImplementedError, match=r"stax.Dense: out_dim 1048576 is above ntkd's limit of 1000000"):
        stax.Dense(2 ** 20)
    with pytest.raises(NotImplementedError, match=r"stax.Conv: out_chan 2000000 is above ntkd's limit"):
        stax.Conv(2000000, (3, 3))
    with pytest.raises(NotImplementedError, match=r"stax.FanOut: num 65 is above ntkd's limit of 64"):
        stax.FanOut(65)
    kf = stax.serial(stax.FanOut(64), stax.parallel(*[stax.Dense(1000000)] * 64), stax.FanInSum())[2]
    assert np.isfinite(kf(np.ones((2, 3)), None, "ntk")).all()  # the limits themselves are taken


def test_elementwise_numerical_gelu_points_to_gelu():
    # neural-tangents' examples/elementwise_numerical.py uses jax.nn.gelu, refused without a word
    # on stax.Gelu (a migration hunt); the approximation's kernel is not Gelu's, so not mapped.
    def gelu(x):
        return x

    with pytest.raises(NotImplementedError, match=r"for gelu, stax.Gelu\(\) is the exact GELU's kernel"):
        stax.ElementwiseNumerical(gelu, deg=25)
    with pytest.raises(NotImplementedError, match=r"named functions only .*not <function"):
        stax.ElementwiseNumerical(lambda x: x, deg=25)


def test_global_self_attention_refusals_and_spellings(rng):
    # What neural-tangents' kernel_fn refuses (no closed form), and what ntkd does not take, raise
    # NotImplementedError naming it when constructed; stax's enums and strings give the same kernel.
    with pytest.raises(NotImplementedError, match=r"linear_scaling=False\): no known closed form for the SOFTMAX"):
        stax.GlobalSelfAttention(8, 8, 8, 2, linear_scaling=False)
    with pytest.raises(NotImplementedError, match="pos_emb_decay_fn must be None"):
        stax.GlobalSelfAttention(8, 8, 8, 2, pos_emb_type="SUM", pos_emb_decay_fn=lambda d: 1 / (1 + d))
    with pytest.raises(NotImplementedError, match="n_chan_pos_emb must be None"):
        stax.GlobalSelfAttention(8, 8, 8, 2, pos_emb_type="CONCAT", n_chan_pos_emb=4)
    with pytest.raises(NotImplementedError, match=r"W_key_std \* W_query_std < 0"):
        stax.GlobalSelfAttention(8, 8, 8, 2, W_key_std=-1.0)
    with pytest.raises(ValueError, match="attention_mechanism must be one of"):
        stax.GlobalSelfAttention(8, 8, 8, 2, attention_mechanism="softmax")
    with pytest.raises(NotImplementedError, match="channel_axis=1"):
        stax.GlobalSelfAttention(8, 8, 8, 2, channel_axis=1)

    # neural-tangents' own enums, by the names its users write (they had no attribute in ntkd.stax)
    e = stax.serial(stax.GlobalSelfAttention(8, 8, 8, 2, attention_mechanism=stax.AttentionMechanism.ABS,
                                             pos_emb_type=stax.PositionalEmbedding.SUM), stax.GlobalAvgPool())[2]
    s = stax.serial(stax.GlobalSelfAttention(8, 8, 8, 2, attention_mechanism="ABS", pos_emb_type="SUM"),
                    stax.GlobalAvgPool())[2]
    x0 = rng.standard_normal((3, 5, 2))
    assert np.array_equal(e(x0, None, "ntk"), s(x0, None, "ntk"))
    for name in ("layer", "requires", "supports_masking", "unmask_fn"):
        with pytest.raises(NotImplementedError, match=f"stax.{name}: ntkd does not compute it"):
            getattr(stax, name)(lambda *a: a)

    class Mech(__import__("enum").Enum):  # neural-tangents' AttentionMechanism, by its names
        RELU = "RELU"

    x = rng.standard_normal((3, 5, 2))
    a = stax.serial(stax.GlobalSelfAttention(8, 8, 8, 2, attention_mechanism=Mech.RELU, W_key_std=-1.5,
                                             W_query_std=-1.0), stax.GlobalAvgPool())[2](x, None, "ntk")
    b = stax.serial(stax.GlobalSelfAttention(4, 4, 4, 1, attention_mechanism="RELU", W_key_std=1.5),
                    stax.GlobalAvgPool())[2](x, None, "ntk")
    c = stax.serial(stax.GlobalSelfAttention(4, 4, 4, 1, attention_mechanism="ABS", W_key_std=1.5),
                    stax.GlobalAvgPool())[2](x, None, "ntk")
    np.testing.assert_array_equal(a, b)
    assert np.abs(a - c).max() > 1e-3 * np.abs(a).max()
    with pytest.raises(ntkd.errors.ArchError, match=r"layer 2 \(GlobalSelfAttention\): .* need image data"):
        stax.serial(stax.Dense(4), stax.GlobalSelfAttention(4, 4, 4, 1))[2](rng.standard_normal((3, 4)), None, "ntk")
    with pytest.raises(Exception, match="do not compute a GlobalSelfAttention|no usable GPU|no GPU computes"):
        stax.serial(stax.GlobalSelfAttention(4, 4, 4, 1), stax.GlobalAvgPool())[2](x, None, "ntk", device="cuda")


def test_bench_graph_runs():
    # docs/PERFORMANCE.md's Aggregate benchmark, at a tiny size: it runs and prints its ratio.
    import os
    import subprocess
    import sys
    script = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "bench_graph.py")
    out = subprocess.run([sys.executable, script, "3", "16"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "3 graphs of 16 nodes" in out.stdout and "graph / floor" in out.stdout, out.stdout


def test_bench_attention_runs():
    # docs/PERFORMANCE.md's attention benchmark, at a tiny size: it runs and prints its ratio.
    import os
    import subprocess
    import sys
    script = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "bench_attention.py")
    out = subprocess.run([sys.executable, script, "8", "3"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "L = 8, N = 3:" in out.stdout and "ratio" in out.stdout, out.stdout


def test_attention_edge_cases_against_their_exact_values(rng):
    # A hunt of the attention layer: weights or values scaled by 0 with no bias make an all-zero kernel, the exact
    # value (once refused as an underflow); Dropout after it, which neural-tangents computes (once refused as "on the
    # input layer"); a float32 job is computed in float64 and rounded once (its positions' outputs nearly collinear:
    # float32's own NTK was 5e-4 off at 256 positions).
    x = rng.standard_normal((3, 5, 2))
    for layer in (stax.GlobalSelfAttention(2, 2, 2, 1, W_value_std=0.0),
                  stax.GlobalSelfAttention(2, 2, 2, 1, W_out_std=0.0),
                  stax.GlobalSelfAttention(2, 2, 2, 1, W_key_std=0.0, attention_mechanism="RELU"),
                  stax.GlobalSelfAttention(2, 2, 2, 1, False, W_query_std=0.0, attention_mechanism="IDENTITY")):
        k = stax.serial(stax.Dense(2), layer, stax.GlobalAvgPool())[2](x, None, ("nngp", "ntk"))
        assert not k.nngp.any() and not k.ntk.any()
    # SOFTMAX at qk = 0: uniform weights, not 0
    k = stax.serial(stax.Dense(2), stax.GlobalSelfAttention(2, 2, 2, 1, W_key_std=0.0), stax.GlobalAvgPool())[2](
        x, None, "nngp")
    assert np.all(np.diag(k) > 0)
    drop = stax.serial(stax.GlobalSelfAttention(2, 2, 2, 1), stax.Dropout(0.5), stax.GlobalAvgPool())[2]
    keep = stax.serial(stax.GlobalSelfAttention(2, 2, 2, 1), stax.GlobalAvgPool())[2]
    a, b = drop(x, None, "ntk"), keep(x, None, "ntk")
    assert np.all(np.diag(a) > np.diag(b))  # each position with itself doubled, then averaged with the others
    np.testing.assert_array_equal(a[~np.eye(3, dtype=bool)], b[~np.eye(3, dtype=bool)])
    kf = stax.serial(stax.Dense(4), stax.GlobalSelfAttention(4, 4, 4, 2), stax.Relu(), stax.GlobalAvgPool())[2]
    x32 = rng.standard_normal((4, 24, 3)).astype(np.float32)
    k32 = kf(x32, None, ("nngp", "ntk"))
    k64 = kf(x32.astype(np.float64), None, ("nngp", "ntk"))
    assert k32.ntk.dtype == np.float32
    np.testing.assert_array_equal(k32.ntk, k64.ntk.astype(np.float32))
    np.testing.assert_array_equal(k32.nngp, k64.nngp.astype(np.float32))


def test_image_resize_refusals_and_spellings(rng):
    with pytest.raises(NotImplementedError, match=r"only \"linear\" and \"nearest\" interpolation have a kernel"):
        stax.ImageResize((-1, 4, 4, -1), "lanczos3")
    with pytest.raises(NotImplementedError, match="keeps the batch and the channels"):
        stax.ImageResize((-1, 4, 4, 8), "linear")
    with pytest.raises(ValueError, match="unknown method"):
        stax.ImageResize((-1, 4, 4, -1), "area")
    with pytest.raises(ValueError, match="unknown method 'Linear'"):  # jax's names are lower case
        stax.ImageResize((-1, 4, 4, -1), "Linear")
    with pytest.raises(ValueError, match="shape must be a sequence of integers"):  # neural-tangents raises too
        stax.ImageResize((-1, 2.5, 4, -1), "linear")
    x = rng.standard_normal((3, 5, 6, 2))
    with pytest.raises(ntkd.errors.ArchError, match=r"its shape has 3 entries, and the data 4 axes"):
        stax.serial(stax.ImageResize((-1, 4, -1), "linear"), stax.GlobalAvgPool())[2](x, None, "nngp")

    class Method(__import__("enum").Enum):  # jax.image.ResizeMethod, by its names
        LINEAR = 1

    nets = [stax.serial(stax.Conv(4, (2, 2)), stax.ImageResize((-1, 7, 3, -1), m), stax.Relu(), stax.GlobalAvgPool())
            for m in (Method.LINEAR, "bilinear", "triangle", "nearest")]
    k = [n[2](x, None, "ntk") for n in nets]
    np.testing.assert_array_equal(k[0], k[1])
    np.testing.assert_array_equal(k[0], k[2])
    assert np.abs(k[0] - k[3]).max() > 1e-3 * np.abs(k[0]).max()
    # a same-size resize is the identity (jax skips the axis), whatever the method (the plain network takes
    # another path: its sums in another order)
    same = stax.serial(stax.Conv(4, (2, 2)), stax.ImageResize((-1, -1, 5, -1), "linear"), stax.Relu(),
                       stax.GlobalAvgPool())[2]
    plain = stax.serial(stax.Conv(4, (2, 2)), stax.Relu(), stax.GlobalAvgPool())[2]
    np.testing.assert_allclose(same(x, None, "ntk"), plain(x, None, "ntk"), rtol=1e-13)


def test_index_refusals_and_spellings(rng):
    with pytest.raises(NotImplementedError, match=r"the integer index -1 removes its axis.*\(-1:: the same"):
        stax.Index(idx=stax.Slice[:, -1])
    with pytest.raises(NotImplementedError, match=r"the integer index 0 removes its axis.*0:1"):
        stax.Index(idx=stax.Slice[:, 0])
    with pytest.raises(ValueError, match="slice step cannot be zero"):
        stax.Index(stax.Slice[:, ::0])
    with pytest.raises(NotImplementedError, match="idx items must be slices"):
        stax.Index(stax.Slice[:, [1, 2]])
    x = rng.standard_normal((3, 6, 5, 2))
    with pytest.raises(ntkd.errors.ArchError, match="idx indexes the batch axis"):
        stax.serial(stax.Index(stax.Slice[::2]), stax.GlobalAvgPool())[2](x, None, "nngp")
    with pytest.raises(ntkd.errors.ArchError, match="keeps no position of the W axis of 5"):
        stax.serial(stax.Index(stax.Slice[:, :, 7:]), stax.GlobalAvgPool())[2](x, None, "nngp")
    # a tuple of slice objects is the same as Slice[...]; a crop of the whole image is the image
    conv = lambda: stax.Conv(4, (2, 2), padding="SAME")
    a = stax.serial(conv(), stax.Index((slice(None), slice(1, None, 2))), stax.Relu(), stax.GlobalAvgPool())[2]
    b = stax.serial(conv(), stax.Index(stax.Slice[:, 1::2, ...]), stax.Relu(), stax.GlobalAvgPool())[2]
    np.testing.assert_array_equal(a(x, None, "ntk"), b(x, None, "ntk"))
    whole = stax.serial(conv(), stax.Index(stax.Slice[...]), stax.Relu(), stax.GlobalAvgPool())[2]
    plain = stax.serial(conv(), stax.Relu(), stax.GlobalAvgPool())[2]
    np.testing.assert_allclose(whole(x, None, "ntk"), plain(x, None, "ntk"), rtol=1e-13)


def _graph(rng, n, v, c=2, density=0.4):
    x = rng.standard_normal((n, v, c))
    p = (rng.uniform(size=(n, v, v)) < density) * rng.uniform(0.5, 1.5, size=(n, v, v))
    return x, p


def _graph_net(**kw):
    return stax.serial(stax.Dense(4, W_std=1.3, b_std=0.1), stax.Relu(), stax.Aggregate(**kw),
                       stax.Dense(4, W_std=1.2, b_std=0.1), stax.Relu(), stax.GlobalAvgPool(), stax.Dense(1))[2]


def test_aggregate_sparse_pattern_is_its_dense_one(rng):
    # stax's SPARSE pattern: (tail, head) edges, a repeat adding 1, a head with a negative
    # coordinate dropped, a tail with one taken as stax's segment sums take it (index -1,
    # the last node), coordinates past the size wrapped. Its dense pattern, built by hand:
    n, v = 2, 5
    x = rng.standard_normal((n, v, 2))
    edges = np.array([[[0, 1], [0, 1], [2, 3], [4, 0], [1, -1], [-1, 2], [7, 4]],
                      [[3, 3], [1, 2], [2, 1], [0, 4], [4, 4], [2, 2], [0, 0]]])
    dense = np.zeros((n, v, v))
    for i in range(n):
        for t, h in edges[i]:
            if h >= 0:
                dense[i, (t % v) if t >= 0 else v - 1, h % v] += 1
    assert dense[0, 0, 1] == 2 and dense[0, 4, 2] == 1 and dense[0, 2, 4] == 1 and dense[0].sum() == 6
    sparse, dense_fn = _graph_net(implementation="SPARSE"), _graph_net()
    for k2 in (None, x[:1]):
        p2 = None if k2 is None else (edges[:1], dense[:1])
        got = sparse(x, k2, ("nngp", "ntk"), pattern=(edges, None if p2 is None else p2[0]))
        want = dense_fn(x, k2, ("nngp", "ntk"), pattern=(dense, None if p2 is None else p2[1]))
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
    sparse_1 = _graph_net(implementation=stax.AggregateImplementation.SPARSE)
    np.testing.assert_array_equal(sparse_1(x, None, "ntk", pattern=(edges[:, :, None, :], None)),
                                  dense_fn(x, None, "ntk", pattern=(dense, dense)))
    with pytest.raises(ValueError, match=r"a SPARSE pattern has shape \(batch=2, n_edges, 1, 2\)"):
        sparse(x, None, "ntk", pattern=(edges[:, :, :1], None))
    with pytest.raises(ValueError, match="integer node indices"):
        sparse(x, None, "ntk", pattern=(edges.astype(float), None))
    with pytest.raises(ValueError, match=r"must lie in -2\^31 .. 2\^31 - 1"):  # numpy's ravel would wrap uint64
        sparse(x, None, "ntk", pattern=(edges.astype(np.uint64) + np.uint64(2 ** 63), None))


def test_aggregate_pattern_none_is_the_identity(rng):
    # stax's Aggregate leaves its input alone without a pattern; a network without
    # Aggregate takes a pattern and ignores it, as neural-tangents does.
    x, p = _graph(rng, 4, 6)
    _, _, plain = stax.serial(stax.Dense(4, W_std=1.3, b_std=0.1), stax.Relu(), stax.Dense(4, W_std=1.2, b_std=0.1),
                              stax.Relu(), stax.GlobalAvgPool(), stax.Dense(1))
    want = plain(x, None, "ntk")
    np.testing.assert_allclose(_graph_net()(x, None, "ntk"), want, rtol=1e-13)
    np.testing.assert_allclose(_graph_net()(x, None, "ntk", pattern=(None, None)), want, rtol=1e-13)
    np.testing.assert_array_equal(plain(x, None, "ntk", pattern=(p, p)), want)
    eye = np.broadcast_to(np.eye(6), (4, 6, 6))
    np.testing.assert_allclose(_graph_net()(x, None, "ntk", pattern=(eye, eye)), want, rtol=1e-13)
    # without a pattern each Aggregate is computed as Identity, with no N x V x V identity patterns made
    _, _, nested = stax.serial(stax.Dense(4), stax.FanOut(2), stax.parallel(stax.Aggregate(aggregate_axis=(1,)),
                                                                            stax.serial(stax.Aggregate(), stax.Dense(4))),
                               stax.FanInSum(), stax.Relu(), stax.GlobalAvgPool())
    assert nested.without_patterns().arch.count("Identity") == 2 and "Aggregate" not in nested.without_patterns().arch
    assert _graph_net().without_patterns().without_patterns().arch == _graph_net().without_patterns().arch


def test_aggregate_x2_and_patterns(rng):
    x, p = _graph(rng, 4, 5)
    x2, p2 = _graph(rng, 3, 5)
    kf = _graph_net()
    k = kf(x, None, "ntk", pattern=(p, p))
    np.testing.assert_array_equal(kf(x, x, "ntk", pattern=(p, p)), k)  # x2 = x1 is x1 against itself
    np.testing.assert_array_equal(kf(x, None, "ntk", pattern=(p, None)), k)
    joined = kf(np.concatenate([x, x2]), None, "ntk", pattern=(np.concatenate([p, p2]),) * 2)
    np.testing.assert_allclose(kf(x2, x, "ntk", pattern=(p2, p)), joined[4:, :4], rtol=1e-12)
    other = kf(x, x, "ntk", pattern=(p, p[::-1]))  # x1 under two patterns: not symmetric
    assert not np.allclose(other, other.T)
    with pytest.raises(ValueError, match="pattern2 differs from pattern1"):
        kf(x, None, "ntk", pattern=(p, p[::-1]))
    with pytest.raises(NotImplementedError, match="exactly one of two"):
        kf(x2, x, "ntk", pattern=(p2, None))
    with pytest.raises(TypeError, match="a pair"):
        kf(x, None, "ntk", pattern=p)
    with pytest.raises(ntkd.ArchError, match="the pattern has 16 values per sample and the network's Aggregate "
                                             "layers see 5 positions"):
        kf(x, None, "ntk", pattern=(p[:, :4, :4], None))
    with pytest.raises(ValueError, match=r"has shape \(batch=4, the positions, the positions again\)"):
        kf(x, None, "ntk", pattern=(p[:, :4, :5], None))
    with pytest.raises(ValueError, match="pattern1 pairs 5 positions and pattern2 4"):
        kf(x, x2, "ntk", pattern=(p, p2[:, :4, :4]))
    bad = p.copy()
    bad[1, 2, 3] = np.nan
    with pytest.raises(ValueError, match="not finite"):
        kf(x, None, "ntk", pattern=(bad, None))
    # to_dense: applied to the pattern first
    flat = _graph_net(to_dense=lambda q: q.reshape(q.shape[0], 5, 5))
    np.testing.assert_array_equal(flat(x, None, "ntk", pattern=(p.reshape(4, 25), None)), k)
    # images: (N, H, W, H, W) patterns
    xi = rng.standard_normal((3, 2, 3, 2))
    pi = rng.uniform(size=(3, 2, 3, 2, 3))
    _, _, conv = stax.serial(stax.Conv(4, (2, 2), padding="SAME"), stax.Relu(), stax.Aggregate(), stax.Flatten(),
                             stax.Dense(1))
    assert conv(xi, None, "ntk", pattern=(pi, None)).shape == (3, 3)


def test_aggregate_refusals(rng):
    x, p = _graph(rng, 3, 4)
    class DynamicJaxprTracer:  # jax.jit's tracer, recognised by its type's name
        shape, dtype = p.shape, p.dtype
    with pytest.raises(NotImplementedError, match="traced pattern"):
        _graph_net()(x, None, "ntk", pattern=(DynamicJaxprTracer(), None))
    # float32 inputs compute the pattern in float32: a value it cannot hold is refused, not rounded to 0 or inf
    for bad in (1e-50, 1e39):
        with pytest.raises(ValueError, match="outside float32's normal range"):
            _graph_net()(x.astype(np.float32), None, "ntk", pattern=(p * 0 + bad, None))
    with pytest.raises(NotImplementedError, match=r"batch_axis=1"):
        stax.Aggregate(batch_axis=1)
    with pytest.raises(ValueError, match="AggregateImplementation"):
        stax.Aggregate(implementation="COO")
    with pytest.raises(NotImplementedError, match="no axis to aggregate over"):
        stax.Aggregate(aggregate_axis=())
    with pytest.raises(ntkd.ArchError, match="ntkd aggregates over every spatial axis"):
        _graph_net(aggregate_axis=1)(rng.standard_normal((3, 2, 2, 2)), None, "ntk",
                                          pattern=(rng.uniform(size=(3, 2, 2, 2, 2)), None))
    _, _, mixed = stax.serial(stax.Dense(2), stax.Aggregate(), stax.Aggregate(implementation="SPARSE"),
                              stax.GlobalAvgPool())
    with pytest.raises(NotImplementedError, match="different formats"):
        mixed(x, None, "nngp", pattern=(p, None))
    _, _, vec = stax.serial(stax.Dense(2), stax.Aggregate(), stax.Dense(1))
    with pytest.raises(NotImplementedError, match="Aggregate needs"):
        vec(rng.standard_normal((3, 4)), None, "nngp", pattern=(p, None))
    _, _, two_sizes = stax.serial(stax.Dense(2), stax.Aggregate(), stax.AvgPool((2,)), stax.Aggregate(),
                                  stax.GlobalAvgPool())
    with pytest.raises(ntkd.ArchError, match="every Aggregate reads the same pattern"):
        two_sizes(x, None, "nngp", pattern=(p, None))


def test_aggregate_to_zero_is_its_value(rng):
    # A graph's own structure maps a sample to 0 exactly, and neural-tangents returns that 0: a
    # Laplacian (columns summing to 0) on nodes that all look alike, or a directed star (leaves to
    # the centre, no self-loops) under two Aggregates. It is the kernel, not an underflow (ntkd once
    # refused it, and one such graph ended a whole job); x2's samples with themselves too.
    v = 5
    adj = np.ones((v, v)) - np.eye(v)
    lap = np.diag(adj.sum(0)) - adj
    _, _, kf = stax.serial(stax.Dense(4, W_std=1.3, b_std=0.1), stax.Relu(), stax.Aggregate(), stax.GlobalAvgPool(),
                           stax.Dense(1))
    k = kf(np.ones((2, v, 3)), None, "nngp", pattern=(np.stack([lap, lap]),) * 2)
    assert np.all(k == 0)
    star = np.zeros((v, v))
    star[1:, 0] = 1
    x, p = _graph(rng, 3, v)
    _, _, two = stax.serial(stax.Dense(4, W_std=1.3), stax.Relu(), stax.Aggregate(), stax.Aggregate(), stax.Flatten(),
                            stax.Dense(1))
    k = two(x, np.ones((1, v, 2)), "ntk", pattern=(p + np.eye(v), star[None]))
    assert k.shape == (3, 1) and np.all(k == 0)
    k = two(np.concatenate([x, np.ones((1, v, 2))]), None, "ntk", pattern=(np.concatenate([p + np.eye(v), star[None]]),) * 2)
    assert np.all(k[3] == 0) and np.all(k[:3, :3] != 0)


def test_a_one_branch_block_is_its_branch(rng):
    # FanOut(1) parallel(branch) FanInSum after a nonlinearity: neural-tangents computes it (a sum
    # of one branch is that branch), ntkd refused it ("every branch must end Gaussian").
    x = rng.standard_normal((5, 3))
    img = rng.standard_normal((3, 5, 5, 2))
    for data, head, tail in ((x, (stax.Dense(4, b_std=0.1), stax.Relu()), (stax.Dense(1),)),
                             (img, (stax.Conv(3, (3, 3), padding="SAME"), stax.Relu()),
                              (stax.Conv(2, (2, 2)), stax.Relu(), stax.Flatten(), stax.Dense(1)))):
        for fan_in in (stax.FanInSum(), stax.FanInProd(), stax.FanInConcat()):
            with_block = stax.serial(*head, stax.FanOut(1), stax.parallel(stax.Identity()), fan_in, *tail)[2]
            without = stax.serial(*head, *tail)[2]
            a, b = with_block(data, None, ("nngp", "ntk")), without(data, None, ("nngp", "ntk"))
            for g in ("nngp", "ntk"):
                np.testing.assert_allclose(getattr(a, g), getattr(b, g), rtol=1e-14, atol=0)
    # FanOut(n) straight into its FanIn (no parallel), as stax takes it: n Identity branches
    for n, fan_in in ((1, stax.FanInSum()), (2, stax.FanInSum()), (3, stax.FanInProd()), (2, stax.FanInConcat())):
        direct = stax.serial(stax.Dense(4), stax.FanOut(n), fan_in, stax.Dense(1))[2]
        spelled = stax.serial(stax.Dense(4), stax.FanOut(n), stax.parallel(*[stax.Identity()] * n), fan_in,
                              stax.Dense(1))[2]
        assert np.array_equal(direct(x, None, "ntk"), spelled(x, None, "ntk"))
    # still refused: the sum's output is not Gaussian (a nonlinearity after it), two such branches
    with pytest.raises(ValueError, match="a nonlinearity must follow Dense or Conv"):
        stax.serial(stax.Dense(4), stax.Relu(), stax.FanOut(1), stax.parallel(stax.Identity()), stax.FanInSum(),
                    stax.Relu())[2](x, None, "ntk")
    with pytest.raises(ValueError, match="every branch must end Gaussian"):
        stax.serial(stax.Dense(4), stax.Relu(), stax.FanOut(2), stax.parallel(stax.Identity(), stax.Identity()),
                    stax.FanInSum())[2](x, None, "ntk")


def test_layer_arguments_as_neural_tangents_takes_them(rng):
    # Found by a hunt: an integer with __index__ that is not a Python or numpy integer (JAX's
    # jnp.int32(8); here a 0-d numpy array) as a width, and parameterization='NTK', were refused;
    # gamma <= 0 was refused at "arch, column N" of text the caller never wrote.
    x = rng.standard_normal((3, 4))
    want = stax.serial(stax.Dense(8), stax.Relu(), stax.Dense(1))[2](x, None, "ntk")
    got = stax.serial(stax.Dense(np.array(8)), stax.Relu(), stax.Dense(1))[2](x, None, "ntk")
    np.testing.assert_array_equal(got, want)
    with pytest.raises(TypeError, match="must be an integer, not array"):
        stax.Dense(np.array([8]))
    # a whole float as any real 0-d scalar gives it (jnp.float32(8.0) was refused where np.float64(8.0) was taken)
    for w in (8.0, np.float64(8.0), np.float32(8.0), np.array(8.0, np.float32)):
        np.testing.assert_array_equal(stax.serial(stax.Dense(w), stax.Relu(), stax.Dense(1))[2](x, None, "ntk"), want)
    for w in (8.5, np.float32(8.5), np.array(8.5), "8", np.complex128(8)):
        with pytest.raises(TypeError, match="must be an integer, not"):
            stax.Dense(w)
    std = stax.serial(stax.Dense(8, parameterization="standard"), stax.Relu(),
                      stax.Dense(1, parameterization="standard"))[2]
    upper = stax.serial(stax.Dense(8, parameterization="STANDARD"), stax.Relu(),
                        stax.Dense(1, parameterization="Standard"))[2]
    np.testing.assert_array_equal(upper(x, None, "ntk"), std(x, None, "ntk"))
    for layer, name in ((lambda g: stax.Rbf(g), "Rbf"), (lambda g: stax.ExpNormalized(gamma=g), "ExpNormalized")):
        for gamma in (0., -1.):
            with pytest.raises(ValueError, match=rf"stax.{name}: gamma must be > 0, not {gamma!r}"):
                layer(gamma)
