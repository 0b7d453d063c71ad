"""neural-tangents' ``stax``, computed by ntkd: the same names, signatures and
defaults (neural-tangents 0.6.5) for every layer ntkd computes. Each layer
returns ``(init_fn, apply_fn, kernel_fn)``, so code written for
neural-tangents runs with one changed import::

    from ntkd import stax
    init_fn, apply_fn, kernel_fn = stax.serial(stax.Dense(512), stax.Relu(), stax.Dense(1))
    k = kernel_fn(x_train, x_test, ('nngp', 'ntk'))

ntkd computes infinite-width kernels only: ``init_fn`` and ``apply_fn`` raise.
A stax layer that ntkd does not compute raises ``NotImplementedError`` when it
is constructed, naming it. Each layer becomes one layer of ntkd's
architecture language (docs/JOB-FILE.md); ``kernel_fn.arch`` shows the
network as ntkd reads it.
"""

import enum
import math
import numbers
import operator
import sys

from . import _kernel
from .errors import refused as _refused

__all__ = [
    "serial", "parallel", "repeat", "FanOut", "FanInSum", "FanInProd", "FanInConcat", "Identity", "Dense", "Conv",
    "ConvLocal", "ConvTranspose", "AvgPool", "SumPool", "Flatten", "GlobalAvgPool", "GlobalSumPool", "LayerNorm",
    "Dropout", "GlobalSelfAttention", "ImageResize", "Index", "Slice", "Relu", "LeakyRelu", "Abs", "ABRelu", "Erf",
    "Sigmoid_like", "Gelu", "Sin", "Cos", "Rbf", "Exp", "ExpNormalized", "Gaussian", "Sign", "Monomial",
    "RectifiedMonomial", "Polynomial", "Hermite", "Gabor", "ElementwiseNumerical", "Padding", "Aggregate",
    "AggregateImplementation", "AttentionMechanism", "PositionalEmbedding",
]


class AggregateImplementation(enum.Enum):
    """stax's Aggregate implementations (the pattern's format); a string works too."""
    DENSE = "DENSE"
    SPARSE = "SPARSE"


class AttentionMechanism(enum.Enum):
    """stax's GlobalSelfAttention mechanisms (``stax.AttentionMechanism.SOFTMAX``); a string works too."""
    SOFTMAX = "SOFTMAX"
    IDENTITY = "IDENTITY"
    ABS = "ABS"
    RELU = "RELU"


class PositionalEmbedding(enum.Enum):
    """stax's GlobalSelfAttention positional embeddings (``stax.PositionalEmbedding.SUM``); a string works too."""
    NONE = "NONE"
    SUM = "SUM"
    CONCAT = "CONCAT"


class Padding(enum.Enum):
    """stax's padding names (``stax.Padding.SAME``); a string works too."""
    CIRCULAR = "CIRCULAR"
    SAME = "SAME"
    VALID = "VALID"


# ---- the text of one layer -----------------------------------------------------------

def _num(x, what):
    """A finite number as ntkd's parser reads it, the shortest text that gives the same double."""
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        try:
            x = float(x)  # numpy and JAX scalars, 0-d arrays
        except (TypeError, ValueError):
            raise TypeError(f"{what} must be a number, not {type(x).__name__}") from None
    x = float(x)
    if not math.isfinite(x):
        raise ValueError(f"{what} must be finite, not {x}")
    return repr(x)


_MAX_SIZE = 1000000  # ntkd's limit on widths and sizes (src/kernels/arch.c, NTK_ARCH_MAX_SIZE)
_MAX_BRANCHES = 64  # on a FanOut's branches (NTK_WIDTHS_MAXBRANCH)


def _integral_float(x, what):
    """A width given as a whole floating-point number, as 8.0 or np.float64(8.0) are taken: any 0-d real
    scalar (JAX's jnp.float32(8.0) too, which is not a numbers.Real), as its int."""
    f = None
    if not isinstance(x, (str, bytes)) and getattr(x, "ndim", 0) == 0 and not isinstance(x, complex):
        try:
            f = float(x)
        except (TypeError, ValueError):
            f = None
    if f is None or not f.is_integer():
        raise TypeError(f"{what} must be an integer, not {x!r}") from None
    return int(f)


