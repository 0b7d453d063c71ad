#!/usr/bin/python3
"""Pictures of what ntkd computed (PNG, with Debian's python3-matplotlib).

  scripts/plot.py kernel K.npy LABELS [--count N] [--title T] --out PREFIX
      K.npy: a matrix from `ntkd export` (train samples first). LABELS: the
      train labels (IDX .gz/plain or a 1-D .npy). Writes PREFIX-matrix.png
      (the first N train samples sorted by label, each entry divided by
      sqrt(K_ii K_jj)) and PREFIX-spectrum.png (the eigenvalues of the
      N x N train block, largest first, log-log).
  scripts/plot.py train LOG.jsonl [--title T] --out PREFIX
      LOG: a training job's [train] log. Writes PREFIX-curves.png: loss and
      accuracy per epoch, train and validation.

Run with /usr/bin/python3 (Debian's numpy and matplotlib).
"""
import argparse
import gzip
import json
import sys

import matplotlib

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def read_labels(path):
  if path.endswith('.npy'):
    return np.load(path).astype(np.int64)
  opener = gzip.open if path.endswith('.gz') else open
  with opener(path, 'rb') as f:
    raw = f.read()
  if int.from_bytes(raw[:4], 'big') != 0x801:
    sys.exit(f'{path}: not an IDX labels file (magic 0x00000801)')
  n = int.from_bytes(raw[4:8], 'big')
  return np.frombuffer(raw, dtype=np.uint8, count=n, offset=8).astype(np.int64)


def plot_kernel(opts):
  K = np.load(opts.matrix, mmap_mode='r')
  labels = read_labels(opts.labels)
  n = min(opts.count or K.shape[0], K.shape[0], labels.shape[0])
  A = np.array(K[:n, :n], dtype=np.float64)
  if not np.isfinite(A).all():
    sys.exit(f'{opts.matrix}: the first {n} rows hold NaN (test x test of a split store?); '
             'use --count up to the train size')
  order = np.argsort(labels[:n], kind='stable')
  d = np.sqrt(np.diag(A))
  C = (A / np.outer(d, d))[np.ix_(order, order)]
  fig, ax = plt.subplots(figsize=(6.4, 5.6), dpi=110)
  im = ax.imshow(C, cmap='viridis', interpolation='nearest')
  fig.colorbar(im, ax=ax, label='K(x, x\') / sqrt(K(x, x) K(x\', x\'))')
  # Class boundaries and names along the axes.
  sorted_labels = labels[:n][order]
  edges = np.flatnonzero(np.diff(sorted_labels)) + 0.5
  for e in edges:
    ax.axhline(e, color='white', lw=0.4)
    ax.axvline(e, color='white', lw=0.4)
  starts = np.concatenate([[0], edges + 0.5])
  ends = np.concatenate([edges + 0.5, [n]])
  ax.set_xticks((starts + ends) / 2 - 0.5)
  ax.set_xticklabels([str(c) for c in np.unique(sorted_labels)])
  ax.set_yticks((starts + ends) / 2 - 0.5)
  ax.set_yticklabels([str(c) for c in np.unique(sorted_labels)])
  ax.set_xlabel('class')
  ax.set_ylabel('class')
  ax.set_title(opts.title or f'{n} samples sorted by label')
  fig.tight_layout()
  fig.savefig(opts.out + '-matrix.png')
  plt.close(fig)

  ev = np.linalg.eigvalsh(A)[::-1]
  fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=110)
  ax.loglog(np.arange(1, n + 1), np.maximum(ev, np.finfo(float).tiny), lw=1.2)
  ax.set_xlabel('index (largest first)')
  ax.set_ylabel('eigenvalue')
  ax.set_title((opts.title + ': ' if opts.title else '') + f'spectrum of the {n} x {n} kernel', fontsize=10)
  ax.grid(True, which='major', alpha=0.3)
  fig.tight_layout()
  fig.savefig(opts.out + '-spectrum.png')
  plt.close(fig)
  print(f'wrote {opts.out}-matrix.png and {opts.out}-spectrum.png '
        f'(eigenvalues {ev[0]:.3g} .. {ev[-1]:.3g})')


def plot_train(opts):
  rows = []
  with open(opts.log) as f:
    for line in f:
      if line.strip():
        rows.append(json.loads(line))
  if not rows:
    sys.exit(f'{opts.log}: no epochs logged')
  ep = [r['epoch'] for r in rows]
  fig, axes = plt.subplots(1, 2, figsize=(10, 4), dpi=110)
  for ax, key, label in zip(axes, ('loss', 'accuracy'), ('loss (softmax cross-entropy)', 'accuracy')):
    ax.plot(ep, [r[f'main/{key}'] for r in rows], 'o-', label='train')
    ax.plot(ep, [r[f'validation/main/{key}'] for r in rows], 's-', label='validation')
    ax.set_xlabel('epoch')
    ax.set_ylabel(label)
    ax.legend()
    ax.grid(alpha=0.3)
  if opts.title:
    fig.suptitle(opts.title)
  fig.tight_layout()
  fig.savefig(opts.out + '-curves.png')
  plt.close(fig)
  print(f'wrote {opts.out}-curves.png ({len(rows)} epochs)')


def positive(text):
  """--count: a whole number of samples, at least 1 (-5 sliced K[:-5, :-5],
  all but five rows of a 60 000-sample matrix: a 26.8 GiB allocation)."""
  try:
    n = int(text)
  except ValueError:
    raise argparse.ArgumentTypeError(f'{text!r} is not a whole number')
  if n < 1:
    raise argparse.ArgumentTypeError(f'{n} samples: give at least 1')
  return n


def main(argv):
  p = argparse.ArgumentParser(prog='plot.py', description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
  sub = p.add_subparsers(dest='what', required=True)
  k = sub.add_parser('kernel')
  k.add_argument('matrix')
  k.add_argument('labels')
  k.add_argument('--count', type=positive, default=2000)
  k.add_argument('--title', default='')
  k.add_argument('--out', required=True)
  t = sub.add_parser('train')
  t.add_argument('log')
  t.add_argument('--title', default='')
  t.add_argument('--out', required=True)
  opts = p.parse_args(argv[1:])
  (plot_kernel if opts.what == 'kernel' else plot_train)(opts)
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv))
