"""The ``kernel_fn`` behind ``ntkd.stax``: a network as text in ntkd's
architecture language, computed by libntkd (include/ntkd.h) in this process
on every core."""

import atexit
import collections
import ctypes
import numbers
import re
import threading

import numpy as np

from . import _lib
from ._array import ready
from .errors import raise_for

_KINDS = ("nngp", "ntk")
_READOUTS = ("Flatten", "GlobalAvgPool", "GlobalSumPool")
_kernel_tuples = {}


def _namedtuple(names):
    """neural-tangents' return type for get=('nngp', 'ntk'): a namedtuple 'AnalyticKernel' in that order."""
    key = tuple(names)
    if key not in _kernel_tuples:
        _kernel_tuples[key] = collections.namedtuple("AnalyticKernel", key)
    return _kernel_tuples[key]


class Kernel(collections.namedtuple("Kernel", ("nngp", "ntk"))):
    """What ``kernel_fn(x1, x2)`` returns with ``get=None``: ``.nngp`` and ``.ntk``
    (numpy arrays, n1 x n2), as neural-tangents' Kernel object carries them.
    A namedtuple, as get=('nngp', 'ntk') returns: neural-tangents' nt.batch
    (kept by a user who changed only the stax import) takes a namedtuple or
    its own Kernel and refused any other object; JAX takes a namedtuple as
    a pytree (a jitted kernel_fn returns it)."""

    __slots__ = ()

    def __repr__(self):
        return f"Kernel(nngp={self.nngp.shape} {self.nngp.dtype}, ntk={self.ntk.shape} {self.ntk.dtype})"


class _Spec:
    """One stax layer or block as ntkd reads it: its text, the
    parameterization its Dense and Conv layers ask for (a set), the
    layers that take (N, D) vectors only (a set of their names), and its
    conv and pooling layers with 2-D sizes, which (N, L, C) sequences do
    not take (in the network's order, each as written and its 1-D form)."""

    def __init__(self, text, params, vectors=(), two_d=(), graph=()):
        self.text = text
        self.params = frozenset(params)
        self.vectors = frozenset(vectors)
        self.two_d = tuple(two_d)
        self.graph = tuple(graph)  # each Aggregate's (implementation, to_dense), in the network's order


def _no_finite(*args, **kwargs):
    raise NotImplementedError("ntkd computes infinite-width kernels only (kernel_fn): it has no finite network to "
                              "initialise or apply; use neural-tangents or JAX's stax for init_fn and apply_fn")


def _spec_of(layer, where):
    try:
        fn = layer[2]
    except (TypeError, IndexError, KeyError):
        raise TypeError(f"{where}: expected a layer (init_fn, apply_fn, kernel_fn) of ntkd.stax, got {layer!r}") \
            from None
    spec = getattr(fn, "_ntkd_spec", None)
    if spec is None:
        raise TypeError(f"{where}: {fn!r} is not a kernel_fn of ntkd.stax (a neural_tangents.stax layer? build "
                        "the network with `from ntkd import stax`)")
    return spec


def layer(text, parameterization=None, vectors=None, two_d=None, graph=None):
    return _triple(_Spec(text, [parameterization] if parameterization else [], [vectors] if vectors else [],
                         [two_d] if two_d else [], [graph] if graph else []))


def combine(kind, layers, count=None):
    specs = [_spec_of(l, f"stax.{kind}") for l in layers]
    params = set().union(*[s.params for s in specs]) if specs else set()
    vectors = set().union(*[s.vectors for s in specs]) if specs else set()
    two_d = [t for s in specs for t in s.two_d]
    graph = [g for s in specs for g in s.graph] * (count if kind == "repeat" else 1)
    if kind == "serial":
        text = " ".join(s.text for s in specs)
    elif kind == "repeat":
        text = f"[{specs[0].text}]*{count}"
    else:  # parallel: each branch one argument
        text = "parallel(" + ", ".join(f"serial({s.text})" if " " in s.text else s.text for s in specs) + ")"
    return _triple(_Spec(text, params, vectors, two_d, graph))


def _triple(spec):
    kf = KernelFn(spec)
    return _no_finite, _no_finite, kf