def _int(x, what, low=1, high=None):
    if isinstance(x, bool):
        raise TypeError(f"{what} must be an integer, not {x!r}")
    if not isinstance(x, numbers.Integral):
        try:
            x = operator.index(x)  # JAX's integer scalars (jnp.int32(8)), as neural-tangents takes them
        except TypeError:
            x = _integral_float(x, what)
    x = int(x)
    if x < low:
        raise ValueError(f"{what} must be at least {low}, not {x}")
    if high is not None and x > high:
        raise NotImplementedError(f"{what} {x} is above ntkd's limit of {high}")
    return x


def _size(x, what):
    """A filter, window or stride: an int (1-D) or a sequence of one or two ints, as a tuple."""
    if isinstance(x, numbers.Integral) and not isinstance(x, bool):
        x = (x,)
    try:
        vals = tuple(_int(v, what) for v in x)
    except TypeError:
        raise TypeError(f"{what} must be a sequence of integers, not {x!r}") from None
    if not 1 <= len(vals) <= 2:
        raise NotImplementedError(f"{what} {vals}: ntkd computes 1-D and 2-D layers only")
    return vals


def _text(vals):
    """A size tuple as ntkd's parser reads it: (3,) or (3, 3)."""
    return "(" + ", ".join(str(v) for v in vals) + ("," if len(vals) == 1 else "") + ")"


def _two_d(call, size_key, size, strides):
    """A conv or pooling layer with a 2-D size (filter or window, or strides),
    which neural-tangents refuses on (N, L, C) sequences: kernel_fn refuses it
    on 3-D data (ntkd holds sequences as L x 1 images, where a 2-D layer would
    compute another kernel, not the 1-D layer's), saying what to write: the
    layer as given and its 1-D form, or None for a 1-D layer. `call` is the
    layer's name with its leading positionals, e.g. 'Conv(8, '."""
    if len(size) == 1 and (strides is None or len(strides) == 1):
        return None
    given = f"{size_key}={size}" + (f", strides={strides}" if strides is not None else "")
    fix = f"{size_key}=({size[0]},)" + (f", strides=({strides[0]},)" if strides is not None else "")
    return f"stax.{call}{given})", f"stax.{call}{fix}, ...)"


def _padding(p):
    if isinstance(p, enum.Enum):
        p = p.name
    if not isinstance(p, str) or p.upper() not in ("VALID", "SAME", "CIRCULAR"):
        raise ValueError(f"padding must be 'VALID', 'SAME' or 'CIRCULAR', not {p!r}")
    return p.upper()


def _axes(batch_axis, channel_axis, layer):
    if batch_axis != 0 or channel_axis not in (-1, None):
        raise NotImplementedError(
            f"stax.{layer}(batch_axis={batch_axis}, channel_axis={channel_axis}): ntkd takes the batch axis first "
            "and channels last (batch_axis=0, channel_axis=-1)")


def _param(parameterization, s, layer):
    if isinstance(parameterization, str):
        parameterization = parameterization.lower()  # 'NTK', as neural-tangents reads it
    if parameterization not in ("ntk", "standard"):
        raise ValueError(f"stax.{layer}: parameterization must be 'ntk' or 'standard', not {parameterization!r}")
    if tuple(s) != (1, 1):
        raise NotImplementedError(f"stax.{layer}(s={tuple(s)}): ntkd computes s = (1, 1) only")
    return parameterization


def _std(std, what):
    """A W_std or b_std: the kernels hold its square only, so its sign is dropped (stax takes either)."""
    if std is None:
        return "None"
    text = _num(std, what)
    return text[1:] if text.startswith("-") else text


# ---- layers ------------------------------------------------------------------------------

def _layer(text, parameterization=None, vectors=None, two_d=None):
    return _kernel.layer(text, parameterization, vectors, two_d)


def serial(*layers):
    """Layers one after the other."""
    return _kernel.combine("serial", layers)


def parallel(*layers):
    """Branches side by side, between a FanOut and a FanIn: ntkd's residual blocks."""
    return _kernel.combine("parallel", layers)


def repeat(layer, n):
    """The layer (or serial block) n times."""
    return _kernel.combine("repeat", (layer,), count=_int(n, "stax.repeat: n", low=0))


