"""neural-tangents' ``predict.gp_inference``,
``predict.gradient_descent_mse_ensemble``, ``predict.gradient_descent_mse``,
``predict.gradient_descent`` (any loss: its ODE, integrated by _ode.py) and
``predict.max_learning_rate`` (neural-tangents 0.6.5's signatures,
defaults and return conventions), over numpy arrays or ntkd stores::

    from ntkd import predict
    predict_fn = predict.gradient_descent_mse_ensemble(kernel_fn, x_train, y_train, diag_reg=1e-4)
    mean = predict_fn(x_test=x_test, get='ntk')                     # (m, k), t = infinity
    mean, cov = predict_fn(x_test=x_test, get='nngp', compute_cov=True)
    means = predict_fn(t=[1., 10., 100.], x_test=x_test, get='ntk')  # (3, m, k), during training

    S = ntkd.batch(kernel_fn, x_train, x_test, store='k.ntk', test_test=True)
    predict_fn = predict.gp_inference(S, y_train, diag_reg=1e-4)   # a store: its train x train block
    mean = predict_fn('ntk', k_test_train=S)                         # its test x train block

The regulariser is neural-tangents' ``diag_reg``: ``diag_reg * trace(K)/n``
is added to the train kernel's diagonal, or ``diag_reg`` itself with
``diag_reg_absolute_scale=True``. Means and covariances are computed in
float64 whatever the kernels' precision (as ``ntkd solve`` does), and
returned as float64 numpy arrays.

Time: t=None or inf is the end of training, solved (Cholesky); a finite t, or
an array of times of any shape (its axes lead the outputs'), is computed in
the train kernel's eigenbasis (numpy's eigh, made once per kernel and kept),
in units of the learning rate, the loss normalised by y_train.size, as
neural-tangents computes it. That is numpy in this process, whatever
``method`` says (it says how t = infinity is solved): a store's train block
of at most ``NUMPY_MAX_TRAIN`` samples.

How t = infinity is solved (the ``method`` keyword):

- ``'numpy'``: the train block whole in float64, its Cholesky factor
  (numpy.linalg) and triangular solves; any targets, any test kernels. The
  default for arrays, and for a store of at most ``NUMPY_MAX_TRAIN`` train
  samples (its blocks are read with ntkd.store): for those the block and
  its factor (16 n^2 bytes, 4 GiB at n = 16384) fit a process, and no
  program or file is involved.
- ``'lapack'``, ``'scalapack'``, ``'cg'``, ``'auto'`` (a store only):
  ``ntkd solve`` (docs/SOLVE.md) with a job file generated from the store's
  job, on ``ranks`` processes (mpirun when ranks > 1): for train sets beyond
  one process's memory (ScaLAPACK over the ranks, CG streaming the store).
  The default for stores of more train samples (``'auto'``: ntkd chooses).
  ntkd solves one-hot class labels; targets y are sent as the labels of
  their distinct rows (y = onehot(labels) @ rows, exactly), so any real
  targets work, at one column per distinct row (at most 65536).
  Covariances: method lapack only, NNGP and NTK (not 'ntkgp').
"""

import collections
import dataclasses
import math
import numbers
import os
import shutil
import tempfile

import numpy as np

from . import _ode, _program
from ._array import ready
from ._kernel import _float64_dtype, _real, _unmasked
from .errors import SolveError

__all__ = ["gp_inference", "gradient_descent_mse_ensemble", "gradient_descent_mse", "gradient_descent",
           "max_learning_rate", "Gaussian", "ODEState", "NUMPY_MAX_TRAIN"]

NUMPY_MAX_TRAIN = 16384
# A train kernel (regularised) whose most negative eigenvalue passes this fraction of its largest in
# magnitude is refused at finite times: rounding leaves ~1e-7 of it in float32, ~1e-15 in float64.
NOT_PSD = 1e-4

Gaussian = collections.namedtuple("Gaussian", ["mean", "covariance"])
Gaussian.__doc__ = "A posterior: mean and covariance (neural-tangents' predict.Gaussian)."

_METHODS = (None, "numpy", "auto", "lapack", "scalapack", "cg")
_PROGRAM_METHODS = ("auto", "lapack", "scalapack", "cg")
_tuples = {}


def _gaussians(names):
    """neural-tangents' return type for several `get`: a namedtuple 'Gaussians' in that order."""
    if names not in _tuples:
        _tuples[names] = collections.namedtuple("Gaussians", names)
    return _tuples[names]


def _canonical_get(get, allowed):
    """(one name given as a string?, the names) as neural-tangents reads `get`."""
    if get is None:
        return False, ("nngp", "ntk")
    if isinstance(get, str):
        single, names = True, (get,)
    else:
        try:
            names = tuple(get)
        except TypeError:
            raise TypeError(f"get must be a string, a tuple of strings or None, not {get!r}") from None
        single = False
        if not names:
            raise ValueError('"get" must be non-empty.')
    if not all(isinstance(g, str) for g in names):
        raise TypeError(f"get must be a string, a tuple of strings or None, not {get!r}")
    names = tuple(g.lower() for g in names)
    if len(set(names)) < len(names):
        raise ValueError(f'All entries in "get" must be unique. Got {names}')
    for g in names:
        if g not in allowed:
            raise ValueError(f"get: {g!r} is not one of {', '.join(map(repr, allowed))}")
    return single, names


def _output(out, get, single):
    """One prediction or neural-tangents' namedtuple of them, as arrays that take block_until_ready()."""
    if single:
        return ready(out[get[0]])
    return ready(_gaussians(tuple(out))(*out.values()))


def _flag(x, what):
    """A flag as neural-tangents takes it (used as a truth value there): a bool, or the
    integers 0 and 1 (numpy's and JAX's 0-d arrays of them too); anything else is more likely a
    slip (a string, 'no', is true)."""
    if hasattr(x, "dtype") and np.ndim(x) == 0 and np.asarray(x).dtype.kind in "biu":
        x = np.asarray(x).item()
    if isinstance(x, (bool, np.bool_)) or (isinstance(x, (numbers.Integral, np.integer)) and x in (0, 1)):
        return bool(x)
    raise TypeError(f"{what} must be True or False, not {x!r}")


def _number(x, what):
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        try:
            x = float(np.asarray(x).item()) if np.ndim(x) == 0 else None
        except (TypeError, ValueError):
            x = None
        if x is None:
            raise TypeError(f"{what} must be a real number") from None
    x = float(x)
    if not np.isfinite(x):
        raise ValueError(f"{what} must be finite, not {x}")
    return x


def _real_array(x, what):
    _unmasked(x, what)
    try:
        a = _real(np.asarray(x))
    except Exception as e:
        raise TypeError(f"{what} must be an array, not {type(x).__name__}") from e
    if a.dtype.kind not in "iuf":
        raise TypeError(f"{what} must hold real numbers, not {a.dtype}")
    return a


def _targets(y_train, trace_axes):
    """y_train as an (n, k) float64 matrix, and the shape of one sample's outputs."""
    y = _real_array(y_train, "y_train")
    if y.ndim == 0:
        raise ValueError("y_train must have a sample axis first: shape (n,) or (n, k)")
    if y.shape[0] == 0:  # (numpy's reshape said "cannot reshape array of size 0", naming nothing)
        raise ValueError(f"y_train has shape {y.shape}: the predictions need n >= 1 train samples")
    if not np.all(np.isfinite(y)):
        raise ValueError("y_train holds values that are not finite")
    if isinstance(trace_axes, (numbers.Integral, np.integer)) and not isinstance(trace_axes, bool):
        trace_axes = (int(trace_axes),)
    try:
        axes = sorted({int(np.arange(y.ndim)[a]) for a in trace_axes})
    except (TypeError, IndexError):
        raise ValueError(f"trace_axes {trace_axes!r}: axes of y_train (shape {y.shape})") from None
    # ntkd's kernels are (n, n): the covariance along every output axis is the identity
    # (neural-tangents' trace_axes), and the samples are the first axis.
    if axes != list(range(1, y.ndim)):
        raise ValueError(
            f"trace_axes {tuple(trace_axes)} with y_train of shape {y.shape}: ntkd's kernels are (n, n) matrices, so "
            f"the samples are y_train's first axis and every other axis must be in trace_axes "
            f"({tuple(range(1, y.ndim))}, e.g. trace_axes=(-1,) for y_train of shape (n, k))")
    return np.asarray(y, dtype=np.float64).reshape(y.shape[0], -1), y.shape[1:]


def _is_store(k):
    from . import store
    return isinstance(k, store.Store)


def _attr(k, g, what):
    """Kernel g ('nngp' or 'ntk') of k: an array is any kernel, a Kernel or namedtuple has attributes."""
    if k is None:
        return None
    if _is_store(k):
        return k
    if hasattr(k, "nngp") or hasattr(k, "ntk"):
        v = getattr(k, g, None)
        if v is None:
            raise ValueError(f"{what} holds no {g!r} kernel")
        return v
    return k


def _matrix(a, what, shape=None):
    a = _real_array(a, what)
    if a.ndim != 2 or (shape is not None and a.shape != shape):
        want = f"({shape[0]}, {shape[1]})" if shape is not None else "2-D"
        raise ValueError(f"{what} has shape {a.shape}, not {want}: ntkd's kernels are (n1, n2) matrices")
    return np.asarray(a, dtype=np.float64)


def _finite(a, what, error=ValueError):
    """a, if every entry is finite (a NaN in a kernel gave NaN predictions, returned as such)."""
    bad = ~np.isfinite(a)
    if bad.any():
        i, j = (int(v) for v in np.unravel_index(np.argmax(bad), bad.shape))
        raise error(f"{what} is not finite: entry ({i}, {j}) is {a[i, j]} ({int(np.count_nonzero(bad))} such "
                    "entries)")
    return a


