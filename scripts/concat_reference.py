#!/usr/bin/env python3
"""Independent high-precision NNGP/NTK of the spatial-FanInConcat network
of scripts/nt_cases.py's `cnn_concat_cols_strided_flat`, with its branch
activation A and its post-join activation B free:

  Conv(8, (3, 3), padding='SAME', W_std=1.4) FanOut(3)
  parallel(Conv(8, (3, 3), strides=(1, 2), padding='SAME', W_std=1.2),
           Identity,
           serial(A, Conv(8, (1, 2), W_std=1.1, b_std=0.1)))
  FanInConcat(axis=-2) B Conv(4, (2, 3), strides=(2, 1), W_std=1.3) Relu
  Flatten Dense(1)

with A, B in {Relu, Erf, Gelu}, on that case's inputs (nt_cases.case_inputs:
4 NHWC images 6 x 6 x 2, multiples of 1/8).

Written from the mathematics only (no code of ntkd or neural-tangents), in
mpmath at DPS decimal digits (default 50), on the FULL covariance: every
pair of (sample, position) with every other, the NTK parameterization:

- input: Sigma[a,p; b,p'] = x_a(p) . x_b(p') / C, Theta = 0;
- Conv(kh, kw, strides, padding, W, b): Sigma' = W^2 * mean over the kh*kw
  taps t of Sigma[p*s + t - pad, p'*s + t - pad] (the same tap on both
  positions; a tap outside the image contributes 0 and still counts in the
  mean: zero padding) + b^2; Theta' = Sigma' + W^2 * (the same mean of
  Theta). SAME as XLA: out = ceil(n/s), pad_lo = max((out-1)*s + k - n, 0)//2;
  VALID: out = (n - k)//s + 1, no pad;
- a nonlinearity f: Sigma' = E[f(u) f(v)], Theta' = E[f'(u) f'(v)] * Theta,
  (u, v) ~ N(0, [[q11, q12], [q12, q22]]) with q11, q22 the variances of the
  two (sample, position)s and q12 their covariance, in closed form:
    Relu (arc-cosine): sqrt(q11 q22)/(2 pi) (sin t + (pi - t) cos t),
                       derivative (pi - t)/(2 pi), t = angle of the pair,
                       computed as atan2(sqrt(q11 q22 - q12^2), q12);
    Erf: (2/pi) asin(2 q12 / sqrt((1 + 2 q11)(1 + 2 q22))),
         derivative (4/pi) / sqrt((1 + 2 q11)(1 + 2 q22) - 4 q12^2);
    Gelu (x Phi(x), exact): with s^2 = (1+q11)(1+q22), D = s^2 - q12^2,
         c = 1/(1+q11) + 1/(1+q22) - 1,
         T = q12/4 + q12 asin(q12/s)/(2 pi)
             + (q11 q22 + c q12^2) / (2 pi sqrt D),
         derivative dT/dq12 (Price's theorem)
           = 1/4 + asin(q12/s)/(2 pi)
             + (q12 (1 + 2c)/sqrt D + (q11 q22 + c q12^2) q12 / D^1.5)/(2 pi).
    (Derived by writing Phi(u) = P(z <= u) with an independent z and
    Gaussian integration by parts; checked here against 2-D Gauss-Hermite
    quadrature at a few covariances: `--check-maps`.)
  At a pair of a (sample, position) with itself q12 is the very number
  q11 = q22 (one array entry), so the maps are evaluated at correlation
  exactly 1 where it is exactly 1.
- FanOut(3): three copies; Identity passes (Sigma, Theta) through;
  FanInConcat(axis=-2): the branches' images side by side along the width
  (branch 1 first), covariances between positions of different branches 0
  (independent weights), for Sigma and Theta alike;
- Flatten Dense(W, b): Sigma' = W^2 * mean over positions p of
  Sigma[a,p; b,p] + b^2, Theta' = Sigma' + W^2 * mean of Theta[a,p; b,p].

Run with any python that has numpy and mpmath (e.g. the reference venv):

  /opt/ntkd-ref-venv/bin/python scripts/concat_reference.py erf gelu
  /opt/ntkd-ref-venv/bin/python scripts/concat_reference.py erf gelu \
      --compare nngp.npy ntk.npy      # max relative errors, diag/off-diag
  /opt/ntkd-ref-venv/bin/python scripts/concat_reference.py --check-maps

Prints the 4 x 4 NNGP and NTK (%.17g, rounded from DPS digits). A full run
takes a few minutes (the full covariance after the join has 336^2 entries).
"""

import argparse
import os
import sys

import mpmath as mp
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import nt_cases  # noqa: E402  (inputs only: case_inputs needs numpy only)

