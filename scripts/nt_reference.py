#!/usr/bin/env python3
"""Generate reference NNGP/NTK kernels with neural-tangents for ntkd's tests.

Run through scripts/nt_reference.sh, which provides the pinned environment.

Usage: nt_reference.py [OUTPUT]   (default: tests/data/ref_fc.txt)

Output format (parsed by the C tests):

    # comments
    case <name>
    arch <architecture string in ntkd syntax>
    shape <N> <d>
    x
    <N lines of d values, %.17g>
    nngp
    <N lines of N values, %.17g>
    ntk
    <N lines of N values, %.17g>
    end

The kernels are kernel_fn(x, None, ('nngp', 'ntk')) of neural-tangents'
stax in float64 with the default 'ntk' parameterization.

To add architectures (e.g. CNNs later): extend LAYER_BUILDERS with a builder
for each new layer name, and add case specs to a case list.
"""

import re
import sys
import zlib

import jax

jax.config.update('jax_enable_x64', True)

import jaxlib  # noqa: E402
import numpy as np  # noqa: E402
import neural_tangents as nt  # noqa: E402
from neural_tangents import stax  # noqa: E402

DEFAULT_OUTPUT = 'tests/data/ref_fc.txt'
WIDTH = 512  # irrelevant for kernel_fn; any positive width works.


# --------------------------------------------------------------------------
# ntkd architecture syntax -> stax layers
# --------------------------------------------------------------------------

_TOKEN_RE = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:\(([^()]*)\))?')


def parse_arch(arch):
  """Splits an ntkd arch string into [(name, args, kwargs)].

  Layers are whitespace separated; a layer may carry a parenthesised argument
  list (positional numbers and/or key=value numbers), which may itself contain
  whitespace, e.g. "Dense(W_std=1.5, b_std=0.1) Relu LeakyRelu(0.1)".
  """
  layers = []
  pos = 0
  arch = arch.strip()
  while pos < len(arch):
    m = _TOKEN_RE.match(arch, pos)
    if not m or m.end() == pos:
      raise ValueError(f'cannot parse arch at {arch[pos:]!r}')
    name, argstr = m.group(1), m.group(2)
    args, kwargs = [], {}
    if argstr is not None and argstr.strip():
      for item in argstr.split(','):
        item = item.strip()
        if '=' in item:
          k, v = item.split('=', 1)
          kwargs[k.strip()] = float(v)
        else:
          args.append(float(item))
    layers.append((name, args, kwargs))
    pos = m.end()
    while pos < len(arch) and arch[pos].isspace():
      pos += 1
  return layers


def _dense(args, kwargs):
  if args or set(kwargs) != {'W_std', 'b_std'}:
    raise ValueError('reference Dense layers must give exactly W_std= and '
                     f'b_std=, got {args} {kwargs}')
  b_std = kwargs['b_std']
  # stax's "no bias" is b_std=None; b_std=0.0 adds 0.0**2 and gives a
  # bit-identical kernel (checked in check_zero_bias_equivalence).
  return stax.Dense(WIDTH, W_std=kwargs['W_std'],
                    b_std=None if b_std == 0 else b_std)


def _no_args(ctor):
  def build(args, kwargs):
    if args or kwargs:
      raise ValueError(f'{ctor.__name__} takes no arguments')
    return ctor()
  return build


def _leaky_relu(args, kwargs):
  if len(args) != 1 or kwargs:
    raise ValueError('LeakyRelu takes exactly one positional slope')
  return stax.LeakyRelu(args[0])


LAYER_BUILDERS = {
    'Dense': _dense,
    'Relu': _no_args(stax.Relu),
    'LeakyRelu': _leaky_relu,
    'Abs': _no_args(stax.Abs),
    'Erf': _no_args(stax.Erf),  # a=1, b=1, c=0
    'Identity': _no_args(stax.Identity),
}


def build_network(case):
  """Builds the stax (init_fn, apply_fn, kernel_fn) triple for a case spec."""
  layers = []
  for name, args, kwargs in parse_arch(case['arch']):
    if name not in LAYER_BUILDERS:
      raise ValueError(f'unsupported layer {name!r} in case {case["name"]}')
    layers.append(LAYER_BUILDERS[name](args, kwargs))
  return stax.serial(*layers)


# --------------------------------------------------------------------------
# Case specs
# --------------------------------------------------------------------------

def fmt_num(v):
  """Shortest exact decimal for a parameter (repr round-trips), no '.0'."""
  s = repr(float(v))
  return s[:-2] if s.endswith('.0') else s


def dense(w, b):
  return f'Dense(W_std={fmt_num(w)},b_std={fmt_num(b)})'


def mlp(depth, act, w, b):
  """depth Dense layers with `act` between consecutive ones."""
  parts = []
  for i in range(depth):
    if i:
      parts.append(act)
    parts.append(dense(w, b))
  return ' '.join(parts)


def case(name, arch, n=6, d=5, scale=1.0):
  return {'name': name, 'arch': arch, 'n': n, 'd': d, 'scale': scale}