def FanOut(num):
    return _layer(f"FanOut({_int(num, 'stax.FanOut: num', high=_MAX_BRANCHES)})")


def FanInSum():
    return _layer("FanInSum")


def FanInProd():
    return _layer("FanInProd")


def FanInConcat(axis=-1):
    """stax's FanInConcat: along the channels (-1, the branches' kernels
    averaged by width) or a spatial axis (e.g. 1 or 2 on (N, H, W, C)
    images: the image grows, the kernel block-diagonal; CPU only). The
    batch axis 0 is refused."""
    a = _int(axis, "stax.FanInConcat: axis", low=-4)
    if a == 0:
        raise NotImplementedError("stax.FanInConcat(axis=0): ntkd does not concatenate along the batch axis")
    return _layer("FanInConcat" if a == -1 else f"FanInConcat(axis={a})")


def Identity():
    return _layer("Identity")


def Dense(out_dim, W_std=1.0, b_std=None, batch_axis=0, channel_axis=-1, parameterization="ntk", s=(1, 1)):
    # channel_axis=1 is the channel axis of (N, D) vectors: taken, and
    # kernel_fn refuses sequences and images for it.
    vectors = "stax.Dense(channel_axis=1)" if batch_axis == 0 and channel_axis == 1 else None
    if not vectors:
        _axes(batch_axis, channel_axis, "Dense")
    p = _param(parameterization, s, "Dense")
    width = _int(out_dim, 'stax.Dense: out_dim', high=_MAX_SIZE)
    return _layer(f"Dense({width}, W_std={_std(W_std, 'stax.Dense: W_std')}, "
                  f"b_std={_std(b_std, 'stax.Dense: b_std')})", p, vectors)


def _conv(name, out_chan, filter_shape, strides, padding, W_std, b_std, dimension_numbers, parameterization, s):
    if dimension_numbers not in (None, ("NHWC", "HWIO", "NHWC"), ("NWC", "WIO", "NWC")):
        raise NotImplementedError(f"stax.{name}(dimension_numbers={dimension_numbers}): ntkd takes NHWC data")
    p = _param(parameterization, s, name)
    out = _int(out_chan, f'stax.{name}: out_chan', high=_MAX_SIZE)
    fs = _size(filter_shape, f'stax.{name}: filter_shape')
    st = _size(strides, f'stax.{name}: strides') if strides is not None else None
    text = f"{name}({out}, {_text(fs)}"
    if st is not None:
        text += f", strides={_text(st)}"
    text += (f", padding='{_padding(padding)}', W_std={_std(W_std, f'stax.{name}: W_std')}, "
             f"b_std={_std(b_std, f'stax.{name}: b_std')})")
    return _layer(text, p, two_d=_two_d(f"{name}({out}, ", "filter_shape", fs, st))


def Conv(out_chan, filter_shape, strides=None, padding="VALID", W_std=1.0, b_std=None, dimension_numbers=None,
         parameterization="ntk", s=(1, 1)):
    return _conv("Conv", out_chan, filter_shape, strides, padding, W_std, b_std, dimension_numbers,
                 parameterization, s)


def ConvLocal(out_chan, filter_shape, strides=None, padding="VALID", W_std=1.0, b_std=None, dimension_numbers=None,
              parameterization="ntk", s=(1, 1)):
    """stax's locally connected layer: a Conv whose weights (and bias) are
    not shared between positions. Computed on CPUs only."""
    return _conv("ConvLocal", out_chan, filter_shape, strides, padding, W_std, b_std, dimension_numbers,
                 parameterization, s)


def ConvTranspose(out_chan, filter_shape, strides=None, padding="VALID", W_std=1.0, b_std=None,
                  dimension_numbers=None, parameterization="ntk", s=(1, 1)):
    """stax's transposed convolution (the image grows by the strides).
    Computed on CPUs only."""
    return _conv("ConvTranspose", out_chan, filter_shape, strides, padding, W_std, b_std, dimension_numbers,
                 parameterization, s)


