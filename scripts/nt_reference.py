#!/usr/bin/env python3
"""Generate reference NNGP/NTK kernels with neural-tangents for ntkd's tests.

Run through scripts/nt_reference.sh, which provides the pinned environment.

Usage: nt_reference.py [--only fc|cnn|solve|readme|graph] [--fc-out PATH] [--cnn-out PATH]
                       [--solve-out PATH] [--readme-out PATH] [--graph-out PATH]

With no arguments writes five files: tests/data/ref_fc.txt (fully-connected
cases), tests/data/ref_cnn.txt (convolutional cases on NHWC images),
tests/data/ref_solve.txt (kernel regression: predictions on a test set),
tests/data/ref_readme.npz (neural-tangents' README examples) and
tests/data/ref_graph.txt (graph networks: each case's patterns after x, a
`pattern` block of N lines of V x V values). Each --X-out names where one
goes; --only writes one.

Output format (parsed by the C tests):

    # comments
    case <name>
    arch <architecture string in ntkd syntax>
    shape <N> <d>                  (FC: N inputs of dimension d)
    shape <N> <H> <W> <C>          (CNN: N images, NHWC)
    x
    <N lines of d values, %.17g>   (CNN: H*W*C values per line, NHWC order,
                                    i.e. row-major over h, then w, then c)
    nngp
    <N lines of N values, %.17g>
    ntk
    <N lines of N values, %.17g>
    end

The kernels are kernel_fn(x, None, ('nngp', 'ntk')) of neural-tangents'
stax in float64 with the default 'ntk' parameterization.

A kernel-regression case (ref_solve.txt) is the same block over all its
samples (train first, then test), with before `end`:

    ntrain <n>                     (samples 0..n-1 train, the rest test)
    ridge <diag_reg>
    labels
    <N lines: one class per sample>
    pred_nngp
    <N - n lines of `classes` values>
    pred_ntk
    <N - n lines of `classes` values>

    loo_nngp <accuracy> <mse>      (leave-one-out on the train set, below)
    loo_pred_nngp
    <n lines of `classes` values>
    loo_ntk <accuracy> <mse>
    loo_pred_ntk
    <n lines of `classes` values>
    cov_nngp
    <N - n lines of N - n values>  (the test covariance, below)
    cov_ntk
    <N - n lines of N - n values>

pred_* are nt.predict.gradient_descent_mse_ensemble(kernel_fn, x_train,
one_hot(labels_train), diag_reg=ridge)(t=None, x_test=x_test, get=...): the
infinite-time mean, i.e. K_test,train (K_train + ridge * mean(diag K_train)
I)^-1 Y for each kernel.

cov_* are the covariances of the same call with compute_cov=True (the same
matrix for every output class); the predictive variances are their
diagonals.

loo_pred_* are brute-force leave-one-out predictions: for each train sample
i, nt.predict.gradient_descent_mse_ensemble on the other n - 1 train samples
with diag_reg_absolute_scale=True and diag_reg = ridge * mean(diag K_train)
of the whole train set (the regulariser is held fixed, as in the closed form
y_i - alpha_i / [(K + reg I)^-1]_ii), predicting sample i; loo_* give the
fraction of train samples whose largest LOO prediction (the first, on ties)
is their label, and the mean over samples and classes of (LOO prediction -
one-hot)^2.

CNN layers in ntkd syntax (no spaces inside the brackets):
    Conv(f,stride,PADDING,W_std=w,b_std=b)
        stax.Conv(WIDTH, (f, f), (stride, stride), PADDING, W_std=w,
                  b_std=b or None), PADDING in SAME, VALID, CIRCULAR
    AvgPool(w,s)   stax.AvgPool((w, w), (s, s), 'VALID')
                   (normalize_edges=False, stax's default; irrelevant for VALID)
    Flatten        stax.Flatten()
    GlobalAvgPool  stax.GlobalAvgPool()

To add architectures: extend LAYER_BUILDERS with a builder for each new layer
name, and add case specs to a case list.
"""

import argparse
import re
import sys
import zlib

import jax

jax.config.update('jax_enable_x64', True)

import jaxlib  # noqa: E402
import numpy as np  # noqa: E402
import neural_tangents as nt  # noqa: E402
import os  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nt_cases  # noqa: E402
from nt_cases import *  # noqa: E402,F401,F403  (the cases, written against nt_cases.stax)
from neural_tangents import stax  # noqa: E402  (after the star import, which carries nt_cases.stax = None)
nt_cases.stax = stax

DEFAULT_FC_OUTPUT = 'tests/data/ref_fc.txt'
DEFAULT_CNN_OUTPUT = 'tests/data/ref_cnn.txt'
DEFAULT_SOLVE_OUTPUT = 'tests/data/ref_solve.txt'
DEFAULT_README_OUTPUT = 'tests/data/ref_readme.npz'
DEFAULT_GRAPH_OUTPUT = 'tests/data/ref_graph.txt'
# --------------------------------------------------------------------------
# Computation and output
# --------------------------------------------------------------------------