def fc_cases():
  acts = [('relu', 'Relu'), ('erf', 'Erf'), ('leaky', 'LeakyRelu(0.1)'),
          ('abs', 'Abs')]
  w_cycle = [1.0, 1.5, 2.0]
  cases = []
  i = 0
  for depth in range(1, 5):
    for tag, act in acts:
      if depth == 1 and tag != 'relu':
        continue  # depth 1 has no activation: one case per bias suffices
      for b in (0.0, 0.1):
        w = w_cycle[i % len(w_cycle)]
        i += 1
        prefix = 'fc_dense' if depth == 1 else f'fc_{tag}'
        name = f'{prefix}_d{depth}' + ('_b' if b else '')
        cases.append(case(name, mlp(depth, act, w, b)))

  # Ends with an activation.
  cases.append(case('fc_relu_d1_act', f'{dense(1.5, 0.1)} Relu'))
  cases.append(case('fc_erf_d2_act',
                    f'{dense(1.0, 0.0)} Erf {dense(2.0, 0.1)} Erf'))
  # Identity layers.
  cases.append(case('fc_relu_d2_ident',
                    f'{dense(1.5, 0.1)} Relu Identity {dense(1.5, 0.1)}'))
  # Unusual slopes.
  cases.append(case('fc_leakyneg_d3_b', mlp(3, 'LeakyRelu(-0.5)', 1.5, 0.1)))
  cases.append(case('fc_leaky2_d2', mlp(2, 'LeakyRelu(2)', 1.0, 0.0)))
  # Mixed activations and per-layer W/b.
  cases.append(case(
      'fc_mixed_d4_b',
      f'{dense(2.0, 0.5)} Relu {dense(0.5, 0.0)} Erf {dense(1.25, 0.05)} '
      f'Abs {dense(1.0, 0.3)}'))
  # Larger N, d and large input variances (x scaled by 3).
  cases.append(case('fc_relu_d3_b_big', mlp(3, 'Relu', 1.5, 0.1),
                    n=9, d=17, scale=3.0))
  cases.append(case('fc_erf_d3_b_big', mlp(3, 'Erf', 2.0, 0.1),
                    n=9, d=17, scale=3.0))
  cases.append(case('fc_abs_d4_big', mlp(4, 'Abs', 1.0, 0.0),
                    n=9, d=17, scale=3.0))
  cases.append(case('fc_leaky_d2_b_big', mlp(2, 'LeakyRelu(0.1)', 1.5, 0.1),
                    n=9, d=17, scale=3.0))
  return cases


# --------------------------------------------------------------------------
# Computation and output
# --------------------------------------------------------------------------

def case_inputs(c):
  # Per-case seed from the name: adding/reordering cases never changes the
  # inputs of existing ones.
  rng = np.random.RandomState(zlib.crc32(c['name'].encode()) & 0x7fffffff)
  x = rng.standard_normal((c['n'], c['d'])) * c['scale']
  # Quantise to multiples of 1/8: every product and partial sum of x.x' is
  # then exact in float64, so neural-tangents' nngp[i,i] (a dot product) and
  # cov1[i] (a separate sum of squares) agree bit for bit. With unquantised
  # inputs they differ by an ulp, which the ReLU angle theta = atan2(sq, q12)
  # amplifies to ~1e-8 noise on the NTK diagonal, above the 1e-10 test bound.
  x = np.round(x * 8.0) / 8.0
  return np.asarray(x, dtype=np.float64)


def compute(c, x):
  _, _, kernel_fn = build_network(c)
  nngp, ntk = kernel_fn(x, None, ('nngp', 'ntk'))
  nngp = np.asarray(nngp, dtype=np.float64)
  ntk = np.asarray(ntk, dtype=np.float64)
  n = x.shape[0]
  assert nngp.shape == (n, n) and ntk.shape == (n, n), (nngp.shape, ntk.shape)
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


def fmt_row(row):
  return ' '.join('%.17g' % v for v in row)


def write_case(out, c, x, nngp, ntk):
  out.write(f'case {c["name"]}\n')
  out.write(f'arch {c["arch"]}\n')
  out.write(f'shape {x.shape[0]} {x.shape[1]}\n')
  for label, mat in (('x', x), ('nngp', nngp), ('ntk', ntk)):
    out.write(label + '\n')
    for row in mat:
      out.write(fmt_row(row) + '\n')
  out.write('end\n')


def main(argv):
  if len(argv) > 2:
    sys.stderr.write(__doc__)
    return 2
  path = argv[1] if len(argv) > 1 else DEFAULT_OUTPUT
  cases = fc_cases()
  names = [c['name'] for c in cases]
  assert len(set(names)) == len(names), 'duplicate case names'

  check_zero_bias_equivalence(np.random.RandomState(0).standard_normal((4, 3)))

  with open(path, 'w') as out:
    out.write('# generator: scripts/nt_reference.py (ntkd)\n')
    out.write(f'# neural-tangents {nt.__version__}\n')
    out.write(f'# jax {jax.__version__}\n')
    out.write(f'# jaxlib {jaxlib.__version__}\n')
    out.write(f'# numpy {np.__version__}\n')
    out.write("# kernel_fn(x, None, ('nngp', 'ntk')), float64, "
              "parameterization='ntk'\n")
    out.write('# x: per-case np.random.RandomState(crc32(name)) standard '
              'normal, times a scale, rounded to multiples of 1/8\n')
    for c in cases:
      x = case_inputs(c)
      nngp, ntk = compute(c, x)
      out.write('\n')
      write_case(out, c, x, nngp, ntk)
  print(f'wrote {len(cases)} cases to {path}', file=sys.stderr)
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv))