def _pool(name, window_shape, strides, padding, extra=""):
    ws = _size(window_shape, f'stax.{name}: window_shape')
    st = _size(strides, f'stax.{name}: strides') if strides is not None else None
    text = f"{name}({_text(ws)}"
    if st is not None:
        text += f", strides={_text(st)}"
    return _layer(text + f", padding='{_padding(padding)}'{extra})", two_d=_two_d(f"{name}(", "window_shape", ws, st))


def AvgPool(window_shape, strides=None, padding="VALID", normalize_edges=False, batch_axis=0, channel_axis=-1):
    _axes(batch_axis, channel_axis, "AvgPool")
    return _pool("AvgPool", window_shape, strides, padding, f", normalize_edges={bool(normalize_edges)}")


def SumPool(window_shape, strides=None, padding="VALID", batch_axis=0, channel_axis=-1):
    _axes(batch_axis, channel_axis, "SumPool")
    return _pool("SumPool", window_shape, strides, padding)


def Flatten(batch_axis=0, batch_axis_out=0):
    if batch_axis != 0 or batch_axis_out != 0:
        raise NotImplementedError("stax.Flatten: ntkd takes the batch axis first (batch_axis=0, batch_axis_out=0)")
    return _layer("Flatten")


def GlobalAvgPool(batch_axis=0, channel_axis=-1):
    _axes(batch_axis, channel_axis, "GlobalAvgPool")
    return _layer("GlobalAvgPool")


def GlobalSumPool(batch_axis=0, channel_axis=-1):
    _axes(batch_axis, channel_axis, "GlobalSumPool")
    return _layer("GlobalSumPool")


def LayerNorm(axis=-1, eps=1e-12, batch_axis=0, channel_axis=-1):
    """stax's LayerNorm over ``axis``: the channels (-1), and any of the
    spatial axes of the data, e.g. (1, 2, 3) on (N, H, W, C) images or
    (1, 2) on (N, L, C) sequences: the variances are then averaged over
    those positions. The batch axis 0 is refused."""
    _axes(batch_axis, channel_axis, "LayerNorm")
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    axes = tuple(_int(a, "stax.LayerNorm: axis", low=-4) for a in axes)
    if 0 in axes:
        raise NotImplementedError(f"stax.LayerNorm(axis={axis}): ntkd does not normalise over the batch axis 0")
    text = "-1" if axes == (-1,) else "(" + ", ".join(str(a) for a in axes) + ("," if len(axes) == 1 else "") + ")"
    return _layer(f"LayerNorm(axis={text}, eps={_num(eps, 'stax.LayerNorm: eps')})")


def Dropout(rate, mode="train"):
    """stax's Dropout: ``rate`` the keep rate, in (0, 1]. In mode 'train' the
    kernel of a sample with itself (kernel_fn's diagonal when x2 is None or
    equals x1, and every variance after the layer) is divided by ``rate``;
    mode 'test' is the identity."""
    if mode not in ("test", "train"):
        raise ValueError('The `mode` must be either "test"  or "train".')
    r = _num(rate, "stax.Dropout: rate")
    if not 0.0 < float(r) <= 1.0:
        raise ValueError("The `rate` must be > 0. and <= 1.")
    return _layer("Identity" if mode == "test" else f"Dropout({r}, mode='train')")


def _enum_name(x, names, what):
    if isinstance(x, enum.Enum):
        x = x.name
    if not isinstance(x, str) or x not in names:
        raise ValueError(f"{what} must be one of {', '.join(repr(n) for n in names)}, not {x!r}")
    return x