def compute(c, x):
  _, _, kernel_fn = build_network(c)
  if c.get('pattern'):  # a graph case: its patterns on both sides
    agg = c.get('agg', x.shape[1:-1])  # the positions the Aggregates see
    p = case_pattern(c).reshape((x.shape[0],) + tuple(agg) * 2)
    k = kernel_fn(x, None, pattern=(p, p))
  else:
    k = kernel_fn(x, None)
  nngp = np.asarray(k.nngp, dtype=np.float64)
  ntk = np.asarray(k.ntk, dtype=np.float64)
  n = x.shape[0]
  assert nngp.shape == (n, n) and ntk.shape == (n, n), (nngp.shape, ntk.shape)
  if c.get('nan_diag'):
    # stax's RectifiedMonomial takes arccos(q12 / sqrt(q11 q22)) and
    # differentiates (pi - theta) / sin(theta) there: at theta = 0, a pair
    # of a sample with itself, that is 0 * inf = NaN (its variances too).
    # The diagonal stays NaN and the tests skip NaN entries
    # (tests/test_kernel.c checks the variances against stax's diagonal
    # formula). Off-diagonal entries must be finite.
    off = ~np.eye(n, dtype=bool)
    assert np.all(np.isfinite(nngp[off])) and np.all(np.isfinite(ntk[off]))
  else:
    assert np.all(np.isfinite(nngp)) and np.all(np.isfinite(ntk))
  return nngp, ntk


def check_zero_bias_equivalence(x):
  """stax.Dense(b_std=None) and b_std=0.0 must give bit-identical kernels."""
  kernels = []
  for b in (None, 0.0):
    _, _, kf = stax.serial(stax.Dense(WIDTH, W_std=1.5, b_std=b), stax.Relu(),
                           stax.Dense(WIDTH, W_std=1.5, b_std=b))
    kernels.append([np.asarray(k) for k in kf(x, None, ('nngp', 'ntk'))])
  for a, b in zip(*kernels):
    if not np.array_equal(a, b):
      raise AssertionError('b_std=None and b_std=0.0 kernels differ')


def check_zero_bias_equivalence_conv(x):
  """The same for stax.Conv (x is NHWC)."""
  kernels = []
  for b in (None, 0.0):
    _, _, kf = stax.serial(
        stax.Conv(WIDTH, (3, 3), padding='SAME', W_std=1.5, b_std=b),
        stax.Relu(),
        stax.Conv(WIDTH, (3, 3), padding='SAME', W_std=1.5, b_std=b),
        stax.GlobalAvgPool(), stax.Dense(WIDTH, W_std=1.5, b_std=b))
    kernels.append([np.asarray(k) for k in kf(x, None, ('nngp', 'ntk'))])
  for a, b in zip(*kernels):
    if not np.array_equal(a, b):
      raise AssertionError('Conv b_std=None and b_std=0.0 kernels differ')


def fmt_row(row):
  return ' '.join('%.17g' % v for v in row)


def write_case(out, c, x, nngp, ntk, close=True):
  out.write(f'case {c["name"]}\n')
  out.write(f'arch {c["arch"]}\n')
  if c.get('standard'):
    out.write('parameterization standard\n')
  shape = x.shape
  if c.get('one_d'):  # (N, L, C) sequences: ntkd holds them as L x 1 images
    shape = (shape[0], shape[1], 1, shape[2])
  out.write('shape ' + ' '.join(str(d) for d in shape) + '\n')
  x_rows = x.reshape(x.shape[0], -1)  # NHWC row-major: h, then w, then c
  mats = [('x', x_rows)]
  if c.get('pattern'):  # each sample's V x V pattern, row-major, V on the label's line
    p = case_pattern(c)
    mats.append((f'pattern {p.shape[1]}', p.reshape(x.shape[0], -1)))
  for label, mat in mats + [('nngp', nngp), ('ntk', ntk)]:
    out.write(label + '\n')
    for row in mat:
      out.write(fmt_row(row) + '\n')
  if close:
    out.write('end\n')


def write_versions(out):
  out.write('# generator: scripts/nt_reference.py (ntkd)\n')
  out.write(f'# neural-tangents {nt.__version__}\n')
  out.write(f'# jax {jax.__version__}\n')
  out.write(f'# jaxlib {jaxlib.__version__}\n')
  out.write(f'# numpy {np.__version__}\n')