def _jax_x64():
    """Whether this process has imported JAX with jax_enable_x64 on. JAX then
    computes in float64 whatever the inputs' dtype: neural-tangents' kernels
    of float32 (or integer) data are float64 there, and a float32 kernel in
    their place gave predictions 0.4 % to 78 % off an ill-conditioned
    regression's. ntkd never imports JAX itself."""
    import sys
    jax = sys.modules.get("jax")
    if jax is None:
        return False
    try:
        on = getattr(jax.config, "jax_enable_x64", None)
        return bool(jax.config.read("jax_enable_x64") if on is None else on)
    except Exception:  # a JAX without either spelling: its default, float32
        return False


def _float64_dtype(dtype):
    """Whether dtype is a float of 64 bits or more. By kind and size, not by
    `== np.float64`, which a big-endian '>f8' array (np.load of a file numpy
    wrote on such a machine) does not equal."""
    dtype = np.dtype(dtype)
    return dtype.kind == "f" and dtype.itemsize >= 8


def _wide(*arrays):
    """Whether a kernel of these inputs is computed in float64, as JAX computes
    it: when any input is a float of 64 bits or more, or when JAX runs with
    jax_enable_x64 (_jax_x64)."""
    return any(a is not None and _float64_dtype(a.dtype) for a in arrays) or _jax_x64()


_NARROW_FLOATS = ("bfloat16", "float8_", "float6_", "float4_")  # ml_dtypes' (JAX's) floats: numpy kind 'V'


def _narrow_float(dtype):
    """Whether dtype is one of JAX's floats narrower than float32 that numpy knows only through
    ml_dtypes (bfloat16, the float8s): each of their values is a float32 value."""
    dtype = np.dtype(dtype)
    return dtype.kind == "V" and dtype.name.startswith(_NARROW_FLOATS)


def _real(a):
    """a, or a as float32 where it holds one of JAX's narrow floats (as float16 data, computed in
    float32)."""
    return a.astype(np.float32) if _narrow_float(a.dtype) else a


def _check_narrowed(given, a, name, wider):
    """Refuse a sample whose every value became 0 in the conversion to a's dtype, though its values
    are not (float64 values below float32's range; a longdouble's below float64's): its kernel would
    be 0, as if the sample were zeros. The job file's loader refuses it too. wider: the way to a
    wider precision, where there is one."""
    g = np.asarray(given)
    if g.dtype == a.dtype or not a.size:
        return
    lost = ~a.reshape(a.shape[0], -1).any(axis=1) & g.reshape(a.shape[0], -1).any(axis=1)
    if lost.any():
        i = int(np.argmax(lost))
        big = np.abs(g[i]).max()
        big = np.format_float_scientific(big, precision=3, unique=False) if g.dtype.kind == "f" else str(big)
        cure = f"scale the data, or {wider}" if wider and a.dtype.itemsize < 8 else "scale the data"
        raise ValueError(f"{name}[{i}]: every value is 0 in {a.dtype}, though its values are not (the largest "
                         f"|value| {big}): its kernel would be 0, as if the sample were zeros; {cure}")


def _unmasked(x, name):
    """Refuse a numpy masked array, as neural-tangents does (ValueError): np.asarray drops its mask, and the
    values under the mask were computed on as data (a hunt). Every array ntkd's Python takes passes here."""
    if isinstance(x, np.ma.MaskedArray):
        raise ValueError(f"{name} is a masked array: ntkd computes on every value, and would compute on the values "
                         "under the mask; pass x.filled(value), or the rows you mean (np.ma.compress_rows), as a "
                         "plain array")
    return x


def _as_array(x, name):
    if x is None:
        return None
    _unmasked(x, name)
    if type(x).__name__.endswith("Tracer"):  # vmap or grad of kernel_fn (jax.jit's tracers: _traced)
        raise TypeError(f"{name} is a JAX tracer ({type(x).__name__}): ntkd's kernel_fn computes in libntkd, outside "
                        "JAX, so vmap and grad cannot trace it (jax.jit can); call it without them")
    if isinstance(x, Kernel):
        raise TypeError(f"{name} is a Kernel: ntkd's kernel_fn takes the inputs (arrays), not a Kernel to continue "
                        "from; build the whole network with stax.serial and call it on the inputs")
    if isinstance(x, str):  # kernel_fn(x, 'ntk'): get passed in x2's place
        raise TypeError(f"{name} is the string {x!r}: get is kernel_fn's third argument, as in neural-tangents; "
                        f"write kernel_fn(x1, None, {x!r}) or kernel_fn(x1, get={x!r})")
    if isinstance(x, (list, tuple)):  # neural-tangents' multi-input form, never one array of samples there
        raise TypeError(f"{name} is a {type(x).__name__}: neural-tangents reads a list or tuple of inputs as one "
                        "input per branch of a multi-input network, which ntkd does not compute; pass one array "
                        "of samples (np.asarray or np.stack of the list, if one array is what you mean)")
    try:
        a = np.asarray(x)
    except Exception as e:  # an object without __array__
        raise TypeError(f"{name} must be an array (numpy, or anything with __array__), not {type(x).__name__}") \
            from e
    _check_kind(a.shape, a.dtype, name)
    return _real(a)