CASE = 'cnn_concat_cols_strided_flat'
ARCH = ("Conv(8, (3, 3), padding='SAME', W_std=1.4) FanOut(3) parallel(Conv(8, (3, 3), strides=(1, 2), "
        "padding='SAME', W_std=1.2), Identity, serial({A}, Conv(8, (1, 2), W_std=1.1, b_std=0.1))) "
        "FanInConcat(axis=-2) {B} Conv(4, (2, 3), strides=(2, 1), W_std=1.3) Relu Flatten Dense(1)")
NAMES = {'relu': 'Relu', 'erf': 'Erf', 'gelu': 'Gelu'}


def inputs():
  spec = [c for c in nt_cases.cnn_cases() if c['name'] == CASE][0]
  return nt_cases.case_inputs(spec)


# ---------------------------------------------------------------- the maps

def relu_map(q11, q22, q12):
  if q12 == q11 and q11 == q22:  # a (sample, position) with itself
    return q11 / 2, mp.mpf(1) / 2
  det = q11 * q22 - q12 * q12
  t = mp.atan2(mp.sqrt(det if det > 0 else mp.mpf(0)), q12)
  r = mp.sqrt(q11 * q22)
  return r / (2 * mp.pi) * (mp.sin(t) + (mp.pi - t) * mp.cos(t)), (mp.pi - t) / (2 * mp.pi)


def erf_map(q11, q22, q12):
  p = (1 + 2 * q11) * (1 + 2 * q22)
  return (2 / mp.pi) * mp.asin(2 * q12 / mp.sqrt(p)), (4 / mp.pi) / mp.sqrt(p - 4 * q12 * q12)


def gelu_map(q11, q22, q12):
  s2 = (1 + q11) * (1 + q22)
  d = s2 - q12 * q12
  c = 1 / (1 + q11) + 1 / (1 + q22) - 1
  a = mp.asin(q12 / mp.sqrt(s2))
  rd = mp.sqrt(d)
  bb = q11 * q22 + c * q12 * q12
  t = q12 / 4 + q12 * a / (2 * mp.pi) + bb / (2 * mp.pi * rd)
  dt = mp.mpf(1) / 4 + a / (2 * mp.pi) + (q12 * (1 + 2 * c) / rd + bb * q12 / (d * rd)) / (2 * mp.pi)
  return t, dt


MAPS = {'relu': relu_map, 'erf': erf_map, 'gelu': gelu_map}
FUNCS = {  # f, f' for the quadrature check
    'relu': (lambda u: u if u > 0 else mp.mpf(0), lambda u: mp.mpf(1) if u > 0 else mp.mpf(0)),
    'erf': (mp.erf, lambda u: 2 / mp.sqrt(mp.pi) * mp.exp(-u * u)),
    'gelu': (lambda u: u * mp.ncdf(u), lambda u: mp.ncdf(u) + u * mp.npdf(u)),
}


def check_maps():
  """The closed forms against nested mpmath quadrature of the Gaussian
  expectations (tanh-sinh, at the working precision)."""
  worst = 0
  for name in ('relu', 'erf', 'gelu'):
    f, fp = FUNCS[name]
    for q11, q22, q12 in ((1, 1, 1), (0.7, 1.3, 0.4), (2.5, 0.4, -0.9), (1.9, 1.9, 1.9), (0.3, 3.0, 0.9)):
      q11, q22, q12 = mp.mpf(q11), mp.mpf(q22), mp.mpf(q12)
      l11 = mp.sqrt(q11)
      l21 = q12 / l11
      l22 = mp.sqrt(max(q22 - l21 * l21, mp.mpf(0)))

      def expect(g):
        def inner(x):
          if l22 == 0:
            return g(l21 * x)
          return mp.quad(lambda y: g(l21 * x + l22 * y) * mp.npdf(y), [-mp.inf, -l21 * x / l22, mp.inf])
        return mp.quad(lambda x: g(l11 * x) * inner(x) * mp.npdf(x), [-mp.inf, 0, mp.inf])

      s, ds = expect(f), expect(fp)
      t, dt = MAPS[name](q11, q22, q12)
      e = max(abs(t - s) / abs(s), abs(dt - ds) / abs(ds))
      worst = max(worst, e)
      print(f'{name} q11={mp.nstr(q11, 3)} q22={mp.nstr(q22, 3)} q12={mp.nstr(q12, 3)}: '
            f'T {mp.nstr(t, 20)} quad {mp.nstr(s, 20)}  dT {mp.nstr(dt, 20)} quad {mp.nstr(ds, 20)}  rel {mp.nstr(e, 3)}',
            flush=True)
  print('worst relative difference', mp.nstr(worst, 3))
  return worst


# ------------------------------------------------- the full-covariance layers