def GlobalSelfAttention(n_chan_out, n_chan_key, n_chan_val, n_heads, linear_scaling=True, W_key_std=1.0,
                        W_value_std=1.0, W_query_std=1.0, W_out_std=1.0, b_std=None, attention_mechanism="SOFTMAX",
                        pos_emb_type="NONE", pos_emb_p_norm=2, pos_emb_decay_fn=None, n_chan_pos_emb=None,
                        W_pos_emb_std=1.0, val_pos_emb=False, batch_axis=0, channel_axis=-1):
    """stax's GlobalSelfAttention in its infinite-width limit (docs/MATH.md,
    "Convolutional networks"), on sequences (N, L, C) or images (N, H, W, C). As in
    neural-tangents, ``linear_scaling=False`` has a closed form only with
    ``attention_mechanism='IDENTITY'``. Positional embeddings 'SUM' and
    'CONCAT' are one-hot: ``pos_emb_decay_fn`` must be None, and
    ``n_chan_pos_emb`` None (as many channels as the input)."""
    name = "stax.GlobalSelfAttention"
    _axes(batch_axis, channel_axis, "GlobalSelfAttention")
    widths = [_int(v, f"{name}: {k}", high=_MAX_SIZE) for k, v in
              (("n_chan_out", n_chan_out), ("n_chan_key", n_chan_key), ("n_chan_val", n_chan_val),
               ("n_heads", n_heads))]
    mech = _enum_name(attention_mechanism, ("SOFTMAX", "IDENTITY", "ABS", "RELU"), f"{name}: attention_mechanism")
    pos = _enum_name(pos_emb_type, ("NONE", "SUM", "CONCAT"), f"{name}: pos_emb_type")
    if not linear_scaling and mech != "IDENTITY":
        raise NotImplementedError(f"{name}(linear_scaling=False): no known closed form for the {mech} mechanism "
                                  "(neural-tangents raises NotImplementedError too); IDENTITY has one")
    if pos_emb_decay_fn is not None:
        raise NotImplementedError(f"{name}: pos_emb_decay_fn must be None in ntkd (one-hot positional embeddings)")
    if n_chan_pos_emb is not None:
        raise NotImplementedError(f"{name}: n_chan_pos_emb must be None in ntkd (as many channels as the input)")
    key, query = _num(W_key_std, f"{name}: W_key_std"), _num(W_query_std, f"{name}: W_query_std")
    if float(key) * float(query) < 0:
        raise NotImplementedError(f"{name}: W_key_std * W_query_std < 0 (the attention logits negated): ntkd takes "
                                  "scales >= 0")
    text = (f"GlobalSelfAttention({widths[0]}, {widths[1]}, {widths[2]}, {widths[3]}, "
            f"linear_scaling={bool(linear_scaling)}, W_key_std={key.lstrip('-')}, "
            f"W_value_std={_std(W_value_std, name + ': W_value_std')}, W_query_std={query.lstrip('-')}, "
            f"W_out_std={_std(W_out_std, name + ': W_out_std')}, b_std={_std(b_std, name + ': b_std')}, "
            f"attention_mechanism='{mech}', pos_emb_type='{pos}', "
            f"pos_emb_p_norm={_num(pos_emb_p_norm, name + ': pos_emb_p_norm').lstrip('-')}, "
            f"W_pos_emb_std={_std(W_pos_emb_std, name + ': W_pos_emb_std')}, val_pos_emb={bool(val_pos_emb)})")
    return _layer(text)


def ImageResize(shape, method, antialias=True, precision=None, batch_axis=0, channel_axis=-1):
    """stax's ImageResize (jax.image.resize of the image, so of its
    covariance, docs/MATH.md): ``shape`` one entry per axis of the data, -1
    where an axis keeps its size (the batch and the channels must);
    ``method`` 'linear' (or 'bilinear', 'trilinear', 'triangle') or
    'nearest', the two neural-tangents' kernel_fn computes; ``precision``
    changes nothing."""
    name = "stax.ImageResize"
    _axes(batch_axis, channel_axis, "ImageResize")
    if isinstance(method, enum.Enum):
        method = method.name.lower()
    if not isinstance(method, str):
        raise ValueError(f"{name}: method must be a string or jax.image.ResizeMethod, not {method!r}")
    m = method  # jax's names, lower case
    if m in ("cubic", "bicubic", "tricubic", "lanczos3", "lanczos5"):
        raise NotImplementedError(f'{name}: only "linear" and "nearest" interpolation have a kernel '
                                  f'(neural-tangents\' kernel_fn refuses {method!r} too)')
    if m not in ("linear", "bilinear", "trilinear", "triangle", "nearest"):
        raise ValueError(f"{name}: unknown method {method!r}")
    try:
        entries = [_int(s, f"{name}: a shape entry", low=-1) for s in shape]
    except TypeError:
        raise ValueError(f"{name}: shape must be a sequence of integers, not {shape!r}") from None
    if len(entries) not in (3, 4) or any(s != -1 and not 1 <= s <= _MAX_SIZE for s in entries):
        raise NotImplementedError(f"{name}: shape {tuple(shape)}: ntkd takes (N, L, C) or (N, H, W, C) data, one "
                                  "entry per axis, each -1 or from 1 to 1000000")
    if entries[0] != -1 or entries[-1] != -1:
        raise NotImplementedError(f"{name}: shape {tuple(shape)}: ntkd keeps the batch and the channels (-1 first "
                                  "and last)")
    text = f"ImageResize(({', '.join(str(s) for s in entries)}), '{'nearest' if m == 'nearest' else 'linear'}'"
    return _layer(text + (")" if antialias or m == "nearest" else ", antialias=False)"))