def _check_kind(shape, dtype, name):
    if np.dtype(dtype).kind not in "fiub" and not _narrow_float(dtype):
        raise TypeError(f"{name} must hold real numbers, not {dtype}")
    if len(shape) not in (2, 3, 4):
        raise ValueError(f"{name} has shape {tuple(shape)}: ntkd takes (N, D) vectors, (N, L, C) sequences or "
                         "(N, H, W, C) images")


class KernelFn:
    """``kernel_fn(x1, x2=None, get=None)`` with neural-tangents' semantics.

    x1 (n1 samples), x2 (n2 samples, or None: x1 against itself); get None
    returns a Kernel with .nngp and .ntk; 'nngp' or 'ntk' returns that
    array; a tuple returns a namedtuple in its order. float64 inputs (x1 or
    x2) give float64 kernels, any other dtypes float32, unless this process
    runs JAX with jax_enable_x64 (then float64, as JAX computes). ntkd's own
    keywords:
    threads (0: every core), device ('auto', 'cpu', 'cuda'), tile
    (0: chosen), progress (a callable(done, total), True for a tqdm bar, or
    None or False for none; what the callable raises stops the computation
    and is raised: KeyboardInterrupt and SystemExit as they are, others as
    the CancelledError's cause). jax.jit(kernel_fn, static_argnames='get')
    works as in neural-tangents (_traced); vmap and grad do not.
    """

    __name__ = "kernel_fn"  # as neural-tangents' function is named (logging, functools.wraps)

    def __init__(self, spec):
        self._ntkd_spec = spec
        self._net = None
        self._lock = threading.Lock()

    @property
    def arch(self):
        """The network in ntkd's architecture language."""
        return self._ntkd_spec.text

    @property
    def parameterization(self):
        params = self._ntkd_spec.params
        if len(params) > 1:
            raise NotImplementedError("ntkd computes one parameterization for the whole network: this one mixes "
                                      "'ntk' and 'standard' layers")
        return next(iter(params)) if params else "ntk"

    def _handle(self):
        with self._lock:
            if self._net is None:
                opts = _lib.NetOptions(1.0, 0.0, _lib.PARAM_STANDARD if self.parameterization == "standard"
                                       else _lib.PARAM_NTK)
                net = ctypes.c_void_p()
                st = _lib.lib.ntkd_net_create(self.arch.encode(), ctypes.byref(opts), ctypes.byref(net))
                raise_for(st)
                self._net = net
            return self._net

    def without_patterns(self):
        """The kernel_fn of this network called without a pattern: stax's Aggregate is then the
        identity (neural-tangents returns its input kernel), so each is computed as Identity, with
        no identity patterns of N x V x V numbers made for it. Itself for a network without one."""
        spec = self._ntkd_spec
        if not spec.graph:
            return self
        if getattr(self, "_plain", None) is None:
            text = _AGGREGATE.sub("Identity", spec.text)
            self._plain = KernelFn(_Spec(text, spec.params, spec.vectors, spec.two_d))
        return self._plain

    def __del__(self):
        net = getattr(self, "_net", None)
        if net is not None and _lib is not None and _lib.lib is not None:
            _lib.lib.ntkd_net_free(net)

    def canonical(self):
        """The network as ntkd computes it: every layer with all its parameters."""
        net = self._handle()
        n = _lib.lib.ntkd_net_describe(net, None, 0)
        buf = ctypes.create_string_buffer(n + 1)
        _lib.lib.ntkd_net_describe(net, buf, n + 1)
        return buf.value.decode()

    def __repr__(self):
        return f"ntkd kernel_fn: {self.arch}"

    def _check_spatial(self, a, name):
        """Sequences and images need a readout. Without one, neural-tangents
        applies the network position by position and its kernel keeps the
        spatial axes, (n1, n2, L, L) or (n1, n2, H, H, W, W); ntkd's kernels are
        (n1, n2), and its program would use each sample as one flat vector.
        Sequences take 1-D conv and pooling layers only, as in neural-tangents."""
        if a is not None and a.ndim > 2 and self._ntkd_spec.vectors:
            raise NotImplementedError(
                f"{name} has shape {a.shape}: {sorted(self._ntkd_spec.vectors)[0]} takes axis 1 as the channel axis, "
                "which it is on (N, D) vectors only; ntkd's layers take the channels last on sequences and images "
                "(channel_axis=-1)")
        if a is not None and a.ndim == 3 and self._ntkd_spec.two_d:
            given, fix = self._ntkd_spec.two_d[0]
            raise NotImplementedError(
                f"{name} has shape {a.shape}, (N, L, C) sequences, which take 1-D layers only: {given} is 2-D "
                "(neural-tangents refuses it on sequences; ntkd, holding them as L x 1 images, would compute another "
                f"kernel); write its 1-D form, {fix}")
        if a is not None and a.ndim > 2 and not any(r in self.arch for r in _READOUTS):
            raise NotImplementedError(
                f"{name} has shape {a.shape} and the network has no Flatten, GlobalAvgPool or GlobalSumPool: "
                "neural-tangents' kernel of it keeps the spatial axes, ntkd computes (n1, n2) kernels only; add "
                "stax.Flatten() first to use each sample as a vector, or a readout before the last Dense")

    def __call__(self, x1, x2=None, get=None, *, threads=0, device="auto", tile=0, progress=None, **kwargs):
        for k in kwargs:  # neural-tangents' keywords: accepted where they do not change the kernel (below)
            if k not in ("diagonal_batch", "batch_size", "diagonal_spatial", "mask_constant", "pattern"):
                raise TypeError(f"kernel_fn() got an unexpected keyword argument {k!r}")
        names = _requested(get)
        net = self._handle()  # the network's own errors first (e.g. parallel without FanOut), then the data's
        pattern = kwargs.get("pattern")
        if any(_jit_traced(q) for q in (pattern if isinstance(pattern, (tuple, list)) else (pattern,))):
            raise NotImplementedError("kernel_fn under jax.jit with a traced pattern: ntkd computes outside JAX and "
                                      "needs the pattern's values when it is traced; pass the pattern as a constant "
                                      "(close over it), not as an argument of the jitted function")
        if self._ntkd_spec.graph and _no_pattern(kwargs.get("pattern")):
            rest = {k: v for k, v in kwargs.items() if k != "pattern"}
            return self.without_patterns()(x1, x2, get, threads=threads, device=device, tile=tile, progress=progress,
                                           **rest)
        if _jit_traced(x1) or _jit_traced(x2):
            return self._traced(x1, x2, get, names, dict(kwargs, threads=threads, device=device, tile=tile,
                                                         progress=progress))
        a1 = _as_array(x1, "x1")
        a2 = _as_array(x2, "x2")
        self._check_spatial(a1, "x1")
        _check_keywords(a1, kwargs)
        # As JAX computes: float64 if either input is (float32 x1 against
        # float64 x2 was once computed in float32), or under jax_enable_x64.
        dtype = np.float64 if _wide(a1, a2) else np.float32
        g1, g2 = a1, a2
        a1 = np.ascontiguousarray(a1, dtype=dtype)
        _check_narrowed(g1, a1, "x1", None)
        if a2 is not None:
            a2 = np.ascontiguousarray(a2, dtype=dtype)
            _check_narrowed(g2, a2, "x2", None)
            if a2.shape[1:] != a1.shape[1:]:
                raise ValueError(f"x2's samples have shape {a2.shape[1:]}, x1's {a1.shape[1:]}: they must agree")
        p1, p2 = _patterns(self._ntkd_spec.graph, kwargs.get("pattern"), a1, a2, dtype)
        if a2 is not None and "Dropout(" in self.arch and a2.shape == a1.shape and \
                (p1 is None or np.array_equal(p1, p2)):
            gap = np.abs(a1 - a2).reshape(a1.shape[0], -1).max(axis=1, initial=0.0)
            if bool(np.all(gap < 1e-12)):  # neural-tangents' x1_is_x2
                # neural-tangents then scales the diagonal as for x1 against itself but computes
                # on x2's values; ntkd computes on x1's. Where a sample of x2 differs from x1's by
                # more than 1e-11 of that sample's scale the two are other numbers (100 % off at
                # inputs of scale 1e-13 with x2 = x1 / 2): refused, not computed on the wrong values.
                scale = np.abs(a1).reshape(a1.shape[0], -1).max(axis=1, initial=0.0)
                if bool(np.any(gap > 1e-11 * scale)):
                    raise ValueError("x2 differs from x1 by less than 1e-12 everywhere, yet not by rounding: "
                                     "neural-tangents' Dropout takes such an x2 as x1 (its diagonal scaled) "
                                     "while computing on x2's values, which ntkd does not compute; pass x2=None "
                                     "for x1 against itself, or rescale the inputs")
                a2 = None  # Dropout scales the diagonal of x1 against itself
        if a2 is not None and a2.shape == a1.shape and np.array_equal(a1, a2) and \
                (p1 is None or np.array_equal(p1, p2)):
            # kernel_fn(x, x) is kernel_fn(x): x1 against itself, its symmetric matrix computed once
            # (half the entries) with kernel_fn(x)'s bits. (Equal rows of two sets are one sample in
            # the library too, ntk_fc_twins; this was first the fix of their NTK, 4e-5 off in float32.)
            a2 = None
        n1 = a1.shape[0]
        n2 = n1 if a2 is None else a2.shape[0]
        # Only the kernels asked for: get='ntk' of 50 000 samples would hold a 10 GB NNGP for nothing.
        nngp = np.empty((n1, n2), dtype=dtype) if "nngp" in names else None
        ntk = np.empty((n1, n2), dtype=dtype) if "ntk" in names else None
        _compute(net, a1, a2, nngp, ntk, threads, device, tile, progress, p1, p2 if a2 is not None else None)
        out = {"nngp": ready(nngp), "ntk": ready(ntk)}
        if get is None:
            return Kernel(out["nngp"], out["ntk"])
        if isinstance(get, str):
            return out[names[0]]
        return _namedtuple(names)(*[out[n] for n in names])


    def _traced(self, x1, x2, get, names, kw):
        """kernel_fn under jax.jit (neural-tangents' `jit(kernel_fn, static_argnames='get')`):
        JAX traces it with abstract inputs, which have a shape and a dtype but no
        values. The kernels are (n1, n2) in the dtype __call__ would choose, so
        they are known before they are computed: a jax.pure_callback computes
        them with __call__ when the compiled function runs. Everything that can
        be judged from shapes is judged here, at tracing, so that it is raised
        as itself rather than from inside XLA."""
        import sys
        jax = sys.modules["jax"]  # imported: its tracers are here. ntkd never imports JAX itself.
        given = [(x1, "x1")] + ([] if x2 is None else [(x2, "x2")])
        for x, name in given:
            if _jit_traced(x):
                _check_kind(x.shape, x.dtype, name)
            else:
                _as_array(x, name)  # a concrete array beside a traced one: all its own checks
            self._check_spatial(x, name)
        _check_keywords(x1, kw)
        if x2 is not None and tuple(x2.shape[1:]) != tuple(x1.shape[1:]):
            raise ValueError(f"x2's samples have shape {tuple(x2.shape[1:])}, x1's {tuple(x1.shape[1:])}: they must "
                             "agree")
        # What JAX hands the compiled function: without jax_enable_x64 every
        # input is float32 there (a float64 array beside a traced one too, and
        # a float64 result would be refused), with it float64, as JAX computes.
        dtype = np.float64 if _jax_x64() else np.float32
        n1 = x1.shape[0]
        n2 = n1 if x2 is None else x2.shape[0]
        shapes = tuple(jax.ShapeDtypeStruct((n1, n2), dtype) for _ in names)

        def host(a1, a2=None):
            k = self(np.asarray(a1), None if a2 is None else np.asarray(a2), names, **kw)
            return tuple(np.asarray(v, dtype=dtype) for v in k)

        out = dict(zip(names, jax.pure_callback(host, shapes, *[x for x, _ in given])))
        if get is None:
            return Kernel(out["nngp"], out["ntk"])
        if isinstance(get, str):
            return out[names[0]]
        return _namedtuple(names)(*[out[n] for n in names])