def _one_matrix(k, what, hint):
    """k as one float64 matrix, as neural-tangents' gradient_descent_mse and max_learning_rate
    take it: a Kernel or a store is not one (which kernel?): hint says what to pass."""
    if _is_store(k) or hasattr(k, "nngp") or hasattr(k, "ntk"):
        raise TypeError(f"{what}: one kernel matrix, as neural-tangents takes it: {hint}")
    return _matrix(k, what)


# ---- the numpy solve ---------------------------------------------------------------------------

_BLOCK = 256


def _lower_solve(L, B, inv=None):
    """X with L X = B, L lower triangular: blocked forward substitution (BLAS-3 updates). With
    inv (_block_inverses(L)), the diagonal blocks are applied as products instead of solved."""
    X = np.array(B, dtype=np.float64, copy=True)
    n = L.shape[0]
    for i0 in range(0, n, _BLOCK):
        i1 = min(i0 + _BLOCK, n)
        X[i0:i1] = inv[i0 // _BLOCK] @ X[i0:i1] if inv else np.linalg.solve(L[i0:i1, i0:i1], X[i0:i1])
        if i1 < n:
            X[i1:] -= L[i1:, i0:i1] @ X[i0:i1]
    return X


def _upper_solve(L, B, inv=None):
    """X with L^T X = B: blocked back substitution (inv as for _lower_solve)."""
    X = np.array(B, dtype=np.float64, copy=True)
    n = L.shape[0]
    starts = list(range(0, n, _BLOCK))
    for i0 in reversed(starts):
        i1 = min(i0 + _BLOCK, n)
        X[i0:i1] = inv[i0 // _BLOCK].T @ X[i0:i1] if inv else np.linalg.solve(L[i0:i1, i0:i1].T, X[i0:i1])
        if i0:
            X[:i0] -= L[i0:i1, :i0].T @ X[i0:i1]
    return X


def _block_inverses(L):
    """The inverses of L's diagonal blocks: a solve through them costs matrix products alone, where
    each np.linalg.solve of a block factors it again (the condition estimate's 13 single-column
    solves cost 2.5x the Cholesky at n = 1 000: scripts/bench_condition.py). Less accurate than
    substitution where a block is ill-conditioned, so the estimate alone uses them; the
    predictions do not."""
    return [np.linalg.inv(L[i0:i0 + _BLOCK, i0:i0 + _BLOCK]) for i0 in range(0, L.shape[0], _BLOCK)]


def _regularised(K, diag_reg, absolute, symmetrise=False):
    """(K + reg I as a new float64 array, reg), reg = diag_reg * trace(K)/n unless absolute; with
    symmetrise, (K + K^T)/2 + reg I, as JAX's eigh reads a matrix (its Cholesky, the upper triangle)."""
    A = (K + K.T) / 2 if symmetrise else np.array(K, dtype=np.float64, copy=True)
    n = A.shape[0]
    reg = diag_reg if absolute else diag_reg * np.trace(A) / n
    A[np.diag_indices(n)] += reg
    return A, reg


# A train kernel whose reciprocal condition number (1-norm) is below this is refused, as ntkd
# solve refuses it (NTK_SOLVE_MIN_RCOND, src/solve/solve.h; docs/SOLVE.md): its solution may have
# lost all its digits.
MIN_RCOND = 1e-13

# How far (w t/size) a mode of a rounding eigenvalue may have moved at a finite time before the test
# outputs are refused (_Numpy._settled_noise): their error grows with it, about 4x it on a kernel of
# two equal samples with different targets (a hunt), so 1e-8 bounds it near 4e-8.
NOISE_MOVED = 1e-8


def _upper_norm1(A):
    """The 1-norm of the symmetric matrix whose upper triangle A holds (rows in blocks: no n x n copy)."""
    n = A.shape[0]
    cols, rows = np.zeros(n), np.zeros(n)
    for r0 in range(0, n, _BLOCK):
        r1 = min(r0 + _BLOCK, n)
        U = np.triu(np.abs(A[r0:r1]), k=r0)  # row i of the block: columns j >= r0 + i
        cols += U.sum(axis=0)
        rows[r0:r1] += U.sum(axis=1) - np.abs(np.diagonal(A[r0:r1, r0:r1]))
    return float((cols + rows).max())


def _inverse_norm1(solve, n):
    """A lower bound on ||A^-1||_1, given solve(B) = A^-1 B, as ntkd solve estimates it: the sign-vector
    iteration of Hager and Higham, and three steps of inverse iteration from a fixed pseudo-random
    start, which finds what the sign vectors miss (two equal samples: the direction e_i - e_j)."""
    est = 0.0
    x = np.full((n, 1), 1.0 / n)
    for _ in range(5):
        y = solve(x)
        est = max(est, float(np.abs(y).sum() / np.abs(x).sum()))
        z = solve(np.where(y >= 0, 1.0, -1.0))
        j = int(np.argmax(np.abs(z)))
        if not np.isfinite(est) or abs(z[j, 0]) <= float((z * x).sum()):  # no better unit vector: Hager's stop
            break
        x = np.zeros((n, 1))
        x[j] = 1.0
    x = np.random.default_rng(0x6E746B64).uniform(-1.0, 1.0, (n, 1))
    for _ in range(3):
        before = float(np.abs(x).sum())
        x = solve(x)
        after = float(np.abs(x).sum())
        if np.isnan(after):
            break
        est = max(est, after / before)
        if not np.isfinite(after) or after == 0:
            break
        x /= after
    return est


class _Factor:
    """The Cholesky factor of K + reg I (float64), reg = diag_reg * trace(K)/n unless absolute.
    Like LAPACK's dpotrf with 'U' (neural-tangents' cho_factor), it reads K's upper triangle. A
    kernel too ill-conditioned to solve (MIN_RCOND) raises SolveError: numpy's Cholesky passes an
    exactly singular kernel (two equal train samples, diag_reg 0) on a pivot of rounding, and the
    predictions were 10 % off the t -> inf limit, returned without a word (a hunt)."""

    def __init__(self, K, diag_reg, absolute, name):
        A, self.reg = _regularised(K, diag_reg, absolute)
        try:
            self.L = np.linalg.cholesky(A.T)  # A's upper triangle as the lower one of A^T
        except np.linalg.LinAlgError:
            cure = "increase diag_reg"
            if self.reg == 0 and diag_reg > 0 and not absolute:  # diag_reg scales the mean diagonal, here 0
                cure = ("its trace is 0, so a relative diag_reg adds nothing: give diag_reg_absolute_scale=True "
                        "(or check the kernel: ntkd's NTK of a network without Dense or Conv layers is 0)")
            raise SolveError(f"the {name} train kernel with diag_reg {diag_reg:g} ({self.reg:.4g} added to the "
                             f"diagonal) is not positive definite: {cure}") from None
        if not np.all(np.isfinite(self.L)):
            raise SolveError(f"the {name} train kernel with diag_reg {diag_reg:g} gave a factor that is not finite")
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            norm = _upper_norm1(A)
            inv = _block_inverses(self.L)
            inverse = _inverse_norm1(lambda B: _upper_solve(self.L, _lower_solve(self.L, B, inv), inv), A.shape[0])
            self.rcond = 1.0 / (norm * inverse) if norm > 0 else 0.0
        if not self.rcond >= MIN_RCOND:
            raise SolveError(f"the {name} train kernel with diag_reg {diag_reg:g} is too ill-conditioned to solve "
                             f"(reciprocal condition number {self.rcond:.1e} < {MIN_RCOND:.0e}): increase diag_reg")

    def solve(self, B):
        """(K + reg I)^-1 B."""
        return _upper_solve(self.L, _lower_solve(self.L, B))

    def half(self, B):
        """L^-1 B, so that B^T (K + reg I)^-1 B = W^T W."""
        return _lower_solve(self.L, B)


class _Numpy:
    """neural-tangents' gp_inference in numpy: kernels from arrays, Kernel objects or a store."""

    def __init__(self, k_train_train, y, diag_reg, absolute, n, label=None):
        self.k = k_train_train
        self.y = y
        self.diag_reg, self.absolute = diag_reg, absolute
        self.n = n
        self.label = label  # the train kernel's name in messages (default its get: NNGP, NTK)
        self.factors = {}
        self.alphas = {}
        self.blocks = {}
        self.eigens = {}

    def train(self, g):
        if g not in self.blocks:
            k = _attr(self.k, g, "k_train_train")
            if _is_store(k):
                block = _store_block(k, g, "train", self.n)
            else:
                block = _matrix(k, f"k_train_train ({g})", (self.n, self.n))
            self.blocks[g] = _finite(block, f"the {self.label or g.upper()} train kernel", SolveError)
        return self.blocks[g]

    def factor(self, g):
        if g not in self.factors:
            self.factors[g] = _Factor(self.train(g), self.diag_reg, self.absolute, self.label or g.upper())
        return self.factors[g]

    def eigen(self, g):
        """(w, V): the eigenvalues and eigenvectors of the regularised train kernel g."""
        if g not in self.eigens:
            A, _ = _regularised(self.train(g), self.diag_reg, self.absolute, symmetrise=True)
            try:
                self.eigens[g] = np.linalg.eigh(A)
            except np.linalg.LinAlgError:
                raise SolveError(f"the eigendecomposition of the {self.label or g.upper()} train kernel did not "
                                 "converge") from None
            w = self.eigens[g][0]
            big = float(np.abs(w).max()) if len(w) else 0.
            # Negative eigenvalues are taken as rounding (their modes do not move, _exponent): those of a
            # matrix that is no kernel left its outputs at their start at every time, without a word (a hunt).
            if len(w) and float(w[0]) < -NOT_PSD * big:
                raise SolveError(f"the {self.label or g.upper()} train kernel with diag_reg {self.diag_reg:g} is not "
                                 f"positive semi-definite: its smallest eigenvalue is {float(w[0]):.6g}, "
                                 f"{-float(w[0]) / big:.2g} of the largest in magnitude, far past rounding (below "
                                 f"{NOT_PSD:g}): no kernel has one; check the kernel and diag_reg")
        return self.eigens[g]

    def flow(self, g, times, size, r, ktd=None):
        """How far gradient flow on the MSE loss, from outputs whose residual on the train set is
        r = y - f_0 (n, k), has moved the outputs at each time (T of them, learning rate in):
        on the train set V (1 - e^(-w t/size)) V^T r, (T, n, k); on a test set whose
        test x train kernel g is ktd (m, n), ktd V (1 - e^(-w t/size))/w V^T r, (T, m, k).
        size: y_train.size, neural-tangents' normalisation of the loss. An infinite time on a test
        set divides by the eigenvalues: the train kernel is checked as t = None checks it (a
        SolveError where it is too ill-conditioned to solve), or an exactly singular kernel's
        rounding eigenvalue gave predictions 34 % off the t -> inf limit (a hunt)."""
        if ktd is not None and np.isinf(times).any():
            self.factor(g)
        w, v = self.eigen(g)
        finite = times[np.isfinite(times)]  # an infinite time: checked as t = None is (self.factor above)
        if ktd is not None and len(finite):
            self._settled_noise(g, w, float(finite.max()), size)
        c = v.T @ r
        p, fs = (v, _grown(w, times, size)) if ktd is None else (ktd @ v, _integral(w, times, size))
        out = np.empty((len(times), p.shape[0], r.shape[1]))
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow: refused by _all_finite
            for i, f in enumerate(fs):
                out[i] = p @ (f[:, None] * c)
        if ktd is None:  # the train set at t = inf: its targets, as t = None gives them (neural-tangents' rule),
            out[np.isinf(times)] = r  # not the mode-by-mode limit, which followed a rounding eigenvalue's sign
        return out

    def _settled_noise(self, g, w, t, size):
        """Refuse a finite time by which a mode of the train kernel whose eigenvalue is rounding (below
        MIN_RCOND of the largest) has moved by more than NOISE_MOVED of its way (w t/size): its test
        outputs carry that eigenvalue's rounding, in proportion (an exactly singular kernel gave
        predictions 50 % off at t = 1e20, 118 % at w t/size = 0.3: hunts), as at t = inf."""
        top = float(w.max()) if len(w) else 0.
        noise = w[(w > 0) & (w < MIN_RCOND * top)]
        if len(noise) and float(noise.max()) * 2 * t / size > NOISE_MOVED:  # 2t: the NNGP covariance's integral
            raise SolveError(f"the {self.label or g.upper()} train kernel with diag_reg {self.diag_reg:g} is too "
                             f"ill-conditioned for t = {t:g}: {len(noise)} of its eigenvalues are below "
                             f"{MIN_RCOND:.0e} of the largest (rounding), and by this time their modes have moved "
                             f"(2 w t/size > {NOISE_MOVED:.0e}), as at t = infinity: increase diag_reg, or give a "
                             "smaller t")

    def evolve(self, names, times, size, k_test_train, k_test_test):
        """gradient_descent_mse_ensemble at finite times: means (T, m, k), and with k_test_test
        covariances (T, m, m), of the infinite ensemble trained for each time from its prior
        (neural-tangents 0.6.5's formulas, Lee et al. 2019): get 'ntk' trains every layer,
        'nngp' the readout alone. k_test_train None: the train set (k_test_test a flag then)."""
        out = {}
        for g in names:
            w, v = self.eigen(g)
            ktd = None if k_test_train is None else _test_train(k_test_train, g, self.n, self.k)
            mean = self.flow(g, times, size, self.y, ktd)
            if k_test_test is None:
                out[g] = mean
                continue
            m = self.n if ktd is None else ktd.shape[0]
            cov = np.empty((len(times), m, m))
            if ktd is None:
                decay = np.exp(-_exponent(w, times, size))
                knn = self.train("nngp") if g == "ntk" else None
                for i, d in enumerate(decay):
                    if g == "nngp":  # V w e^(-2wt/size) V^T
                        cov[i] = (v * (np.maximum(w, 0.) * d ** 2)) @ v.T
                    else:  # E K E, E = V e^(-wt/size) V^T, K the NNGP train kernel
                        e = (v * d) @ v.T
                        cov[i] = e @ knn @ e
            else:
                p = ktd @ v
                ktt = _test_test(k_test_test, "nngp", m, self.k)
                if g == "nngp":  # K_tt - K_tx V (1 - e^(-2wt/size))/w V^T K_xt
                    for i, f in enumerate(_integral(w, 2 * times, size)):
                        cov[i] = ktt - (p * f) @ p.T
                else:  # Z = V (1 - e^(-wt/size))/w V^T Theta_xt
                    knn = self.train("nngp")
                    kxt = _test_train(k_test_train, "nngp", self.n, self.k).T
                    for i, f in enumerate(_integral(w, times, size)):
                        cov[i] = _ntk_covariance(ktt, knn, kxt, v @ (f[:, None] * p.T))
            out[g] = Gaussian(mean, cov)
        return out


    def alpha(self, g):
        if g not in self.alphas:
            self.alphas[g] = self.factor(g).solve(self.y)
        return self.alphas[g]

    def predict(self, names, k_test_train, k_test_test):
        out = {}
        for g in names:
            kk = "ntk" if g == "ntkgp" else g
            if k_test_train is None:
                mean = self.y.copy()
                out[g] = Gaussian(mean, np.zeros((self.n, self.n))) if k_test_test is not None else mean
                continue
            ktd = _test_train(k_test_train, kk, self.n, self.k)
            mean = ktd @ self.alpha(kk)
            if k_test_test is None:
                out[g] = mean
                continue
            m = ktd.shape[0]
            if g == "ntk":
                if not _has_both(self.k) or not _has_both(k_test_train):
                    raise ValueError("the NTK posterior covariance (get='ntk' with k_test_test) needs the NNGP and "
                                     "the NTK train x train and test x train kernels: pass Kernel objects (or "
                                     "namedtuples) with .nngp and .ntk, or a store of kernel='ntk'")
                z = self.factor("ntk").solve(ktd.T)  # Z = A^-1 Theta_xt (docs/SOLVE.md)
                cov = _ntk_covariance(_test_test(k_test_test, "nngp", m, self.k), self.train("nngp"),
                                      _test_train(k_test_train, "nngp", self.n, self.k).T, z)
            else:  # nngp, ntkgp: the GP posterior K_tt - K_tx A^-1 K_xt
                w = self.factor(kk).half(ktd.T)
                cov = _test_test(k_test_test, kk, m, self.k) - w.T @ w
            out[g] = Gaussian(mean, cov)
        return out


def _ntk_covariance(ktt, knn, kxt, z):
    """The NTK ensemble's test covariance K_tt + Z^T K_xx Z - Z^T K_xt - K_tx Z, Z the map from
    the train targets to the test means (A^-1 Theta_xt at t = infinity, at a time t
    V (1 - e^(-wt/size))/w V^T Theta_xt)."""
    zk = z.T @ kxt
    return ktt + z.T @ (knn @ z) - zk - zk.T


def _exponent(w, times, size):
    """w t/size for each time (rows) and eigenvalue; negative eigenvalues (rounding) as 0, and
    0 for an eigenvalue 0 at t = inf (a mode that does not move, at any time)."""
    wp = np.maximum(w, 0.)[None, :]
    with np.errstate(invalid="ignore", over="ignore"):  # w t past float64: infinity, the mode settled
        return np.where(wp > 0, wp * times[:, None], 0.) / size


def _grown(w, times, size):
    """1 - e^(-w t/size)."""
    return -np.expm1(-_exponent(w, times, size))


def _integral(w, times, size):
    """(1 - e^(-w t/size))/|w|, the integral of e^(-w s/size)/size over s in [0, t]: t/size at w = 0
    (where neural-tangents divides 0 by 0), 0 for a negative eigenvalue (as neural-tangents)."""
    g = _grown(w, times, size)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = g / np.abs(w)[None, :]
    zero = w == 0
    if zero.any():
        out[:, zero] = (times / size)[:, None]
    return out


def _has_both(k):
    if _is_store(k):
        return "nngp" in k.kernels and "ntk" in k.kernels
    return hasattr(k, "nngp") and hasattr(k, "ntk") and k.nngp is not None and k.ntk is not None


def _store_block(S, g, which, n):
    """The train x train, test x train or test x test block of kernel g of store S (float64)."""
    if g not in S.kernels:
        raise ValueError(f"the store {S.path} holds no {g!r} kernel (it has {', '.join(S.kernels)}): compute it "
                         f"with kernel='ntk'")
    N = S.n
    if which == "train":  # (checked finite by its reader, _Numpy.train)
        return S[g][:n, :n].astype(np.float64)
    if not S.n_train:
        raise ValueError(f"the store {S.path} has no test set: compute it with ntkd.batch(kernel_fn, x_train, "
                         "x_test, ...) for predictions on x_test")
    if which == "test_train":
        return _finite(S[g][n:, :n].astype(np.float64), f"the test x train block of {g!r} in {S.path}")
    if not S.test_test:
        raise ValueError(f"the store {S.path} was computed without its test x test block: for covariances, "
                         "compute it with ntkd.batch(..., test_test=True)")
    return _finite(S[g][n:N, n:N].astype(np.float64), f"the test x test block of {g!r} in {S.path}")


def _own_store(a, k_train_train, what):
    """A store given as k_test_train or k_test_test must be k_train_train's own: its blocks go with its
    own train x train block (another store's test x test block was taken, its covariance returned)."""
    if a is not k_train_train and not (_is_store(k_train_train) and os.path.samefile(a.path, k_train_train.path)):
        raise ValueError(f"{what} is a store, and not the store of k_train_train: a store's test blocks go with its "
                         "own train x train block")


def _test_train(k, g, n, k_train_train):
    a = _attr(k, g, "k_test_train")
    if _is_store(a):
        _own_store(a, k_train_train, "k_test_train")
        return _store_block(a, g, "test_train", n)
    a = _matrix(a, f"k_test_train ({g})")
    if a.shape[1] != n:
        raise ValueError(f"k_test_train ({g}) has shape {a.shape}: (m, {n}) for {n} train samples")
    return _finite(a, f"k_test_train ({g})")


def _test_test(k, g, m, k_train_train):
    a = _attr(k, g, "k_test_test")
    if _is_store(a):
        _own_store(a, k_train_train, "k_test_test")
        return _store_block(a, g, "test_test", a.n_train)
    return _finite(_matrix(a, f"k_test_test ({g})", (m, m)), f"k_test_test ({g})")


# ---- ntkd solve -----------------------------------------------------------------------------------


class _Program:
    """gp_inference over a store by `ntkd solve` (docs/SOLVE.md), with a job file made from the
    store's job: its data, model and output, this y as labels, a [solve] section."""

    def __init__(self, S, y, diag_reg, absolute, method, ranks, job):
        if diag_reg < 0:  # said here, not as a [solve] ridge of a temporary job file (a hunt)
            raise ValueError(f"diag_reg = {diag_reg!r} is negative: method={method!r} solves with `ntkd solve`, whose "
                             "ridge is at least 0; method='numpy' (up to predict.NUMPY_MAX_TRAIN train samples) takes "
                             "it as neural-tangents does")
        self.S, self.y = S, y
        self.path = os.path.abspath(S.path)
        self.diag_reg, self.absolute = diag_reg, absolute
        self.method, self.ranks = method, ranks
        self.job = job
        self.means, self.covs = {}, {}
        self.failed = {}  # kernel -> why `ntkd solve` could not solve it at its ridge

    def predict(self, names, k_test_train, k_test_test):
        S = self.S
        n = S.n_train or S.n
        out = {}
        for g in names:
            if k_test_train is None:
                mean = self.y.copy()
                out[g] = Gaussian(mean, np.zeros((n, n))) if k_test_test is not None else mean
                continue
            if not (_is_store(k_test_train) and _same(k_test_train, S)):
                raise ValueError(f"method={self.method!r} solves through `ntkd solve`, which predicts on the "
                                 "store's own test set: pass k_test_train=the store, or method='numpy' for other "
                                 "test kernels")
            kk = "ntk" if g == "ntkgp" else g
            cov = k_test_test is not None
            if cov:
                if g == "ntkgp":
                    raise NotImplementedError("ntkd solve computes the NNGP and NTK covariances; for 'ntkgp' use "
                                              "method='numpy'")
                if not (_is_store(k_test_test) and _same(k_test_test, S)):
                    raise ValueError("with a store solved by `ntkd solve`, k_test_test must be that store (its test "
                                     "x test block), or None")
                if self.method in ("scalapack", "cg"):
                    raise ValueError(f"covariances: ntkd solve computes them with method 'lapack' only, not "
                                     f"{self.method!r} (docs/SOLVE.md)")
                if not S.test_test:
                    raise ValueError(f"the store {S.path} was computed without its test x test block: for "
                                     "covariances, compute it with ntkd.batch(..., test_test=True)")
            if kk not in S.kernels:
                raise ValueError(f"the store {S.path} holds no {kk!r} kernel (it has {', '.join(S.kernels)})")
            if kk not in self.means or (cov and kk not in self.covs):
                self._solve(cov)
            if kk in self.failed:
                raise SolveError(self.failed[kk])
            out[g] = Gaussian(self.means[kk], self.covs[kk]) if cov else self.means[kk]
        return out

    def _check_path(self):
        """Raise unless the file at the store's path is the very file the store S has open
        (`ntkd solve` is handed the path, not S): a store replaced at that path (ntkd.batch with
        overwrite=True, another job) would be solved in S's place, silently."""
        S = self.S
        if getattr(S, "_fd", None) is None:
            raise ValueError(f"the store {S.path} is closed: open it again (ntkd.store.open) and call gp_inference "
                             "with it")
        held = os.fstat(S._fd)
        try:
            now = os.stat(self.path)
            why = "" if (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino) else "another file replaced it"
        except OSError as e:
            why = f"it is gone ({e.strerror})"
        if why:
            from .errors import StoreError
            raise StoreError(f"{self.path}: the store at this path is no longer the one opened for this prediction "
                             f"({why}, by another call on the same store path, e.g. ntkd.batch with "
                             "overwrite=True): `ntkd solve` would solve that file, not this store; open the store "
                             "again (ntkd.store.open) and predict with it, or use method='numpy'")

    def _ridges(self):
        """The relative ridge (ntkd's [solve] ridge: neural-tangents' diag_reg) of each kernel."""
        if not self.absolute:
            return {g: self.diag_reg for g in self.S.kernels}
        out = {}
        for g in self.S.kernels:
            tr = _train_trace(self.S, g)
            if not tr > 0:
                raise SolveError(f"the {g.upper()} train kernel of {self.S.path} has trace {tr}: an absolute "
                                 "diag_reg cannot be expressed as ntkd's relative ridge")
            out[g] = self.diag_reg / (tr / (self.S.n_train or self.S.n))
        return out

    def _solve(self, cov):
        S = self.S
        if not S.n_train:
            raise ValueError(f"the store {S.path} has no test set: compute it with ntkd.batch(kernel_fn, x_train, "
                             "x_test, ...) for predictions on x_test")
        job = self.job
        if job is None:
            from ._batch import Files
            job = Files(self.path).job
            if not os.path.exists(job):
                raise ValueError(f"{S.path}: no job file {job} beside it (ntkd.batch writes one): pass job= the job "
                                 "file that computed the store")
        job = os.path.abspath(os.fsdecode(os.fspath(job)))
        rows, labels = np.unique(self.y, axis=0, return_inverse=True)
        labels = labels.reshape(-1)
        if len(rows) > 65536:
            raise ValueError(f"y_train has {len(rows)} distinct rows: ntkd solve takes at most 65536 classes "
                             "(one per distinct row); use method='numpy'")
        if len(rows) < 2:  # ntkd solves for at least 2 classes: one more, never a label
            rows = np.vstack([rows, np.zeros_like(rows)])
        folder = os.path.dirname(job)
        tmp = tempfile.mkdtemp(prefix=".ntkd-predict-", dir=folder)
        rel = os.path.basename(tmp)
        try:
            np.save(os.path.join(tmp, "y1.npy"), labels.astype(np.int64))
            np.save(os.path.join(tmp, "y2.npy"), np.zeros(S.n - S.n_train, dtype=np.int64))
            ridges = self._ridges()
            distinct = sorted(set(ridges.values()))
            if len({"%g" % r for r in distinct}) < len(distinct):  # one prediction file name for two ridges
                runs = [[g] for g in ridges]
            else:
                runs = [list(ridges)]
            for kernels in runs:
                rs = sorted({ridges[g] for g in kernels})
                text = _solve_job(job, rel, len(rows), rs, self.method, cov)
                name = os.path.join(rel, "solve.conf")
                with open(os.path.join(folder, name), "w") as f:
                    f.write(text)
                # ScaLAPACK runs under mpirun, on one process too (docs/SOLVE.md).
                nproc = self.ranks if self.ranks is not None and self.ranks > 1 else \
                    1 if self.method == "scalapack" else None
                # The job file sits in the job's folder's subfolder: its paths are made relative to it.
                # The program opens the store by its path: it must find there the store S has open,
                # before and after the run (another call may have replaced the file at the path).
                self._check_path()
                result = _program.run(["solve", self.path, os.path.basename(name)], cwd=tmp, nproc=nproc,
                                      check=False)
                self._check_path()
                missing = [g for g in kernels if not os.path.exists(_prediction(tmp, g, ridges[g]))]
                if result.code == 2 and result.has(r"^(nngp|ntk) +\S+ .*failed: not solved"):
                    # One kernel's ridge failed: the other kernel's predictions were written and stand
                    # (predict raises for the failed kernel only, when it is asked for).
                    for g in missing:
                        why = [t for t in result.lines if t.startswith(f"ntkd: {g} train kernel with ridge")]
                        self.failed[g] = "\n".join(why) or _program.error_text(result)
                    kernels = [g for g in kernels if g not in missing]
                    missing = []
                elif result.code:
                    from .errors import raise_for_exit
                    raise_for_exit(result.code, _program.error_text(result))
                if missing:
                    raise SolveError(f"ntkd solve wrote no predictions for {', '.join(missing)}")
                for g in kernels:
                    p = np.load(_prediction(tmp, g, ridges[g]))
                    self.means[g] = p @ rows
                    if cov:
                        self.covs[g] = np.load(_prediction(tmp, g, ridges[g], "-cov"))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def _same(a, b):
    return a is b or os.path.samefile(a.path, b.path)


def _prediction(folder, g, ridge, extra=""):
    # + 0.0: -0.0 is the ridge 0, whose file the program names ridge0, not ridge-0
    return os.path.join(folder, "p-%s-ridge%g%s.npy" % (g, ridge + 0.0, extra))


def _train_trace(S, g):
    n, T = S.n_train or S.n, S.tile
    return float(sum(np.trace(S[g].block(i, min(i + T, n), i, min(i + T, n)).astype(np.float64))
                     for i in range(0, n, T)))


def _solve_job(job, rel, classes, ridges, method, cov):
    """The store's job without labels, classes or [solve], and ours appended. Its data paths
    (path, a graph's pattern) are relative to its folder: the copy lives in a subfolder `rel`,
    so they get '../'."""
    keep = []
    section = None
    with open(job) as f:
        lines = f.read().splitlines()
    for line in lines:
        s = line.strip()
        header = _comment_free(s)  # `[test]   # held out` is a header too, as ntkd reads it
        if header.startswith("[") and header.endswith("]"):
            section = header[1:-1].strip()
            if section == "solve":
                continue
        elif section == "solve":
            continue
        elif section in ("data", "test", "output", "validation") and "=" in s and not s.startswith(("#", ";")):
            key, value = (x.strip() for x in s.split("=", 1))
            if section in ("data", "test") and key in ("labels", "classes"):
                continue
            if key == "pattern" and section in ("data", "test"):  # a graph's patterns: one file
                line = f"pattern = {_up(_comment_free(value))}"
            elif key == "path":
                value = _comment_free(value)
                if section == "output":
                    line = f"path = {_up(value)}"
                else:
                    line = "path = " + " ".join(_up(p) for p in value.split())
        keep.append(line)
    keep += ["", "# Appended by ntkd.predict for `ntkd solve`.", "[data]", "labels = y1.npy", f"classes = {classes}",
             "[test]", "labels = y2.npy", "[solve]", "ridge = " + ", ".join(repr(float(r)) for r in ridges),
             f"method = {method}", "loo = no", f"variance = {'full' if cov else 'no'}", "predictions = p"]
    return "\n".join(keep) + "\n"


def _comment_free(value):
    for mark in (" #", "\t#", " ;", "\t;"):
        if mark in value:
            value = value[:value.index(mark)]
    return value.strip()


def _up(path):
    return path if os.path.isabs(path) else os.path.join("..", path)


# ---- the public functions -------------------------------------------------------------------------


def gp_inference(k_train_train, y_train, diag_reg=0., diag_reg_absolute_scale=False, trace_axes=(-1,), *,
                 method=None, ranks=None, job=None):
    """neural-tangents' ``predict.gp_inference``: the posterior of the NNGP, of
    an infinite ensemble trained by gradient descent (NTK), or of a GP with
    the NTK ('ntkgp'), as ``predict_fn(get=None, k_test_train=None,
    k_test_test=None)``.

    k_train_train: an (n, n) array, a Kernel (what kernel_fn returns) or
    namedtuple with .nngp and .ntk, or a store (ntkd.store.Store, e.g. from
    ntkd.batch): its train x train block. y_train: (n, k) targets (or (n,)
    with trace_axes=()); every axis but the first must be in trace_axes.
    predict_fn returns the test-set means (m, k) for get 'nngp', 'ntk' or
    'ntkgp' (a string: that array; a tuple or None (nngp and ntk): a
    namedtuple), or Gaussian(mean, covariance) namedtuples when k_test_test
    is given. k_test_train: (m, n) array or Kernel, or the same store (its
    test x train block); None gives the train set's targets. k_test_test:
    (m, m), or the store (its test x test block, ntkd.batch(...,
    test_test=True)). The NTK covariance needs both kernels.

    ntkd's keywords: method None, 'numpy', 'auto', 'lapack', 'scalapack' or
    'cg', ranks (processes of `ntkd solve`), job (the job file that computed
    the store, when ntkd.batch did not): see the module's docstring.
    """
    diag_reg = _number(diag_reg, "diag_reg")
    diag_reg_absolute_scale = _flag(diag_reg_absolute_scale, "diag_reg_absolute_scale")
    if method not in _METHODS:
        raise ValueError(f"method must be one of {', '.join(map(repr, _METHODS))}, not {method!r}")
    ranks = _program.check_ranks(ranks, "ntkd.predict")
    y, _ = _targets(y_train, trace_axes)
    out_shape = np.asarray(y_train).shape[1:]
    if _is_store(k_train_train):
        S = k_train_train
        n = S.n_train or S.n
        if method is None:
            method = "numpy" if n <= NUMPY_MAX_TRAIN and ranks in (None, 1) else "auto"
    else:
        if method not in (None, "numpy"):
            raise ValueError(f"method={method!r} solves a store with `ntkd solve`; k_train_train is not a store "
                             "(ntkd.store.Store): use method='numpy' or None")
        if ranks not in (None, 1):
            raise ValueError("ranks: only a store is solved on several processes (`ntkd solve` under mpirun)")
        if job is not None:
            raise ValueError("job: only a store is solved by `ntkd solve` with a job file")
        method = "numpy"
        first = None
        if hasattr(k_train_train, "nngp") or hasattr(k_train_train, "ntk"):
            first = next((getattr(k_train_train, g, None) for g in ("nngp", "ntk")
                          if getattr(k_train_train, g, None) is not None), None)
            if first is None:
                raise ValueError("k_train_train holds neither an 'nngp' nor an 'ntk' kernel")
        else:
            first = k_train_train
        first = _real_array(first, "k_train_train")
        if first.ndim != 2 or first.shape[0] != first.shape[1]:
            raise ValueError(f"k_train_train has shape {first.shape}: ntkd's kernels are (n, n) matrices")
        n = first.shape[0]
    if y.shape[0] != n:
        raise ValueError(f"y_train has {y.shape[0]} samples and k_train_train {n}")
    if method == "numpy":
        solver = _Numpy(k_train_train, y, diag_reg, diag_reg_absolute_scale, n)
    else:
        if job is not None and not isinstance(job, (str, os.PathLike)):
            raise TypeError(f"job must be a path, not {type(job).__name__}")
        solver = _Program(k_train_train, y, diag_reg, diag_reg_absolute_scale, method, ranks, job)

    def predict_fn(get=None, k_test_train=None, k_test_test=None):
        _not_traced(k_test_train=k_test_train, k_test_test=k_test_test)
        single, names = _canonical_get(get, ("nngp", "ntk", "ntkgp"))
        return _finish(solver.predict(names, k_test_train, k_test_test), names, single, out_shape)

    predict_fn.method = method
    return predict_fn


def _finish(out, names, single, out_shape, lead=()):
    """Means shaped as the targets (samples first; after lead, the times' axes), in
    neural-tangents' return type."""
    for g, v in out.items():
        mean = v.mean if isinstance(v, Gaussian) else v
        mean = mean.reshape(lead + (mean.shape[-2],) + out_shape)
        out[g] = Gaussian(mean, v.covariance.reshape(lead + v.covariance.shape[-2:])) \
            if isinstance(v, Gaussian) else mean
    return _output(out, names, single)


def _kernel_names(get, compute_cov):
    """The kernels a prediction needs: the NTK covariance needs the NNGP too."""
    need = ()
    if "nngp" in get or ("ntk" in get and compute_cov):
        need += ("nngp",)
    if "ntk" in get:
        need += ("ntk",)
    return need


class _Kernels:
    """Kernels by name (a dict, read when asked), as a Kernel object gives them."""

    def __init__(self, kernels):
        self._kernels = kernels

    def __getattr__(self, g):
        if g.startswith("_") or g not in self._kernels:
            raise AttributeError(g)
        return self._kernels[g]


_STORE_KEYWORDS = ("store", "ranks", "method", "overwrite", "test_test", "job")


def _wide_input(x):
    """Whether the input x (any array, a JAX one too: by its dtype) is float64."""
    return _float64_dtype(x.dtype if hasattr(x, "dtype") else np.asarray(x).dtype)


def _one_precision(x_train, x_test):
    """(x_train, x_test, wide): both as float64 where either is, so that a
    prediction's kernels share one precision, as JAX computes them (float32
    x_test against float64 x_train once gave a float32 test x test kernel
    beside float64 others: its covariance 1.5e-3 off). Any array, a JAX one
    too: by its dtype."""
    for x, name in ((x_train, "x_train"), (x_test, "x_test")):
        _unmasked(x, name)
    w = [_wide_input(x) for x in (x_train, x_test)]
    if w[0] != w[1]:
        x_train, x_test = (x if wx else np.asarray(x, dtype=np.float64) for x, wx in zip((x_train, x_test), w))
    return x_train, x_test, w[0] or w[1]


def gradient_descent_mse_ensemble(kernel_fn, x_train, y_train, learning_rate=1., diag_reg=0.0,
                                  diag_reg_absolute_scale=False, trace_axes=(-1,), **kernel_fn_train_train_kwargs):
    """neural-tangents' ``predict.gradient_descent_mse_ensemble``: the mean (and
    covariance) of an infinite ensemble of infinitely wide networks trained by
    gradient descent on MSE (get='ntk'; get='nngp': the readout layer alone,
    at t = infinity the NNGP posterior), as ``predict_fn(t=None, x_test=None,
    get=None, compute_cov=False, **kernel_fn_test_test_kwargs)``: at t=None
    or inf, to convergence; at a finite t or an array of times, during
    training (the module's docstring, "Time"). x_test None gives the train
    set's outputs (at t = infinity its targets, covariance 0).

    The kernels come from kernel_fn (ntkd.stax's, or any with
    neural-tangents' signature) in this process, and are solved with numpy.
    With store='k.ntk' (ntkd's keyword) they are computed by ntkd.batch into
    that store instead (x_train and x_test; resumed when it already holds
    this job; ranks, overwrite, test_test (default: compute_cov, or True
    where the store holds its test x test block), tile, progress passed on)
    and solved as gp_inference solves a store (method, ranks, see there);
    each call reads the store's blocks again (at a finite t, decomposes them
    again: give every time in one call, as an array). Other keywords go to
    kernel_fn.
    """
    if not callable(kernel_fn):
        raise TypeError(f"kernel_fn must be callable, not {kernel_fn!r}")
    ntkd_kw = {k: kernel_fn_train_train_kwargs.pop(k) for k in list(kernel_fn_train_train_kwargs)
               if k in _STORE_KEYWORDS}
    store = ntkd_kw.pop("store", None)
    if store is None and ntkd_kw:
        raise TypeError(f"{', '.join(ntkd_kw)}: ntkd's keywords for a store: give store= too")
    train_pattern = None  # a graph network's (pattern1, pattern2) of the train kernel, through a store
    if store is not None:
        for k in ("tile", "progress"):
            if k in kernel_fn_train_train_kwargs:
                ntkd_kw[k] = kernel_fn_train_train_kwargs.pop(k)
        train_pattern = kernel_fn_train_train_kwargs.pop("pattern", None)
        if kernel_fn_train_train_kwargs:
            raise TypeError(f"{', '.join(kernel_fn_train_train_kwargs)}: not a keyword of a prediction through a "
                            "store (store, ranks, method, overwrite, test_test, job, tile, progress, pattern)")
    learning_rate = _number(learning_rate, "learning_rate")
    diag_reg = _number(diag_reg, "diag_reg")
    # (it was taken as a truth value here, unchecked: 'no' meant absolute)
    diag_reg_absolute_scale = _flag(diag_reg_absolute_scale, "diag_reg_absolute_scale")
    y, _ = _targets(y_train, trace_axes)
    n = len(x_train)
    if y.shape[0] != n:
        raise ValueError(f"y_train has {y.shape[0]} samples and x_train {n}")
    out_shape = np.asarray(y_train).shape[1:]
    # kernel_fn(x_train, None, g) by g, computed when first needed, and a solver over
    # them, per precision (x_train as given, or as float64 beside a float64 x_test)
    trains, solvers = {False: {}, True: {}}, {}

    def compute_train(names, xtr, wide):
        train = trains[wide]
        todo = tuple(g for g in names if g not in train)
        if len(todo) == 1:
            train[todo[0]] = kernel_fn(xtr, None, todo[0], **kernel_fn_train_train_kwargs)
        elif todo:
            k = kernel_fn(xtr, None, todo, **kernel_fn_train_train_kwargs)
            train.update({g: getattr(k, g) for g in todo})
        if wide not in solvers:
            solvers[wide] = _Numpy(_Kernels(train), y, diag_reg, diag_reg_absolute_scale, n)
        return solvers[wide]

    def computed_store(x_test, compute_cov, test_kwargs):
        """ntkd.batch's store of x_train and x_test (resumed when it holds them), and the
        keywords of its solve at t = infinity (method, ranks, job)."""
        test_kwargs = dict(test_kwargs)
        test_pattern = test_kwargs.pop("pattern", None)
        if test_kwargs:
            raise TypeError(f"{', '.join(test_kwargs)}: a prediction through a store takes no kernel_fn keywords "
                            "but a graph's pattern")
        from ._batch import batch
        kw = dict(ntkd_kw)
        if (train_pattern is None) != (test_pattern is None):
            raise TypeError("a graph network's prediction through a store takes the train graphs' pattern "
                            "(gradient_descent_mse_ensemble(..., pattern=(p_train, p_train))) and the test graphs' "
                            "(predict_fn(..., pattern=(p_test, p_test))), both or neither")
        if train_pattern is not None:  # as neural-tangents splits a pair: each kernel's first
            first = lambda p: p[0] if isinstance(p, (tuple, list)) else p
            kw["pattern"] = (first(train_pattern), first(test_pattern))
        solve = {"method": kw.pop("method", None), "job": kw.pop("job", None), "ranks": kw.get("ranks")}
        if "test_test" not in kw:  # what the covariance needs, or what the store already holds
            held = None if kw.get("overwrite") else _store_test_test(store)
            if compute_cov and held is False:
                raise ValueError(f"{os.fspath(store)} holds no test x test block (computed without compute_cov, or "
                                 "for another job), which a covariance needs: pass test_test=True to "
                                 "gradient_descent_mse_ensemble, with overwrite=True to compute this store again or "
                                 "another store= path")
            kw["test_test"] = bool(compute_cov or held)
        return batch(kernel_fn, x_train, x_test, store=store, kernel="ntk", **kw), solve

    def computed_kernels(x_test, need, compute_cov, test_kwargs):
        """(a solver over the train kernels, the test x train kernels, the test x test NNGP or
        None) from kernel_fn, in one precision; x_test None: the train kernels alone."""
        if x_test is None:
            return compute_train(need, x_train, _wide_input(x_train)), None, None
        kw_td, kw_tt = _merge_kwargs(kernel_fn_train_train_kwargs, test_kwargs)
        xtr, xte, wide = _one_precision(x_train, x_test)
        solver = compute_train(need, xtr, wide)
        if len(need) == 1:
            ktd = _Kernels({need[0]: kernel_fn(xte, xtr, need[0], **kw_td)})
        else:
            ktd = kernel_fn(xte, xtr, need, **kw_td)
        ktt = kernel_fn(xte, None, "nngp", **kw_tt) if compute_cov else None
        return solver, ktd, ktt

    def predict_fn(t=None, x_test=None, get=None, compute_cov=False, **kernel_fn_test_test_kwargs):
        _not_traced(t=t, x_test=x_test, compute_cov=compute_cov)
        times = _times(t, learning_rate)
        compute_cov = _flag(compute_cov, "compute_cov")
        single, names = _canonical_get(get, ("nngp", "ntk"))
        if times is not None:
            return finite(times, x_test, names, single, compute_cov, kernel_fn_test_test_kwargs)
        if x_test is None:  # the train set: its targets, covariance 0 (no kernel needed)
            mean = np.asarray(y_train, dtype=np.float64)
            out = {g: Gaussian(mean.copy(), np.zeros((n, n))) if compute_cov else mean.copy() for g in names}
            return _output(out, names, single)
        if store is not None:
            S, solve = computed_store(x_test, compute_cov, kernel_fn_test_test_kwargs)
            try:
                fn = gp_inference(S, y_train, diag_reg, diag_reg_absolute_scale, trace_axes, **solve)
                return fn(get, k_test_train=S, k_test_test=S if compute_cov else None)
            finally:
                S.close()
        solver, ktd, ktt = computed_kernels(x_test, _kernel_names(names, compute_cov), compute_cov,
                                            kernel_fn_test_test_kwargs)
        return _finish(solver.predict(names, ktd, ktt), names, single, out_shape)

    def finite(times, x_test, names, single, compute_cov, test_kwargs):
        """The ensemble at finite times, in the train kernels' eigenbasis (numpy, float64)."""
        if store is not None:
            if x_test is None:
                raise NotImplementedError("a finite t through a store predicts on its test set: give x_test, or for "
                                          "the train set call the function made without store= (x_test=x_train "
                                          "gives the train set only where diag_reg is 0: the test set's formula "
                                          "leaves the ridge out of the test x train kernel)")
            if n > NUMPY_MAX_TRAIN:
                raise NotImplementedError(
                    f"a finite t needs the train kernel's eigendecomposition in this process: {n} train samples is "
                    f"more than NUMPY_MAX_TRAIN ({NUMPY_MAX_TRAIN}); at t = infinity `ntkd solve` takes them")
            S, _ = computed_store(x_test, compute_cov, test_kwargs)  # its solve's keywords are for t = infinity
            try:
                out = _Numpy(S, y, diag_reg, diag_reg_absolute_scale, n).evolve(
                    names, times.ravel(), y.size, S, S if compute_cov else None)
            finally:
                S.close()
        else:
            solver, ktd, ktt = computed_kernels(x_test, _kernel_names(names, compute_cov), compute_cov, test_kwargs)
            # the train set's covariance needs no test x test kernel: a flag there
            out = solver.evolve(names, times.ravel(), y.size, ktd, ktt if x_test is not None else
                                (True if compute_cov else None))
        return _finish(_all_finite(out, times.ravel()), names, single, out_shape, times.shape)

    return predict_fn


def _not_traced(**args):
    """Refuse JAX's abstract values (predict_fn under jax.jit, vmap or grad): the predictions
    are computed with numpy, outside JAX (the kernels' shapes do not tell the outputs' without
    the store or kernel_fn behind them)."""
    for name, v in args.items():
        if type(v).__name__.endswith("Tracer"):
            raise TypeError(f"{name} is a JAX tracer ({type(v).__name__}): ntkd.predict computes with numpy, outside "
                            "JAX, so jax.jit, vmap and grad cannot trace its predict_fn; call it without them (its "
                            "kernel_fn needs no jit; neural-tangents' nt.predict, which jits, takes ntkd's kernel_fn "
                            "and kernels)")


def _times(t, learning_rate):
    """t (None, a number or an array of any shape) times the learning rate as a float64 array, or
    None for t = infinity given as one number (None or inf: solved, not evolved)."""
    if t is None:
        return None
    _unmasked(t, "t")
    try:
        a = np.asarray(t)
        if a.dtype.kind not in "iuf":
            raise TypeError
        a = a.astype(np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"t must be None, a number or an array of numbers, not {t!r}") from None
    with np.errstate(invalid="ignore", over="ignore"):  # inf * 0: NaN, refused below; an overflow: infinity
        a = a * learning_rate
    if np.isnan(a).any():
        raise ValueError(f"t={t!r} times learning_rate={learning_rate!r} is not a number (NaN): times are "
                         "numbers, infinity (None or np.inf) included")
    if (a < 0).any():
        raise ValueError(f"t={t!r} times learning_rate={learning_rate!r} is negative: training runs forward from "
                         "t = 0 (its outputs grow without bound backwards)")
    return None if a.ndim == 0 and a == np.inf else a


def _all_finite(out, times):
    """out (a dict of means or Gaussians at each time, time first) if every value is finite."""
    for g, v in out.items():
        for a in (v if isinstance(v, Gaussian) else (v,)):
            bad = ~np.isfinite(a)
            if bad.any():
                i = int(np.argmax(bad.reshape(len(times), -1).any(axis=1)))
                raise SolveError(f"the {g} prediction at t = {times[i]:g} (learning rate in) is not finite: a value "
                                 "overflowed (a time too large for an eigenvalue of 0 of the regularised train "
                                 "kernel, which moves its mode at a constant rate); give a smaller time or a "
                                 "diag_reg > 0")
    return out


def _store_test_test(path):
    """Whether the store at path holds its test x test block; None where no store can be read."""
    from . import store as st
    try:
        with st.open(os.fspath(path)) as S:
            return bool(S.test_test)
    except (OSError, ValueError, st.StoreError):
        return None


def _arrays(x):
    """Whether x is arrays only (a pytree of them: a tuple, None as an empty one), as neural-tangents asks."""
    if isinstance(x, (tuple, list)):
        return all(_arrays(e) for e in x)
    return x is None or (hasattr(x, "shape") and hasattr(x, "dtype"))


def _merge_kwargs(train, test):
    """neural-tangents' rule for the keywords of the test x train and test x test kernels: the
    train x train ones, each given again for the test kernels replaced by the test's. Arrays
    given for both: a pair of them (a graph's pattern=(p1, p2)) makes test x train's
    (the test's first, the train's first); other values must agree."""
    td, tt = dict(train), dict(train)
    for k, v in test.items():
        if k in train and _arrays(v) and _arrays(train[k]):
            pair = all(isinstance(a, tuple) and len(a) == 2 for a in (v, train[k]))
            td[k] = (v[0], train[k][0]) if pair else v
        elif k in train and train[k] != v:
            raise ValueError(f"Same keyword argument {k} of `kernel_fn` is set to different values {train[k]} != {v} "
                             "when computing the train-train and test-train/test-test kernels")
        else:
            td[k] = v
        tt[k] = v
    return td, tt


def _outputs(f, shape, what):
    """Outputs given as an array of `shape` (or one that broadcasts to it: a number), as an
    (shape[0], k) float64 matrix (read-only where broadcast)."""
    f = _real_array(f, what)
    if not np.all(np.isfinite(f)):
        raise ValueError(f"{what} holds values that are not finite")
    try:
        return np.broadcast_to(np.asarray(f, dtype=np.float64), shape).reshape(shape[0], math.prod(shape[1:]))
    except ValueError:
        raise ValueError(f"{what} has shape {f.shape}, not {shape} (or a number)") from None


def _test_kernel(k_test_train, n):
    """k_test_train as an (m, n) float64 matrix of finite values."""
    ktd = _one_matrix(k_test_train, "k_test_train", "k.ntk of a Kernel, or a store's block S['ntk'][n:, :n]")
    if ktd.shape[1] != n:
        raise ValueError(f"k_test_train has shape {ktd.shape}: (m, {n}) for {n} train samples")
    return _finite(ktd, "k_test_train")


def _train_problem(k_train_train, y_train, trace_axes, hint):
    """gradient_descent_mse's and gradient_descent's train kernel as an (n, n) float64 matrix, and
    their targets as _targets reads them, (n, k) and one sample's output shape."""
    K = _one_matrix(k_train_train, "k_train_train", hint)
    n = K.shape[0]
    if K.shape != (n, n):
        raise ValueError(f"k_train_train has shape {K.shape}: ntkd's kernels are (n, n) matrices")
    if not n:
        raise ValueError("k_train_train has shape (0, 0): the predictions need n >= 1 train samples")
    y, out_shape = _targets(y_train, trace_axes)
    if y.shape[0] != n:
        raise ValueError(f"y_train has {y.shape[0]} samples and k_train_train {n}")
    return K, y, out_shape


def _check_starts(fx_train_0, fx_test_0, k_test_train):
    """neural-tangents' checks of a predict_fn's outputs at t = 0, in its words."""
    if fx_train_0 is None and fx_test_0 is None:
        raise ValueError("Both `fx_train_0` and `fx_test_0` are `None`, i.e. no predictions will be computed.")
    if fx_test_0 is not None and k_test_train is None:
        raise ValueError("To get predictions on the test set, please provide `k_test_train` kernel to the parent "
                         "function.")


def gradient_descent_mse(k_train_train, y_train, learning_rate=1., diag_reg=0., diag_reg_absolute_scale=False,
                         trace_axes=(-1,)):
    """neural-tangents' ``predict.gradient_descent_mse``: the outputs of a network trained by
    continuous gradient descent on the MSE loss, linearised (its NTK constant), as
    ``predict_fn(t=None, fx_train_0=0., fx_test_0=None, k_test_train=None)``.

    k_train_train: the (n, n) kernel (an array: the NTK, or the NNGP for a readout trained
    alone). y_train: (n, k) targets (or (n,) with trace_axes=()). predict_fn gives the train
    outputs at time[s] t from fx_train_0 (an array of y_train's shape, or a number), and with
    fx_test_0 ((m, k) or a number) and k_test_train ((m, n)) the test outputs: fx_train_t, or
    (fx_train_t, fx_test_t), or fx_test_t alone when fx_train_0 is None. t: None or inf (the
    end of training, by a Cholesky solve; the train outputs are then y_train), a number or an
    array of any shape (its axes lead the outputs'), in units of learning_rate. Time runs as
    neural-tangents' does: the loss is normalised by y_train.size. Computed in float64 with the
    train kernel's eigendecomposition (numpy), made once and kept for later calls.
    """
    learning_rate = _number(learning_rate, "learning_rate")
    diag_reg = _number(diag_reg, "diag_reg")
    diag_reg_absolute_scale = _flag(diag_reg_absolute_scale, "diag_reg_absolute_scale")
    K, y, out_shape = _train_problem(k_train_train, y_train, trace_axes, "k.ntk (or k.nngp) of a Kernel, or a "
                                     "store's block S['ntk'][:n, :n] (gp_inference takes Kernels and stores)")
    n = K.shape[0]
    y_shape = (n,) + out_shape
    solver = _Numpy(K, y, diag_reg, diag_reg_absolute_scale, n, label="given")

    def predict_fn(t=None, fx_train_0=0., fx_test_0=None, k_test_train=None):
        _not_traced(t=t, fx_train_0=fx_train_0, fx_test_0=fx_test_0, k_test_train=k_test_train)
        _check_starts(fx_train_0, fx_test_0, k_test_train)
        times = _times(t, learning_rate)
        f0 = None if fx_train_0 is None else _outputs(fx_train_0, y_shape, "fx_train_0")
        r = y if f0 is None else y - f0
        ktd = None
        if fx_test_0 is not None:
            ktd = _test_kernel(k_test_train, n)
            ft0 = _outputs(fx_test_0, (ktd.shape[0],) + out_shape, "fx_test_0")
        lead = () if times is None else times.shape
        train = test = None
        if times is None:
            train = y.copy()
            if ktd is not None:
                test = ft0 + ktd @ solver.factor("k").solve(r)
        else:
            flat = times.ravel()
            if f0 is not None:
                train = f0 + solver.flow("k", flat, y.size, r)
            if ktd is not None:
                test = ft0 + solver.flow("k", flat, y.size, r, ktd)
            _all_finite({k: v for k, v in (("train", train), ("test", test)) if v is not None}, flat)
        if train is not None:
            train = train.reshape(lead + y_shape)
        if test is not None:
            test = test.reshape(lead + (ktd.shape[0],) + out_shape)
        if fx_test_0 is None:
            return ready(train)
        return ready(test if fx_train_0 is None else (train, test))

    return predict_fn


def max_learning_rate(ntk_train_train, y_train_size=None, momentum=0., eps=1e-12):
    """neural-tangents' ``predict.max_learning_rate``: the largest learning rate for which
    gradient descent (with momentum) on the MSE loss of an infinitely wide network converges,
    2 (1 + momentum) y_train_size / (the NTK's largest eigenvalue + eps). ntk_train_train: an
    (n, n) array, or a Kernel (its .ntk). y_train_size None: n (one output per sample)."""
    k = ntk_train_train
    if hasattr(k, "ntk") and hasattr(k, "nngp"):  # a Kernel: the one it names
        if k.ntk is None:
            raise ValueError("ntk_train_train is a Kernel without its NTK (computed with get=('nngp',)): compute "
                             "it with get='ntk' or None")
        k = k.ntk
    K = _one_matrix(k, "ntk_train_train", "an (n, n) array or a Kernel (its .ntk); a store's block S['ntk'][:n, :n]")
    if K.shape[0] != K.shape[1] or not K.shape[0]:
        raise ValueError(f"ntk_train_train has shape {K.shape}: ntkd's kernels are (n, n) matrices, n >= 1")
    _finite(K, "the NTK train kernel", SolveError)
    factor = K.shape[0] if y_train_size is None else _number(y_train_size, "y_train_size")
    momentum, eps = _number(momentum, "momentum"), _number(eps, "eps")
    top = np.linalg.eigvalsh(K)[-1]  # its lower triangle, as neural-tangents' scipy call reads
    if not top + eps > 0:  # neural-tangents returns a negative rate there
        raise SolveError(f"ntk_train_train's largest eigenvalue is {top:.6g}: no NTK has one below 0, and no learning "
                         "rate makes gradient descent converge on it")
    return np.float64(2 * (1 + momentum) * factor / (top + eps))


# ---- neural-tangents' dynamics of an arbitrary loss: an ODE, integrated ------------------------

@dataclasses.dataclass
class ODEState:
    """neural-tangents' ``predict.ODEState``: the state of gradient_descent's ODE, the train and
    test outputs and, with momentum, their velocities (``qx_train``, ``qx_test``)."""
    fx_train: object = None
    fx_test: object = None
    qx_train: object = None
    qx_test: object = None


def _loss_gradient(loss, y_train, y_shape, grad_loss):
    """The gradient of loss(fx, y_train) in fx, as a function of fx as an (n, k) float64
    matrix: grad_loss's (a numpy function of fx and y_train), or JAX's of loss."""
    if grad_loss is not None:
        if not callable(grad_loss):
            raise TypeError(f"grad_loss must be a function of (fx, y_train), not {grad_loss!r}")
        # copies: a numpy gradient may work in place on its arguments (fx -= y), which must not
        # change the integrator's state or the targets
        y_given = np.array(y_train)
        fn, what = (lambda f: grad_loss(f.copy(), y_given.copy())), "grad_loss(fx, y_train)"
    else:
        if not callable(loss):
            raise TypeError(f"loss must be a function of (fx, y_train), not {loss!r}")
        try:
            import jax
        except ImportError:
            raise ImportError("predict.gradient_descent differentiates loss with JAX, which is not installed: "
                              "install jax, or give grad_loss=, the gradient of loss(fx, y_train) in fx as a "
                              "numpy function of (fx, y_train)") from None
        fn, what = jax.jit(jax.grad(lambda f: loss(f, y_train))), "jax.grad(loss)"

    def gradient(f):
        try:
            g = fn(f.reshape(y_shape))
        except Exception as e:
            traced = any(w in type(e).__name__ for w in ("Tracer", "Concretization"))
            if grad_loss is None and traced and hasattr(e, "add_note"):
                e.add_note("ntkd.predict.gradient_descent: loss must be written with jax.numpy for JAX to "
                           "differentiate it, or give grad_loss=, its gradient as a numpy function")
            raise
        if np.iscomplexobj(g):
            raise TypeError(f"{what} returned complex values: the gradient of a real loss is real")
        g = np.asarray(g, dtype=np.float64)
        if g.shape != y_shape:
            raise ValueError(f"{what} has shape {g.shape}, not fx's {y_shape}")
        return g.reshape(f.shape)
    return gradient


def gradient_descent(loss, k_train_train, y_train, learning_rate=1., momentum=None, trace_axes=(-1,), *,
                     grad_loss=None):
    """neural-tangents' ``predict.gradient_descent``: the outputs of a network trained by
    continuous gradient descent (with ``momentum``: its continuous form) on any loss,
    linearised (its NTK constant), as ``predict_fn(t, fx_train_or_state_0=0., fx_test_0=None,
    k_test_train=None)``.

    loss(fx, y_train): the loss of the train outputs fx (y_train's shape), differentiated by
    JAX (jax.grad; JAX's precision: float64 with jax_enable_x64); or, without JAX, give
    ``grad_loss(fx, y_train)``, its gradient in fx as a numpy function (ntkd's keyword; loss
    is then not called), given copies of fx and y_train.
    k_train_train: the (n, n) kernel (an array). y_train: (n, k) targets (or (n,) with
    trace_axes=()). The train outputs follow dfx/dt = -K grad_loss(fx) (the test outputs
    -k_test_train grad_loss(fx)); with momentum m, in neural-tangents' units (time in
    sqrt(learning_rate), the velocity decaying at (m - 1) / sqrt(learning_rate)).

    predict_fn: t a finite time or an array of them (any shape and order; its axes lead the
    outputs'), in units of the learning rate; t = None or infinity is refused (the outputs of
    most losses never settle; the MSE loss's end is gradient_descent_mse's). Returns
    fx_train_t, (fx_train_t, fx_test_t), or fx_test_t when fx_train_or_state_0 is None (the
    train outputs then start at 0); an ODEState given, the ODEState at t. Integrated in
    float64 by an adaptive Runge-Kutta method (Dormand-Prince) to JAX odeint's default
    tolerances (1.4e-8), as neural-tangents does.
    """
    learning_rate = _number(learning_rate, "learning_rate")
    if momentum is not None:
        momentum = _number(momentum, "momentum")
        if learning_rate <= 0:
            raise ValueError(f"learning_rate {learning_rate} with momentum: it must be > 0 (momentum's time runs "
                             "in its square root)")
    K, y, out_shape = _train_problem(k_train_train, y_train, trace_axes,
                                     "k.ntk of a Kernel, or a store's block S['ntk'][:n, :n]")
    _finite(K, "k_train_train")
    n = K.shape[0]
    y_shape = (n,) + out_shape
    gradient = _loss_gradient(loss, y_train, y_shape, grad_loss)
    rate, decay = learning_rate, None
    if momentum is not None:  # neural-tangents' units: time in sqrt(learning_rate)
        rate = learning_rate ** 0.5
        decay = (momentum - 1.0) / rate

    def start(value, shape, what, zero):
        if value is None:
            return np.zeros((shape[0], y.shape[1])) if zero else None
        return np.array(_outputs(value, shape, what))

    def predict_fn(t=None, fx_train_or_state_0=0., fx_test_0=None, k_test_train=None):
        _not_traced(t=t, fx_train_or_state_0=fx_train_or_state_0, fx_test_0=fx_test_0, k_test_train=k_test_train)
        # ntkd's ODEState, or neural-tangents' own (the same four fields)
        as_state = isinstance(fx_train_or_state_0, ODEState) or (
            type(fx_train_or_state_0).__name__ == "ODEState" and
            all(hasattr(fx_train_or_state_0, a) for a in ("fx_train", "fx_test", "qx_train", "qx_test")))
        if as_state:
            if fx_test_0 is not None:
                raise ValueError("`fx_test_0` is included in `ODEState` and must be set to `None`.")
            s = fx_train_or_state_0
            f0, ft0, q0, qt0 = s.fx_train, s.fx_test, s.qx_train, s.qx_test
        else:
            f0, ft0, q0, qt0 = fx_train_or_state_0, fx_test_0, None, None
        _check_starts(f0, ft0, k_test_train)
        if decay is None and (q0 is not None or qt0 is not None):
            raise ValueError("Got passed momentum state variables, while `momentum is None`.")
        times = _times(t, rate)
        if times is None or np.isinf(times).any():
            raise ValueError(f"t={t!r}: gradient_descent integrates to finite times (the outputs of most losses never "
                             "settle: neural-tangents returns NaN there); for the MSE loss at t = infinity use "
                             "gradient_descent_mse or gp_inference")
        ktd = None if ft0 is None else _test_kernel(k_test_train, n)
        m = 0 if ktd is None else ktd.shape[0]
        test_shape = (m,) + out_shape
        blocks = [start(f0, y_shape, "fx_train_0", True), start(ft0, test_shape, "fx_test_0", False)]
        if decay is not None:
            blocks += [start(q0, y_shape, "qx_train_0", True),
                       start(qt0, test_shape, "qx_test_0", True) if ktd is not None else None]
        sizes = [0 if b is None else b.size for b in blocks]
        ends = np.cumsum(sizes)
        rows = [n, m, n, m]

        def part(v, i):
            return v[ends[i] - sizes[i]:ends[i]].reshape(rows[i], y.shape[1])

        def derivative(v):
            d = np.empty_like(v)
            g = gradient(part(v, 0))
            force = [(0, K), (1, ktd)] if decay is None else [(2, K), (3, ktd)]
            for i, kernel in force:  # -K g (and -k_test_train g): on the outputs, or on their velocities
                if kernel is not None:
                    np.matmul(kernel, g, out=part(d, i))
                    np.negative(part(d, i), out=part(d, i))
            if decay is not None:  # positions move at the velocities, which the decay slows
                for i in (0, 1):
                    if blocks[i] is not None:
                        part(d, i)[...] = part(v, i + 2)
                        part(d, i + 2)[...] += decay * part(v, i + 2)
            return d

        v0 = np.concatenate([b.ravel() for b in blocks if b is not None])
        try:
            path = _ode.integrate(derivative, v0, times.ravel())
        except _ode.StepError as e:
            raise SolveError(f"gradient_descent cannot integrate past t = {e.t / rate:.6g} (in t's units; "
                             f"integration time {e.t:.6g}): {e} (the loss's gradient, or outputs beyond float64)") \
                from None
        lead = times.shape

        def at(i, shape):
            if blocks[i] is None:
                return None
            return path[:, ends[i] - sizes[i]:ends[i]].reshape(lead + shape)

        train, test = ready(at(0, y_shape)), ready(at(1, test_shape))
        if as_state:  # of the class given (neural-tangents' own too)
            state = type(fx_train_or_state_0)
            if decay is None:
                return state(train, test, None, None)
            return state(train, test, ready(at(2, y_shape)), ready(at(3, test_shape)))
        if ft0 is None:
            return train
        return test if f0 is None else (train, test)

    return predict_fn