class _Slice:
    """stax.Slice: ``Slice[:, 1:5, ::2]`` is the tuple of slices Index takes."""

    def __getitem__(self, idx):
        return idx


Slice = _Slice()


def Index(idx, batch_axis=0, channel_axis=-1):
    """stax's Index, ``x[idx]``: idx slices of the spatial axes (``Slice[:, 1:5, ::2]``, an Ellipsis allowed),
    the batch and the channels whole. An integer index removes its axis, which ntkd's layers do not follow:
    NotImplementedError (a slice of one, ``i:i+1``, keeps it: the same kernel before a readout)."""
    _axes(batch_axis, channel_axis, "Index")
    items = idx if isinstance(idx, tuple) else (idx,)
    parts = []
    for it in items:
        if it is Ellipsis:
            parts.append("...")
        elif isinstance(it, slice):
            bound = lambda v, what: "" if v is None else str(_int(v, f"stax.Index: a slice's {what}",
                                                                    low=-_MAX_SIZE, high=_MAX_SIZE))
            ends = [bound(it.start, "start"), bound(it.stop, "stop")]
            step = "" if it.step is None else ":" + bound(it.step, "step")
            if step == ":0":
                raise ValueError("stax.Index: slice step cannot be zero")
            parts.append(f"{ends[0]}:{ends[1]}{step}")
        elif isinstance(it, numbers.Integral) and not isinstance(it, bool):
            one = f"{int(it)}:{int(it) + 1}" if int(it) != -1 else "-1:"
            raise NotImplementedError(f"stax.Index: the integer index {it} removes its axis, which ntkd's layers do "
                                      f"not follow; a slice of one keeps it ({one}: the same kernel before a "
                                      "readout)")
        else:
            raise NotImplementedError(f"stax.Index: idx items must be slices or ..., not {it!r}")
    if not parts or len(parts) > 5:
        raise NotImplementedError(f"stax.Index: idx {idx!r}: ntkd takes 1 to 5 items")
    return _layer(f"Index(Slice[{', '.join(parts)}])")


# ---- nonlinearities (do_stabilize changes nothing in the kernel: accepted) ---------------

def Relu(do_stabilize=False):
    return _layer("Relu")


def LeakyRelu(alpha, do_stabilize=False):
    return _layer(f"LeakyRelu({_num(alpha, 'stax.LeakyRelu: alpha')})")


def Abs(do_stabilize=False):
    return _layer("Abs")


def ABRelu(a, b, do_stabilize=False):
    return _layer(f"ABRelu({_num(a, 'stax.ABRelu: a')}, {_num(b, 'stax.ABRelu: b')})")


def Erf(a=1.0, b=1.0, c=0.0):
    return _layer(f"Erf({_num(a, 'stax.Erf: a')}, {_num(b, 'stax.Erf: b')}, {_num(c, 'stax.Erf: c')})")


def Sigmoid_like():
    return _layer("Sigmoid_like")


def Gelu(approximate=False):
    return _layer(f"Gelu(approximate={bool(approximate)})")


def Sin(a=1.0, b=1.0, c=0.0):
    return _layer(f"Sin({_num(a, 'stax.Sin: a')}, {_num(b, 'stax.Sin: b')}, {_num(c, 'stax.Sin: c')})")


def Cos(a=1.0, b=1.0, c=0.0):
    return _layer(f"Cos({_num(a, 'stax.Cos: a')}, {_num(b, 'stax.Cos: b')}, {_num(c, 'stax.Cos: c')})")


