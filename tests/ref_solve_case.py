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
    else:
      rows = n if key in ('x', 'nngp', 'ntk', 'labels') else n - case['ntrain']
      blocks[key] = np.array([[float(v) for v in lines[i + 1 + r].split()] for r in range(rows)])
      i += 1 + rows
  case['x'] = blocks['x'].reshape(shape)
  case['labels'] = blocks['labels'][:, 0].astype(np.int64)
  case['pred_nngp'], case['pred_ntk'] = blocks['pred_nngp'], blocks['pred_ntk']
  return case


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
  prefix, tol = argv[4], float(argv[5])
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