# An Aggregate in an arch text: its name and its arguments (aggregate_axis's tuple nests once).
_AGGREGATE = re.compile(r"\bAggregate\b(\((?:[^()]|\([^()]*\))*\))?")


def _no_pattern(pattern):
    """kernel_fn's pattern meaning none (None, or (None, None)): stax's Aggregate is the identity then."""
    return pattern is None or (isinstance(pattern, (tuple, list)) and len(pattern) == 2 and
                               pattern[0] is None and pattern[1] is None)


def _check_keywords(a1, kwargs):
    """neural-tangents' keywords that would change the kernel: refused."""
    if kwargs.get("diagonal_spatial") and len(a1.shape) > 2:
        raise NotImplementedError("kernel_fn(diagonal_spatial=True): ntkd computes the covariances of all pairs "
                                  "of positions; call it without diagonal_spatial")
    if kwargs.get("mask_constant") is not None:
        raise NotImplementedError("kernel_fn(mask_constant=...): ntkd computes unmasked kernels of dense inputs only")


def _sparse_to_dense(p, n, shape, name):
    """neural-tangents' SPARSE pattern, (n, n_edges, K, 2) integer edges (or (n, n_edges, 2) for K = 1), as
    the dense (n, V, V) one its kernel equals: an edge adds 1 to [tail, head]. As stax's segment sums take
    them: coordinates past the size wrap; a head with a negative coordinate is dropped, a tail with one is
    the last node (its -1 index)."""
    p = np.asarray(p)
    k = len(shape)
    if p.ndim == 3 and k == 1:
        p = p[:, :, None, :]
    if p.ndim != 4 or p.shape[-1] != 2 or p.shape[2] != k or p.shape[0] != n:
        raise ValueError(f"{name}: a SPARSE pattern has shape (batch={n}, n_edges, {k}, 2), not {p.shape}")
    if not np.issubdtype(p.dtype, np.integer):
        raise ValueError(f"{name}: a SPARSE pattern holds integer node indices, not {p.dtype}")
    if p.size and (p.max() >= 2 ** 31 or p.min() < -2 ** 31):  # numpy's int64 ravel: uint64 past 2^63 wraps
        raise ValueError(f"{name}: a SPARSE pattern's node indices must lie in -2^31 .. 2^31 - 1")
    p = p.astype(np.int64)
    v = int(np.prod(shape))
    out = np.zeros((n, v, v))
    tails, heads = p[..., 0], p[..., 1]
    flat_t = np.ravel_multi_index(tuple(np.moveaxis(tails, -1, 0)), shape, mode="wrap")
    flat_h = np.ravel_multi_index(tuple(np.moveaxis(heads, -1, 0)), shape, mode="wrap")
    flat_t = np.where(np.all(tails >= 0, axis=-1), flat_t, v - 1)
    keep = np.all(heads >= 0, axis=-1)
    for i in range(n):
        np.add.at(out[i], (flat_t[i][keep[i]], flat_h[i][keep[i]]), 1.0)
    return out