def write_suite(path, cases, x_comment):
  names = [c['name'] for c in cases]
  assert len(set(names)) == len(names), 'duplicate case names'
  with open(path, 'w') as out:
    write_versions(out)
    out.write("# kernel_fn(x, None, ('nngp', 'ntk')), float64, "
              "parameterization='ntk'\n")
    for line in x_comment:
      out.write(f'# {line}\n')
    for c in cases:
      x = case_inputs(c)
      nngp, ntk = compute(c, x)
      out.write('\n')
      write_case(out, c, x, nngp, ntk)
  print(f'wrote {len(cases)} cases to {path}', file=sys.stderr)


def solve_cases():
  """Kernel regression: (case, ntrain, classes, ridge)."""
  fc = mlp(3, 'Relu', 1.5, 0.1)
  erf = mlp(2, 'Erf', 1.2, 0.2)
  gap = ' '.join([conv(3, 1, 'SAME', 1.5, 0.1), 'Relu', conv(3, 1, 'SAME', 1.5, 0.1),
                  'GlobalAvgPool', dense(1.5, 0.1)])
  return [
      (case('solve_fc_relu', fc, n=40, d=6), 30, 3, 1e-3),
      (case('solve_fc_relu_noreg', fc, n=20, d=8), 14, 2, 0.0),
      (case('solve_fc_erf', erf, n=36, d=5), 27, 4, 0.1),
      (image_case('solve_cnn_gap', gap, (16, 5, 5, 2)), 12, 3, 1e-2),
  ]


def loo_brute_force(kernel_fn, x_train, y_train, get, reg):
  """Leave-one-out predictions of each train sample by neural-tangents on
  the other samples, with `reg` added to the diagonal (absolute)."""
  n = x_train.shape[0]
  loo = np.empty(y_train.shape)
  for i in range(n):
    rest = np.arange(n) != i
    predict = nt.predict.gradient_descent_mse_ensemble(
        kernel_fn, x_train[rest], y_train[rest], diag_reg=reg,
        diag_reg_absolute_scale=True)
    loo[i] = np.asarray(predict(t=None, x_test=x_train[i:i + 1], get=get),
                        dtype=np.float64)[0]
  assert np.all(np.isfinite(loo))
  return loo


def write_solve_suite(path, cases):
  with open(path, 'w') as out:
    write_versions(out)
    out.write('# kernel regression: nt.predict.gradient_descent_mse_ensemble('
              'kernel_fn, x_train, one_hot(y_train), diag_reg=ridge)'
              '(t=None, x_test=x_test, get=(nngp, ntk)), float64\n')
    out.write('# x as in ref_fc.txt / ref_cnn.txt; labels: '
              'RandomState(crc32(name) + 1).randint(classes)\n')
    out.write('# cov_*: the same call with compute_cov=True; loo_*: brute-force '
              'leave-one-out (nt.predict on the other n - 1 train samples, '
              'diag_reg_absolute_scale=True, the regulariser of the whole '
              'train set)\n')
    for c, ntrain, classes, ridge in cases:
      x = case_inputs(c)
      nngp, ntk = compute(c, x)
      rng = np.random.RandomState((zlib.crc32(c['name'].encode()) + 1) & 0x7fffffff)
      labels = rng.randint(classes, size=x.shape[0])
      labels[:classes] = np.arange(classes)  # every class in the train set
      y = np.eye(classes)[labels[:ntrain]]
      _, _, kernel_fn = build_network(c)
      predict = nt.predict.gradient_descent_mse_ensemble(
          kernel_fn, x[:ntrain], y, diag_reg=ridge)
      pred = predict(t=None, x_test=x[ntrain:], get=('nngp', 'ntk'))
      out.write('\n')
      write_case(out, c, x, nngp, ntk, close=False)
      out.write(f'ntrain {ntrain}\nridge {ridge!r}\nlabels\n')
      for v in labels:
        out.write(f'{v}\n')
      for label, mat in (('pred_nngp', pred.nngp), ('pred_ntk', pred.ntk)):
        mat = np.asarray(mat, dtype=np.float64)
        assert mat.shape == (x.shape[0] - ntrain, classes) and np.all(np.isfinite(mat))
        out.write(label + '\n')
        for row in mat:
          out.write(fmt_row(row) + '\n')
      for get, k in (('nngp', nngp), ('ntk', ntk)):
        loo = loo_brute_force(kernel_fn, x[:ntrain], y, get, ridge * np.trace(k[:ntrain, :ntrain]) / ntrain)
        acc = float(np.mean(np.argmax(loo, axis=1) == labels[:ntrain]))
        mse = float(np.mean((loo - y) ** 2))
        out.write(f'loo_{get} {acc!r} {mse!r}\nloo_pred_{get}\n')
        for row in loo:
          out.write(fmt_row(row) + '\n')
      # A predictor of its own: predict_inf caches the train kernels of its
      # first call, which must hold both NNGP and NTK for the NTK covariance.
      covs = nt.predict.gradient_descent_mse_ensemble(kernel_fn, x[:ntrain], y, diag_reg=ridge)(
          t=None, x_test=x[ntrain:], get=('nngp', 'ntk'), compute_cov=True)
      for get in ('nngp', 'ntk'):
        g = getattr(covs, get)
        assert np.array_equal(np.asarray(g.mean), np.asarray(getattr(pred, get)))
        cov = np.asarray(g.covariance, dtype=np.float64)
        m = x.shape[0] - ntrain
        assert cov.shape == (m, m) and np.all(np.isfinite(cov)) and np.all(np.diag(cov) > 0)
        out.write(f'cov_{get}\n')
        for row in cov:
          out.write(fmt_row(row) + '\n')
      out.write('end\n')
  print(f'wrote {len(cases)} cases to {path}', file=sys.stderr)