def _positive(x, what):
    """_num of a number that must be > 0 (ntkd's closed forms of Rbf and ExpNormalized need gamma > 0),
    refused here in the caller's words rather than at a column of the arch text it never wrote."""
    text = _num(x, what)
    if not float(text) > 0:
        raise ValueError(f"{what} must be > 0, not {float(text)!r}: ntkd computes the closed form for gamma > 0 "
                         "(neural-tangents takes gamma <= 0, a constant or growing kernel)")
    return text


def Rbf(gamma=1.0):
    return _layer(f"Rbf({_positive(gamma, 'stax.Rbf: gamma')})")


def Exp(a=1, b=1):
    return _layer(f"Exp({_num(a, 'stax.Exp: a')}, {_num(b, 'stax.Exp: b')})")


def ExpNormalized(gamma=1, shift=-1, do_clip=False):
    return _layer(f"ExpNormalized({_positive(gamma, 'stax.ExpNormalized: gamma')}, "
                  f"{_num(shift, 'stax.ExpNormalized: shift')}, do_clip={bool(do_clip)})")


def Gaussian(a=1, b=-1):
    return _layer(f"Gaussian({_num(a, 'stax.Gaussian: a')}, {_num(b, 'stax.Gaussian: b')})")


def Sign():
    return _layer("Sign")


def Monomial(degree):
    return _layer(f"Monomial({_int(degree, 'stax.Monomial: degree', low=0)})")


def RectifiedMonomial(degree):
    return _layer(f"RectifiedMonomial({_int(degree, 'stax.RectifiedMonomial: degree', low=0)})")


def Polynomial(coef):
    try:
        coefs = [_num(c, "stax.Polynomial: coef") for c in coef]
    except TypeError:
        raise TypeError(f"stax.Polynomial: coef must be a sequence of numbers, not {coef!r}") from None
    if len(coefs) > 32:  # ntkd's limit (its job file's too), degree 31
        raise NotImplementedError(f"stax.Polynomial: ntkd takes at most 32 coefficients (degree 31), not "
                                  f"{len(coefs)}")
    return _layer("Polynomial([" + ", ".join(coefs) + "])")


def Hermite(degree):
    return _layer(f"Hermite({_int(degree, 'stax.Hermite: degree', low=0)})")


def Gabor():
    return _layer("Gabor")


# The functions ElementwiseNumerical computes, by the names jax.nn, jax.numpy and
# numpy give them (src/kernels/layers.c reads the same names).
_NUMERICAL = ("tanh", "sigmoid", "softplus", "silu", "swish", "elu", "selu", "celu", "sin", "cos", "exp", "abs",
              "absolute", "relu", "erf")
_NUMERICAL_MODULES = ("jax", "numpy", "scipy", "math", "torch")


def _numerical_name(fn):
    """fn's name where it is one of _NUMERICAL from a library ntkd trusts to mean it, else None."""
    if isinstance(fn, str):
        return fn.lower() if fn.lower() in _NUMERICAL else None
    name = getattr(fn, "__name__", None)
    module = getattr(fn, "__module__", None) or type(fn).__module__ or ""  # numpy's ufuncs: module numpy
    if name in _NUMERICAL and module.split(".")[0] in _NUMERICAL_MODULES and _is_library_function(fn, name, module):
        return name
    return None


# Where the functions of _NUMERICAL are found by their names (searched only among the modules already imported).
_NUMERICAL_PUBLIC = ("numpy", "math", "scipy.special", "jax.numpy", "jax.nn", "jax.scipy.special", "jax.lax", "torch",
                     "torch.nn.functional", "torch.special")


def _is_library_function(fn, name, module):
    """Whether fn is the library's function of that name itself. A wrapper
    that copies its name and module (functools.wraps: jax.grad(jnp.tanh),
    jnp.vectorize(jax.grad(jnp.tanh)), jax.checkpoint, ...) computes another
    function, whose kernel stax computes and ntkd would not."""
    for m in (module,) + _NUMERICAL_PUBLIC:
        mod = sys.modules.get(m)
        if mod is not None and getattr(mod, name, None) is fn:
            return True
    return False