def _pattern(graph, p, a, name, dtype):
    """One pattern as ntkd takes it, (n, V, V) in dtype. DENSE: (n, S, S), S the positions the
    Aggregates see (the input's, or fewer after a pooling or a strided or VALID Conv: the
    library checks the count); SPARSE edges index the input's positions."""
    impl, to_dense = graph
    n, shape = a.shape[0], a.shape[1:-1]
    if impl == "SPARSE":
        d = _sparse_to_dense(p, n, shape, name)
    else:
        d = np.asarray(to_dense(p))
        k = len(shape)
        if d.ndim != 1 + 2 * k or d.shape[0] != n or d.shape[1:1 + k] != d.shape[1 + k:]:
            raise ValueError(f"{name}: a DENSE pattern of these inputs has shape (batch={n}, the positions, the "
                             f"positions again), {(n,) + shape + shape} where the Aggregates see the input's size, "
                             f"not {d.shape}")
        if d.dtype.kind not in "biuf":
            raise ValueError(f"{name}: the pattern holds {d.dtype} values, not real numbers")
    v = int(np.prod(d.shape[1:1 + (d.ndim - 1) // 2]))
    d = d.reshape(n, v, v)
    if not np.all(np.isfinite(d)):
        raise ValueError(f"{name}: the pattern has a value that is not finite")
    if dtype == np.float32:  # the library computes on it in float32: refused where that changes a value
        big = np.abs(d)
        if np.any(big > np.finfo(np.float32).max) or np.any((big > 0) & (big < np.finfo(np.float32).tiny)):
            raise ValueError(f"{name}: the pattern has a value outside float32's normal range (1.2e-38 .. 3.4e38), "
                             "which float32 inputs compute in: pass float64 inputs")
    return np.ascontiguousarray(d, dtype=dtype)


def _patterns(graph, pattern, a1, a2, dtype):
    """kernel_fn's pattern=(pattern1, pattern2) for a network with Aggregate layers, as (n1, V, V) and
    (n2, V, V) arrays (None, None without them: a pattern is then ignored, as neural-tangents ignores it;
    and without a pattern, where the callers compute KernelFn.without_patterns instead)."""
    if not graph or _no_pattern(pattern):
        return None, None
    if len(set((i, id(f)) for i, f in graph)) > 1:
        raise NotImplementedError("the network's Aggregate layers take the pattern in different formats "
                                  "(implementation or to_dense): kernel_fn passes all of them the one pattern")
    if a1.ndim < 3:
        raise NotImplementedError(f"x1 has shape {a1.shape}: Aggregate needs (N, L, C) or (N, H, W, C) data")
    if not isinstance(pattern, (tuple, list)) or len(pattern) != 2:
        raise TypeError("pattern must be a pair (pattern1, pattern2), as neural-tangents' kernel_fn takes it")
    q1, q2 = pattern
    if a2 is None and q2 is None:
        q2 = q1
    if (q1 is None) != (q2 is None):
        raise NotImplementedError("Having exactly one of two `pattern1/2=None` is not implemented (neural-tangents "
                                  "refuses it too)")
    p1 = _pattern(graph[0], _unmasked(q1, "pattern1"), a1, "pattern1", dtype)
    p2 = _pattern(graph[0], _unmasked(q2, "pattern2"), a2 if a2 is not None else a1, "pattern2", dtype)
    if p2.shape[1] != p1.shape[1]:  # the library reads both as V x V per sample
        raise ValueError(f"pattern1 pairs {p1.shape[1]} positions and pattern2 {p2.shape[1]}: the same Aggregates "
                         "see both")
    if a2 is None and not np.array_equal(p1, p2):
        raise ValueError("x2 is None (x1 against itself) and pattern2 differs from pattern1: pass x2=x1 for "
                         "the kernel of x1 under one pattern against x1 under another")
    return p1, p2


def _jit_traced(x):
    """Whether x is an input jax.jit (or eval_shape, make_jaxpr) traces: abstract, with a shape and dtype only."""
    return type(x).__name__ == "DynamicJaxprTracer"


def _requested(get):
    if get is None:
        return ("nngp", "ntk")
    names = (get,) if isinstance(get, str) else tuple(get)
    if not all(isinstance(n, str) for n in names):
        raise TypeError(f"get must be a string, a tuple of strings or None, not {get!r}")
    names = tuple(n.lower() for n in names)  # as neural-tangents reads get: 'NTK' is 'ntk'
    for n in names:
        if n not in _KINDS:
            raise ValueError(f"get: ntkd computes 'nngp' and 'ntk', not {n!r}")
    if not names:
        raise ValueError("get: an empty tuple asks for nothing")
    if len(set(names)) != len(names):
        raise ValueError(f"get: all entries must be unique, not {names}")
    return names


def _data(a):
    d = _lib.Data()
    d.x = a.ctypes.data if a is not None else None
    d.n = a.shape[0]
    per = a.shape[1:]
    d.ndim = len(per)
    for i, s in enumerate(per):
        d.shape[i] = s
    d.dtype = _lib.FLOAT64 if a.dtype == np.float64 else _lib.FLOAT32
    return d


_DEVICES = {"auto": _lib.DEVICE_AUTO, "cpu": _lib.DEVICE_CPU, "cuda": _lib.DEVICE_CUDA, "gpu": _lib.DEVICE_CUDA}


def _progress_fn(progress):
    if progress is True:
        try:
            from tqdm.auto import tqdm
        except ImportError:
            return None, None
        bar = tqdm(total=None, unit="entry", unit_scale=True)

        def tick(done, total):
            if bar.total != total:
                bar.total = total
            bar.update(done - bar.n)
        return tick, bar
    if progress is None or progress is False:
        return None, None
    if not callable(progress):
        raise TypeError(f"progress must be True, False, None or a callable(done, total), not {type(progress).__name__}")
    return progress, None


def _count(x, what, high):
    """threads or tile: a Python or numpy integer (not a bool) in 0 .. high."""
    if isinstance(x, bool) or not isinstance(x, numbers.Integral):
        raise ValueError(f"{what} must be an integer >= 0, not {x!r}")
    x = int(x)
    if not 0 <= x <= high:
        raise ValueError(f"{what} must be between 0 and {high}, not {x}")
    return x


# The computations in flight, thread -> cancel flag: stopped and waited for
# at exit. A daemon thread (or a pool's, after a second Ctrl-C) still
# computing when the interpreter finalised left libntkd's threads calling the
# progress callback into a finalised Python: a segfault at exit.
_running = {}
_running_lock = threading.Lock()


@atexit.register
def _stop_running():
    with _running_lock:
        items = list(_running.items())
    for _, cancel in items:
        cancel.value = 1
    for worker, _ in items:
        if worker.is_alive():
            worker.join(60)  # the flag is polled within a second


def _compute(net, a1, a2, nngp, ntk, threads, device, tile, progress, p1=None, p2=None):
    """ntkd_kernels on a thread of its own, so that Ctrl-C (KeyboardInterrupt
    in the main thread) stops it within a second: the flag it polls."""
    if device not in _DEVICES:
        raise ValueError(f"device must be 'auto', 'cpu' or 'cuda', not {device!r}")
    # the C fields' ranges (int, size_t): a larger value is refused, never wrapped
    threads = _count(threads, "threads", 2**31 - 1)
    tile = _count(tile, "tile", 2**64 - 1)
    callback, bar = _progress_fn(progress)
    cancel = ctypes.c_int(0)
    opts = _lib.ComputeOptions()
    opts.threads = threads
    opts.device = _DEVICES[device]
    opts.tile = tile
    opts.cancel = ctypes.pointer(cancel)
    raised = []  # what a failing callback raised: the cause of the CancelledError, never hidden
    if callback is not None:
        def c_progress(arg, done, total):
            if raised:  # the report at the end, after the stop: the first failure is the one to tell
                return 1
            try:
                callback(int(done), int(total))
            except BaseException as e:  # a failing callback stops the computation (ctypes would drop it)
                raised.append(e)
                return 1
            return 0
        opts.progress = _lib.PROGRESS(c_progress)
    d1 = _data(a1)
    d2 = _data(a2) if a2 is not None else None
    which = (_lib.NNGP if nngp is not None else 0) | (_lib.NTK if ntk is not None else 0)
    result = {}

    def run():
        out = (nngp.ctypes.data if nngp is not None else None, ntk.ctypes.data if ntk is not None else None)
        if p1 is None:
            st = _lib.lib.ntkd_kernels(net, ctypes.byref(d1), ctypes.byref(d2) if d2 is not None else None, which,
                                       *out, ctypes.byref(opts))
        else:
            st = _lib.lib.ntkd_kernels_graph(net, ctypes.byref(d1), p1.ctypes.data,
                                             ctypes.byref(d2) if d2 is not None else None,
                                             p2.ctypes.data if d2 is not None else None, p1.shape[1], which, *out,
                                             ctypes.byref(opts))
        result["status"] = st
        result["message"] = _lib.last_error() if st else ""

    worker = threading.Thread(target=run, name="ntkd kernels", daemon=True)
    with _running_lock:
        _running[worker] = cancel
    try:
        worker.start()
        while worker.is_alive():
            worker.join(0.05)
    except KeyboardInterrupt:
        cancel.value = 1
        worker.join()
        raise
    finally:
        with _running_lock:
            _running.pop(worker, None)
        if bar is not None:
            bar.close()
    if raised:
        # Also where the callback failed at the last report (nothing left to stop) or the
        # computation failed on its own meanwhile: the callback's exception is never dropped.
        e = raised[0]
        if not isinstance(e, Exception):  # KeyboardInterrupt, SystemExit: as the callback raised it
            raise e
        st = result["status"] or _lib.E_CANCELLED
        msg = result["message"] or "stopped after the last report"
        try:
            raise_for(st, f"{msg}: the progress callback raised {type(e).__name__}: {e}")
        except Exception as stop:
            raise stop from e
    raise_for(result["status"], result["message"])
