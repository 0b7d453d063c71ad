#!/usr/bin/env python3
"""Helper of tests/e2e.sh for the kernel-regression cases of
tests/data/ref_solve.txt (written by scripts/nt_reference.sh).

  ref_solve_case.py write REF CASE     writes xtr.npy, xte.npy, ytr.npy,
                                       yte.npy into the current folder and
                                       prints "NTRAIN RIDGE ARCH"
  ref_solve_case.py compare REF CASE PREFIX TOL
                                       compares PREFIX-{nngp,ntk}-ridgeR.npy
                                       with neural-tangents' predictions;
                                       exit 0 if the largest error relative
                                       to the largest prediction is < TOL
  ref_solve_case.py var|cov REF CASE PREFIX TOL
                                       the same for PREFIX-{nngp,ntk}-ridgeR-
                                       var.npy (m x 1) or -cov.npy (m x m)
                                       against neural-tangents' compute_cov
  ref_solve_case.py loo REF CASE LOG TOL
                                       the LOO columns of ntkd's table in LOG
                                       against neural-tangents' brute-force
                                       leave-one-out (accuracy as printed,
                                       MSE within TOL relative)
"""
import sys

import numpy as np


def read_case(path, name):
  with open(path) as f:
    lines = [l.rstrip('\n') for l in f]
  i = lines.index(f'case {name}')
  case = {'arch': lines[i + 1][5:]}
  shape = [int(v) for v in lines[i + 2].split()[1:]]
  n = shape[0]
  i += 3
  blocks = {}
  while lines[i] != 'end':
    key = lines[i]
    if key.startswith('ntrain '):
      case['ntrain'] = int(key.split()[1])
      i += 1
    elif key.startswith('ridge '):
      case['ridge'] = key.split()[1]
      i += 1
    elif key.startswith('loo_nngp ') or key.startswith('loo_ntk '):
      word, acc, mse = key.split()
      case[word] = (float(acc), float(mse))
      i += 1
    else:
      rows = (n if key in ('x', 'nngp', 'ntk', 'labels') else
              case['ntrain'] if key.startswith('loo_pred_') else n - case['ntrain'])
      blocks[key] = np.array([[float(v) for v in lines[i + 1 + r].split()] for r in range(rows)])
      i += 1 + rows
  case['x'] = blocks['x'].reshape(shape)
  case['labels'] = blocks['labels'][:, 0].astype(np.int64)
  case['pred_nngp'], case['pred_ntk'] = blocks['pred_nngp'], blocks['pred_ntk']
  for key in ('cov_nngp', 'cov_ntk', 'loo_pred_nngp', 'loo_pred_ntk'):
    case[key] = blocks.get(key)
  return case


def rel_err(got, want):
  return float(np.max(np.abs(got - want)) / np.max(np.abs(want)))


def compare_variance(c, name, prefix, tol, kind):
  """PREFIX-{nngp,ntk}-ridgeR-var.npy (kind var: (m, 1), the diagonal) or
  -cov.npy (kind cov: (m, m)) against neural-tangents' compute_cov."""
  worst = 0.0
  for kern in ('nngp', 'ntk'):
    cov = c[f'cov_{kern}']
    want = np.diag(cov).reshape(-1, 1) if kind == 'var' else cov
    got = np.load(f'{prefix}-{kern}-ridge{float(c["ridge"]):g}-{kind}.npy')
    if got.shape != want.shape or got.dtype != np.float64:
      print(f'{name} {kern}: {kind} shape {got.shape} {got.dtype}, want {want.shape} float64')
      return 1
    worst = max(worst, rel_err(got, want))
  print(f'{name}: largest {kind} error {worst:.3g} (bound {tol:g})')
  return 0 if worst < tol else 1


def compare_loo(c, name, log, tol):
  """The LOO columns of ntkd's table (in LOG) against the brute-force
  leave-one-out of neural-tangents: accuracy exactly (one sample is 1/n),
  MSE relative to TOL (the table prints 6 decimals: TOL covers that)."""
  rows = {}
  for line in open(log):
    f = line.split()
    if len(f) == 8 and f[0] in ('nngp', 'ntk') and float(f[1]) == float(c['ridge']):
      rows[f[0]] = (float(f[6]), float(f[7]))
  worst = 0.0
  for kern in ('nngp', 'ntk'):
    if kern not in rows:
      print(f'{name} {kern}: no table line with LOO columns in {log}')
      return 1
    acc, mse = c[f'loo_{kern}']
    if abs(rows[kern][0] - acc) > 0.5e-4:
      print(f'{name} {kern}: LOO accuracy {rows[kern][0]}, neural-tangents {acc}')
      return 1
    worst = max(worst, abs(rows[kern][1] - mse) / mse)
  print(f'{name}: LOO accuracy equal, largest LOO MSE difference {worst:.3g} relative (bound {tol:g})')
  return 0 if worst < tol else 1


def main(argv):
  mode, ref, name = argv[1], argv[2], argv[3]
  c = read_case(ref, name)
  k = c['ntrain']
  if mode == 'write':
    np.save('xtr.npy', c['x'][:k])
    np.save('xte.npy', c['x'][k:])
    np.save('ytr.npy', c['labels'][:k])
    np.save('yte.npy', c['labels'][k:])
    print(k, c['ridge'], c['arch'])
    return 0
  if mode == 'loo':
    return compare_loo(c, name, argv[4], float(argv[5]))
  prefix, tol = argv[4], float(argv[5])
  if mode in ('var', 'cov'):
    return compare_variance(c, name, prefix, tol, mode)
  worst = 0.0
  for kern in ('nngp', 'ntk'):
    got = np.load(f'{prefix}-{kern}-ridge{float(c["ridge"]):g}.npy')
    want = c[f'pred_{kern}']
    if got.shape != want.shape:
      print(f'{name} {kern}: shape {got.shape}, want {want.shape}')
      return 1
    worst = max(worst, float(np.max(np.abs(got - want)) / np.max(np.abs(want))))
  print(f'{name}: largest prediction error {worst:.3g} (bound {tol:g})')
  return 0 if worst < tol else 1


if __name__ == '__main__':
  sys.exit(main(sys.argv))