def ElementwiseNumerical(fn, deg=None, df=None):
    """stax.ElementwiseNumerical, exactly: ``fn`` is one of jax.nn's or numpy's tanh,
    sigmoid, softplus, silu (swish), elu, selu, celu, sin, cos, exp, abs, relu (or
    its name as a string). ntkd computes the kernel to ~1e-14 by its own quadrature
    (docs/MATH.md), so ``deg`` (stax's Gauss-Hermite nodes) changes nothing; ``df``
    must be None (ntkd differentiates the functions it knows itself). An arbitrary
    callable raises NotImplementedError."""
    name = _numerical_name(fn)
    if name is None:
        gelu = getattr(fn, "__name__", fn) == "gelu"  # neural-tangents' examples/elementwise_numerical.py
        raise NotImplementedError(
            f"stax.ElementwiseNumerical: ntkd computes it for named functions only "
            f"({', '.join(_NUMERICAL)} from jax.nn, jax.numpy or numpy), not {fn!r}" +
            ("; for gelu, stax.Gelu() is the exact GELU's kernel in closed form (jax.nn.gelu is by default its "
             "tanh approximation, whose kernel is close to it but not the same)" if gelu else ""))
    if df is not None:
        raise NotImplementedError("stax.ElementwiseNumerical: df must be None (ntkd differentiates fn itself)")
    text = f"ElementwiseNumerical({name}"
    if deg is not None:
        text += f", deg={_int(deg, 'stax.ElementwiseNumerical: deg')}"
    return _layer(text + ")")


def _identity(p):
    return p


def Aggregate(aggregate_axis=None, batch_axis=0, channel_axis=-1, to_dense=_identity, implementation="DENSE"):
    """stax.Aggregate, a graph network's layer: each position (node) of a
    sample becomes the weighted sum of its predecessors, by the sample's
    pattern, given to kernel_fn as ``pattern=(pattern1, pattern2)``
    (neural-tangents' formats: DENSE (N, V, V), or (N, H, W, H, W) on images,
    passed through ``to_dense`` first; SPARSE (N, n_edges, K, 2) integer
    edges). ntkd aggregates over every spatial axis (``aggregate_axis`` None,
    or all of them); the batch axis comes first and the channels last."""
    _axes(batch_axis, channel_axis, "Aggregate")
    impl = implementation.value if isinstance(implementation, enum.Enum) else implementation
    if impl not in ("DENSE", "SPARSE"):
        raise ValueError(f"{implementation!r} is not a valid AggregateImplementation")
    if impl == "DENSE" and not callable(to_dense):
        raise TypeError(f"stax.Aggregate: to_dense must be a function, not {to_dense!r}")
    text = "Aggregate"
    if aggregate_axis is not None:
        axes = tuple(aggregate_axis) if isinstance(aggregate_axis, (tuple, list)) else (aggregate_axis,)
        axes = tuple(_int(a, "stax.Aggregate: aggregate_axis", low=-4) for a in axes)
        if not axes:
            raise NotImplementedError("stax.Aggregate(aggregate_axis=()): no axis to aggregate over (the identity); "
                                      "ntkd aggregates over every spatial axis")
        text += "(aggregate_axis=(" + ", ".join(str(a) for a in axes) + ("," if len(axes) == 1 else "") + "))"
    return _kernel.layer(text, graph=(impl, to_dense if impl == "DENSE" else None))


# ---- what ntkd does not compute: refused when constructed --------------------------------

for _name, _why in [
    ("DotGeneral", "not implemented"),
    ("Elementwise", "arbitrary nonlinearities need their kernel in closed form: use a named one, or "
                    "ElementwiseNumerical with a function ntkd knows"),
    # neural-tangents' decorators for layers of one's own: their kernel_fn is JAX code, and ntkd
    # computes its layers in C (a missing name said only "has no attribute")
    ("layer", "a layer of one's own: its kernel_fn is JAX code, and ntkd computes the layers it names in C"),
    ("requires", "a layer of one's own: its kernel_fn is JAX code, and ntkd computes the layers it names in C"),
    ("supports_masking", "masked inputs: ntkd computes every pair of positions, unmasked"),
    ("unmask_fn", "masked inputs: ntkd computes every pair of positions, unmasked"),
]:
    globals()[_name] = _refused("stax", _name, _why)
del _name, _why