ZERO = None


def zeros(shape):
  a = np.empty(shape, dtype=object)
  a.fill(ZERO)
  return a


def conv(sig, th, k, s, padding, w, b):
  """sig, th: (N, H, W, N, H, W) object arrays."""
  n, hh, ww = sig.shape[:3]
  outs, pads = [], []
  for dim, kk, ss in zip((hh, ww), k, s):
    if padding == 'SAME':
      o = -(-dim // ss)
      pads.append(max((o - 1) * ss + kk - dim, 0) // 2)
    else:
      o = (dim - kk) // ss + 1
      pads.append(0)
    outs.append(o)
  ho, wo = outs

  w2 = mp.mpf(w) ** 2 / (k[0] * k[1])
  b2 = mp.mpf(b) ** 2
  sig2, th2 = zeros((n, ho, wo, n, ho, wo)), zeros((n, ho, wo, n, ho, wo))
  for dh in range(k[0]):
    for dw in range(k[1]):
      hs = [i * s[0] + dh - pads[0] for i in range(ho)]
      ws_ = [j * s[1] + dw - pads[1] for j in range(wo)]
      hin = [i for i, h in enumerate(hs) if 0 <= h < hh]
      win = [j for j, x in enumerate(ws_) if 0 <= x < ww]
      if not hin or not win:
        continue
      hsrc = [hs[i] for i in hin]
      wsrc = [ws_[j] for j in win]
      ix = np.ix_(range(n), hin, win, range(n), hin, win)
      src = np.ix_(range(n), hsrc, wsrc, range(n), hsrc, wsrc)
      sig2[ix] = sig2[ix] + sig[src]
      th2[ix] = th2[ix] + th[src]
  sig2 = sig2 * w2 + b2
  th2 = th2 * w2 + sig2
  return sig2, th2


def nonlin(sig, th, name):
  n, hh, ww = sig.shape[:3]
  m = MAPS[name]
  var = np.array([[[sig[a, h, w, a, h, w] for w in range(ww)] for h in range(hh)] for a in range(n)], dtype=object)
  sig2, th2 = zeros(sig.shape), zeros(sig.shape)
  for idx in np.ndindex(*sig.shape):
    a, h, w, bb, h2, w2 = idx
    t, dt = m(var[a, h, w], var[bb, h2, w2], sig[idx])
    sig2[idx] = t
    th2[idx] = dt * th[idx]
  return sig2, th2


def concat_w(parts):
  n, hh = parts[0][0].shape[:2]
  widths = [p[0].shape[2] for p in parts]
  wt = sum(widths)
  sig, th = zeros((n, hh, wt, n, hh, wt)), zeros((n, hh, wt, n, hh, wt))
  off = 0
  for (s_, t_), wd in zip(parts, widths):
    sl = slice(off, off + wd)
    sig[:, :, sl, :, :, sl] = s_
    th[:, :, sl, :, :, sl] = t_
    off += wd
  return sig, th


def flatten_dense(sig, th, w, b):
  n, hh, ww = sig.shape[:3]
  k, t = zeros((n, n)), zeros((n, n))
  for a in range(n):
    for bb in range(n):
      k[a, bb] = sum(sig[a, h, x, bb, h, x] for h in range(hh) for x in range(ww)) / (hh * ww)
      t[a, bb] = sum(th[a, h, x, bb, h, x] for h in range(hh) for x in range(ww)) / (hh * ww)
  k = k * (mp.mpf(w) ** 2) + mp.mpf(b) ** 2
  t = t * (mp.mpf(w) ** 2) + k
  return k, t


def kernels(x, act_a, act_b):
  n, hh, ww, c = x.shape
  xm = np.vectorize(mp.mpf, otypes=[object])(x)  # multiples of 1/8: exact
  sig = np.einsum('ahwc,bijc->ahwbij', xm, xm) / c
  th = zeros(sig.shape)
  sig, th = conv(sig, th, (3, 3), (1, 1), 'SAME', 1.4, 0)
  b1 = conv(sig, th, (3, 3), (1, 2), 'SAME', 1.2, 0)
  b2 = (sig, th)
  b3 = conv(*nonlin(sig, th, act_a), (1, 2), (1, 1), 'VALID', 1.1, 0.1)
  sig, th = concat_w([b1, b2, b3])
  sig, th = nonlin(sig, th, act_b)
  sig, th = conv(sig, th, (2, 3), (2, 1), 'VALID', 1.3, 0)
  sig, th = nonlin(sig, th, 'relu')
  return flatten_dense(sig, th, 1.0, 0)


def rel_errors(got, ref):
  """max |got - ref| / max|ref| over the diagonal and the off-diagonal."""
  scale = max(abs(v) for v in ref.flat)
  n = ref.shape[0]
  diag = max(abs(mp.mpf(float(got[i, i])) - ref[i, i]) for i in range(n)) / scale
  off = max(abs(mp.mpf(float(got[i, j])) - ref[i, j]) for i in range(n) for j in range(n) if i != j) / scale
  return diag, off


VARIANTS = (('relu', 'relu'), ('erf', 'relu'), ('relu', 'gelu'), ('erf', 'gelu'))


def write_ref(path, dps):
  x = inputs()
  n = x.shape[0]
  with open(path, 'w') as fh:
    fh.write('# generator: scripts/concat_reference.py --write-ref (ntkd), independent of neural-tangents:\n'
             f'#   the full-covariance NNGP/NTK recursion in mpmath {mp.__version__} at {dps} digits,\n'
             '#   each value rounded once to double (%.17g). The network of nt_cases.py\'s\n'
             '#   cnn_concat_cols_strided_flat and its inputs, with the branch activation A and the\n'
             '#   activation B after the spatial FanInConcat in {Relu, Erf} x {Relu, Gelu}.\n'
             '# neural-tangents 0.6.5 differs from these by up to 6.4e-10 on the NTK diagonal when A or B\n'
             '#   is not Relu: its diagonal_spatial path (taken for a Flatten readout) rounds nngp[i,i]\n'
             '#   and cov1[i] differently after Erf/Gelu, and the last Relu\'s angle amplifies that ulp.\n')
    for a, b in VARIANTS:
      k, t = kernels(x, a, b)
      fh.write(f'\ncase cnn_concat_cols_strided_flat_{a}_{b}\n')
      fh.write('arch ' + ARCH.format(A=NAMES[a], B=NAMES[b]) + '\n')
      fh.write('shape ' + ' '.join(str(v) for v in x.shape) + '\nx\n')
      for row in x.reshape(n, -1):
        fh.write(' '.join('%.17g' % v for v in row) + '\n')
      for label, m in (('nngp', k), ('ntk', t)):
        fh.write(label + '\n')
        for row in m:
          fh.write(' '.join('%.17g' % float(v) for v in row) + '\n')
      fh.write('end\n')
      fh.flush()
      print(a, b, 'done', flush=True)


def main():
  global ZERO
  ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  ap.add_argument('act_a', nargs='?', choices=sorted(MAPS), help='the branch activation A')
  ap.add_argument('act_b', nargs='?', choices=sorted(MAPS), help='the activation B after the join')
  ap.add_argument('--dps', type=int, default=50)
  ap.add_argument('--compare', nargs=2, metavar=('NNGP.npy', 'NTK.npy'), action='append', default=[],
                  help='4 x 4 kernels to compare with (repeatable)')
  ap.add_argument('--save', metavar='PREFIX', help='write PREFIX_nngp.txt, PREFIX_ntk.txt (%%.20e)')
  ap.add_argument('--check-maps', action='store_true')
  ap.add_argument('--write-ref', metavar='PATH',
                  help='compute the four variants (A, B in {Relu, Erf} x {Relu, Gelu}) and write them in '
                       "tests/data/ref_cnn.txt's format (the C tests read tests/data/ref_concat.txt)")
  args = ap.parse_args()
  mp.mp.dps = args.dps
  ZERO = mp.mpf(0)
  if args.check_maps:
    # these panels leave ~3e-15 at (0.3, 3.0, 0.9) (quadrature: with maxdegree=10 and
    # outer breakpoints -2, 0, 2 Erf and Gelu agree there to 1e-30); elsewhere ~1e-20
    sys.exit(0 if check_maps() < 1e-12 else 1)
  if args.write_ref:
    write_ref(args.write_ref, args.dps)
    return
  if not args.act_a or not args.act_b:
    ap.error('give A and B (relu, erf, gelu)')
  print('#', ARCH.format(A=NAMES[args.act_a], B=NAMES[args.act_b]))
  k, t = kernels(inputs(), args.act_a, args.act_b)
  for label, m in (('nngp', k), ('ntk', t)):
    print(label)
    for row in m:
      print(' '.join('%.17g' % float(v) for v in row))
    if args.save:
      with open(f'{args.save}_{label}.txt', 'w') as fh:
        for row in m:
          fh.write(' '.join(mp.nstr(v, 25, min_fixed=-1, max_fixed=-1) for v in row) + '\n')
  for nngp_path, ntk_path in args.compare:
    for label, path, ref in (('nngp', nngp_path, k), ('ntk', ntk_path, t)):
      d, o = rel_errors(np.load(path), ref)
      print(f'{path}: {label} max relative error diagonal {float(d):.3g} off-diagonal {float(o):.3g}')


if __name__ == '__main__':
  main()