def main(argv):
  parser = argparse.ArgumentParser(
      prog='nt_reference.py',
      description='Write neural-tangents reference kernels for ntkd tests '
                  '(by default all five files: fc, cnn, solve, readme, graph).')
  parser.add_argument('--only', choices=('fc', 'cnn', 'solve', 'readme', 'graph'),
                      help='write only this suite')
  parser.add_argument('--fc-out', default=DEFAULT_FC_OUTPUT, metavar='PATH',
                      help=f'FC output (default {DEFAULT_FC_OUTPUT})')
  parser.add_argument('--cnn-out', default=DEFAULT_CNN_OUTPUT, metavar='PATH',
                      help=f'CNN output (default {DEFAULT_CNN_OUTPUT})')
  parser.add_argument('--solve-out', default=DEFAULT_SOLVE_OUTPUT, metavar='PATH',
                      help=f'kernel-regression output (default {DEFAULT_SOLVE_OUTPUT})')
  parser.add_argument('--readme-out', default=DEFAULT_README_OUTPUT, metavar='PATH',
                      help=f"neural-tangents' README examples (default {DEFAULT_README_OUTPUT})")
  parser.add_argument('--graph-out', default=DEFAULT_GRAPH_OUTPUT, metavar='PATH',
                      help=f'graph networks output (default {DEFAULT_GRAPH_OUTPUT})')
  opts = parser.parse_args(argv[1:])

  if opts.only in (None, 'fc'):
    check_zero_bias_equivalence(
        np.random.RandomState(0).standard_normal((4, 3)))
    write_suite(opts.fc_out, fc_cases(), [
        'x: per-case np.random.RandomState(crc32(name)) standard normal, '
        'times a scale, rounded to multiples of 1/8'])
  if opts.only in (None, 'cnn'):
    check_zero_bias_equivalence_conv(
        np.random.RandomState(0).standard_normal((3, 5, 5, 2)))
    write_suite(opts.cnn_out, cnn_cases(), [
        'x: per-case np.random.RandomState(crc32(name)) standard normal of '
        'shape (N, H, W, C), times a scale, rounded to multiples of 1/8',
        'images are NHWC; each x line is one image, row-major over h, w, c',
        "Conv(f,s,P,W_std=w,b_std=b) = stax.Conv(_, (f, f), (s, s), P, W_std=w, "
        'b_std=b or None); AvgPool(w,s) = stax.AvgPool((w, w), (s, s), '
        "'VALID')"])
  if opts.only in (None, 'graph'):
    write_suite(opts.graph_out, graph_cases(), [
        "kernel_fn(x, None, ('nngp', 'ntk'), pattern=(p, p)), p each case's pattern",
        'x: as in ref_cnn.txt, (N, L, C) sequences written as (N, L, 1, C), or NHWC images',
        'pattern V: one line per sample, its V x V matrix row-major (V the positions the Aggregates see, '
        'row-major over h, w); '
        'per-case edges of probability 0.4 from RandomState(crc32(name) + 1), weights multiples of 1/8'])
  if opts.only in (None, 'solve'):
    write_solve_suite(opts.solve_out, solve_cases())
  if opts.only in (None, 'readme'):
    write_readme_examples(opts.readme_out)
  return 0


def write_readme_examples(path):
  """neural-tangents' README examples (tests/python/nt_readme.py, written
  against a `stax` module) run with neural-tangents' own stax, in float64:
  every result by name, with the inputs, in one .npz."""
  import importlib.util
  import os
  here = os.path.dirname(os.path.abspath(__file__))
  spec = importlib.util.spec_from_file_location(
      'nt_readme', os.path.join(here, '..', 'tests', 'python', 'nt_readme.py'))
  mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(mod)
  x = mod.inputs()
  out = mod.examples(stax, {k: jax.numpy.asarray(v) for k, v in x.items()})
  np.savez_compressed(path, **{'in_' + k: v for k, v in x.items()}, **out)
  print(f'wrote {path}: {len(out)} results', file=sys.stderr)


if __name__ == '__main__':
  sys.exit(main(sys.argv))
