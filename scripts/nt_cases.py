"""The reference cases of scripts/nt_reference.py: each a network in ntkd's
architecture syntax, turned into stax calls, and its inputs. Written
against a `stax` module that the importer sets (`nt_cases.stax = ...`):
neural-tangents' own to write the references (scripts/nt_reference.py),
ntkd's (`from ntkd import stax`) to check ntkd's Python package against
them (tests/python/test_refcases.py). Needs numpy only.
"""

import re
import zlib

import numpy as np

stax = None  # set by the importer

WIDTH = 512  # irrelevant for kernel_fn; any positive width works.


# --------------------------------------------------------------------------
# ntkd architecture syntax -> stax layers
# --------------------------------------------------------------------------

_TOKEN_RE = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:\(([^()]*)\))?')


def _value(v):
  """A number, True/False, or a [list] of numbers."""
  if v in ('True', 'False'):
    return v == 'True'
  if v.startswith('['):
    return [float(x) for x in v.strip('[]').split(',') if x.strip()]
  return float(v)


def parse_arch(arch):
  """Splits an ntkd arch string into [(name, args, kwargs)].

  Layers are whitespace separated; a layer may carry a parenthesised argument
  list (positional numbers or bare words such as SAME, and/or key=value
  numbers), which may itself contain whitespace, e.g.
  "Dense(W_std=1.5, b_std=0.1) Relu LeakyRelu(0.1) Conv(3,1,SAME,...)".
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
      # commas inside [...] belong to a list value
      for item in re.split(r',(?![^\[]*\])', argstr):
        item = item.strip()
        if '=' in item:
          k, v = item.split('=', 1)
          kwargs[k.strip()] = _value(v.strip())
        elif re.fullmatch(r'[A-Za-z_][A-Za-z0-9_]*', item) and item not in ('True', 'False'):
          args.append(item)  # a bare word, e.g. a padding mode
        else:
          args.append(_value(item))
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


def _no_args(name):
  def build(args, kwargs):
    if args or kwargs:
      raise ValueError(f'{name} takes no arguments')
    return getattr(stax, name)()
  return build


def _leaky_relu(args, kwargs):
  if len(args) != 1 or kwargs:
    raise ValueError('LeakyRelu takes exactly one positional slope')
  return stax.LeakyRelu(args[0])


def _int_arg(v, what):
  if isinstance(v, str) or v != int(v) or v < 1:
    raise ValueError(f'{what} must be a positive integer, got {v!r}')
  return int(v)


def _conv(args, kwargs):
  if (len(args) != 3 or set(kwargs) != {'W_std', 'b_std'} or
      args[2] not in ('SAME', 'VALID', 'CIRCULAR')):
    raise ValueError('reference Conv layers must be Conv(f,stride,PADDING,'
                     f'W_std=w,b_std=b), got {args} {kwargs}')
  f = _int_arg(args[0], 'Conv filter size')
  stride = _int_arg(args[1], 'Conv stride')
  b_std = kwargs['b_std']
  # Default NHWC / HWIO dimension numbers; out_chan is irrelevant to kernel_fn
  # in the 'ntk' parameterization.
  return stax.Conv(WIDTH, (f, f), (stride, stride), padding=args[2],
                   W_std=kwargs['W_std'], b_std=None if b_std == 0 else b_std)


def _avg_pool(args, kwargs):
  if len(args) != 2 or kwargs:
    raise ValueError('AvgPool takes exactly (window, stride)')
  w = _int_arg(args[0], 'AvgPool window')
  s = _int_arg(args[1], 'AvgPool stride')
  # stax defaults: strides=None (= 1), padding='VALID', normalize_edges=False;
  # all given explicitly here.
  return stax.AvgPool((w, w), strides=(s, s), padding='VALID',
                      normalize_edges=False)


def _map(name):
  """A nonlinearity with stax's own parameters, positional or keyword."""
  def build(args, kwargs):
    return getattr(stax, name)(*args, **kwargs)
  return build


def _degree(name):
  def build(args, kwargs):
    if len(args) != 1 or kwargs or args[0] != int(args[0]):
      raise ValueError(f'{name} takes one integer degree')
    return getattr(stax, name)(int(args[0]))
  return build


def _sum_pool(args, kwargs):
  if len(args) != 2 or kwargs:
    raise ValueError('SumPool takes exactly (window, stride)')
  w = _int_arg(args[0], 'SumPool window')
  s = _int_arg(args[1], 'SumPool stride')
  return stax.SumPool((w, w), strides=(s, s), padding='VALID')


LAYER_BUILDERS = {
    'Dense': _dense,
    'Conv': _conv,
    'AvgPool': _avg_pool,
    'Flatten': _no_args('Flatten'),
    'GlobalAvgPool': _no_args('GlobalAvgPool'),
    'Relu': _no_args('Relu'),
    'LeakyRelu': _leaky_relu,
    'Abs': _no_args('Abs'),
    'Erf': _map('Erf'),  # a=1, b=1, c=0 unless given
    'ABRelu': _map('ABRelu'),
    'Sigmoid_like': _no_args('Sigmoid_like'),
    'Gelu': _no_args('Gelu'),
    'Sin': _map('Sin'),
    'Cos': _map('Cos'),
    'Rbf': _map('Rbf'),
    'Exp': _map('Exp'),
    'ExpNormalized': _map('ExpNormalized'),
    'Gaussian': _map('Gaussian'),
    'Sign': _no_args('Sign'),
    'Monomial': _degree('Monomial'),
    'RectifiedMonomial': _degree('RectifiedMonomial'),
    'Hermite': _degree('Hermite'),
    'Gabor': _no_args('Gabor'),
    'Polynomial': _map('Polynomial'),
    'LayerNorm': _map('LayerNorm'),
    'SumPool': _sum_pool,
    'GlobalSumPool': _no_args('GlobalSumPool'),
    'Identity': _no_args('Identity'),
}


def split_layers(arch):
  """Top-level layers of an arch string: split on whitespace outside
  brackets, so "Conv(32, (3, 3)) Relu" gives two."""
  out, depth, cur = [], 0, ''
  for ch in arch:
    if ch in '([':
      depth += 1
    elif ch in ')]':
      depth -= 1
    if ch.isspace() and depth == 0:
      if cur:
        out.append(cur)
      cur = ''
    else:
      cur += ch
  if cur:
    out.append(cur)
  return out


def _balanced(text, i):
  """Index just past the bracket group opening at text[i]."""
  depth = 0
  for j in range(i, len(text)):
    if text[j] in '([':
      depth += 1
    elif text[j] in ')]':
      depth -= 1
      if depth == 0:
        return j + 1
  raise ValueError(f'unbalanced brackets in {text!r}')


def _stax_items(text, standard=False):
  """The layers of a sequence (whitespace or commas between them) as
  Python expressions for stax: serial(...) and parallel(a, b) nest, a
  branch of several layers is a serial, [...]*k repeats."""
  items, i = [], 0
  while i < len(text):
    c = text[i]
    if c.isspace() or c == ',':
      i += 1
      continue
    if c == '[':
      j = _balanced(text, i)
      m = re.match(r'\s*\*\s*(\d+)', text[j:])
      inner = _stax_items(text[i + 1:j - 1], standard)
      items += inner * (int(m.group(1)) if m else 1)
      i = j + (m.end() if m else 0)
      continue
    m = re.match(r'[A-Za-z_][A-Za-z0-9_]*', text[i:])
    if not m:
      raise ValueError(f'cannot read {text[i:]!r}')
    name, i = m.group(0), i + m.end()
    if i < len(text) and text[i] == '(':
      j = _balanced(text, i)
      args = text[i + 1:j - 1]
      i = j
    else:
      args = None
    if name == 'serial':
      items.append('stax.serial(' + ', '.join(_stax_items(args, standard)) + ')')
    elif name == 'parallel':
      branches, depth, cur = [], 0, ''
      for ch in args:
        if ch in '([':
          depth += 1
        elif ch in ')]':
          depth -= 1
        if ch == ',' and depth == 0:
          branches.append(cur)
          cur = ''
        else:
          cur += ch
      branches.append(cur)
      exprs = []
      for b in branches:
        sub_items = _stax_items(b, standard)
        exprs.append(sub_items[0] if len(sub_items) == 1 else 'stax.serial(' + ', '.join(sub_items) + ')')
      items.append('stax.parallel(' + ', '.join(exprs) + ')')
    else:
      if standard and name in ('Dense', 'Conv', 'ConvLocal', 'ConvTranspose'):
        args = (args + ', ' if args and args.strip() else '') + "parameterization='standard'"
      items.append(f'stax.{name}({args or ""})')
  return items


def stax_scope():
  """The names a stax-syntax arch may use besides stax's layers."""
  return {'stax': stax, 'None': None, 'Slice': stax.Slice}


def build_stax_syntax(arch, standard=False):
  """An arch written in stax's own syntax (tuples, strides=, quoted
  padding, widths): each layer is evaluated as the stax call it spells,
  so the reference is what stax makes of exactly that text. With
  `standard`, every Dense and Conv gets parameterization='standard'."""
  if any(w in arch for w in ('FanOut', 'serial', 'parallel')):
    return eval('stax.serial(' + ', '.join(_stax_items(arch, standard)) + ')', stax_scope())
  layers = []
  for text in split_layers(arch):
    call = text if '(' in text else text + '()'
    if standard and call.split('(')[0] in ('Dense', 'Conv', 'ConvLocal', 'ConvTranspose'):
      call = call[:-1] + (", " if call[-2] != '(' else '') + "parameterization='standard')"
    layers.append(eval('stax.' + call, stax_scope()))
  return stax.serial(*layers)


def build_network(case):
  """Builds the stax (init_fn, apply_fn, kernel_fn) triple for a case spec."""
  if case.get('stax_syntax'):
    return build_stax_syntax(case['arch'], case.get('standard', False))
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
  cases += map_fc_cases()
  return cases


# Every nonlinearity with a closed form, each with parameters away from its
# defaults where it has them: (tag, ntkd spelling, input scale).
MAPS = [
    ('abrelu', 'ABRelu(-0.3,1.7)', 1.0),
    ('erf_abc', 'Erf(1.5,0.7,0.2)', 1.0),
    ('sigmoid', 'Sigmoid_like', 1.0),
    ('gelu', 'Gelu', 1.0),
    ('sin', 'Sin(1.3,0.8,0.3)', 1.0),
    ('cos', 'Cos(0.9,1.2,-0.2)', 1.0),
    ('rbf', 'Rbf(0.7)', 1.0),
    ('exp', 'Exp(0.8,0.5)', 0.6),  # 3 layers of exp grow fast: float32 overflows near 1e38
    ('expnorm', 'ExpNormalized(1.2,-0.8)', 1.0),
    ('expnorm_clip', 'ExpNormalized(gamma=0.9,shift=-1,do_clip=True)', 1.0),
    ('gaussian', 'Gaussian(1.1,-0.7)', 1.0),
    ('sign', 'Sign', 1.0),
    ('mono2', 'Monomial(2)', 1.0),
    ('mono3', 'Monomial(3)', 1.0),
    ('mono5', 'Monomial(5)', 0.7),
    ('poly', 'Polynomial([0.3,1,-0.5,0.2])', 1.0),
    ('hermite3', 'Hermite(3)', 1.0),
    ('gabor', 'Gabor', 1.0),  # exp(-x^2) sin(x)
]


def map_fc_cases():
  out = []
  for tag, act, scale in MAPS:
    out.append(case(f'fc_{tag}_d3_b', mlp(3, act, 1.5, 0.1), scale=scale))
    out.append(case(f'fc_{tag}_d2_act', f'{dense(1.2, 0.0)} {act}', n=5, d=7, scale=scale))
  # Gabor at pre-activation variances up to ~40 (its kernel's exponentials
  # and den^(5/2) far from 1).
  out.append(case('fc_gabor_large_var', mlp(3, 'Gabor', 2.0, 0.5), scale=3.0))
  # LayerNorm after Dense (it needs a Gaussian input), then nonlinearities.
  out.append(case('fc_layernorm_d3_b', f'{dense(1.5, 0.1)} LayerNorm Relu {dense(2.0, 0.3)} LayerNorm(eps=0.5) '
                  f'Erf {dense(1.2, 0.1)} LayerNorm', scale=2.0))
  # Residual blocks (stax's combinators), evaluated as stax's own calls.
  for name, arch in (
      ('fc_residual_sum', 'Dense(64, W_std=1.5, b_std=0.1) FanOut(2) parallel(serial(Relu, Dense(64, W_std=1.3, '
       'b_std=0.1), Relu, Dense(64, W_std=1.1)), Identity) FanInSum Relu Dense(1, W_std=1.2, b_std=0.05)'),
      ('fc_residual_nested3', 'Dense(8, W_std=1.2) FanOut(3) parallel(Identity, serial(Erf Dense(8, W_std=2.0)), '
       'serial(FanOut(2), parallel(serial(Gelu, Dense(8, b_std=0.3)), Dense(8, W_std=0.7)), FanInSum)) FanInSum '
       'Gelu Dense(2)'),
      ('fc_residual_concat', 'Dense(16, W_std=1.3) FanOut(2) parallel(serial(Relu, Dense(16, W_std=1.5, '
       'b_std=0.2)), Dense(16, W_std=0.8)) FanInConcat Dense(1)'),
      ('fc_residual_repeat', 'Dense(8, W_std=1.4, b_std=0.1) [FanOut(2) parallel(serial(Relu Dense(8, W_std=1.5)), '
       'Identity) FanInSum]*3 Relu Dense(1)'),
      # FanInConcat of unequal widths: stax weights each branch by its width.
      ('fc_residual_concat_widths', 'Dense(16, W_std=1.3) FanOut(3) parallel(serial(Relu, Dense(32, W_std=1.5, '
       'b_std=0.2)), Identity, serial(Erf, Dense(8, W_std=0.8))) FanInConcat Dense(8, W_std=1.2) Relu Dense(1)'),
      ('fc_residual_concat_input', 'FanOut(2) parallel(Dense(16, W_std=1.4, b_std=0.1), Identity) FanInConcat '
       'Dense(4, W_std=1.1) Relu Dense(1)'),
      # FanInProd: the kernels multiply entry by entry, the NTK by the
      # product rule; its branches need not end Gaussian, its output is not
      # (a Dense before the next nonlinearity); three branches and a nested
      # product.
      ('fc_prod', 'Dense(16, W_std=1.3, b_std=0.1) FanOut(2) parallel(serial(Relu, Dense(16, W_std=1.5, '
       'b_std=0.2)), Dense(16, W_std=0.8)) FanInProd Dense(8, W_std=1.2) Relu Dense(1)'),
      ('fc_prod_nonlinear_branches', 'Dense(8, W_std=1.5, b_std=0.1) FanOut(2) parallel(Relu, Erf) FanInProd '
       'Dense(4, W_std=1.1) Gelu Dense(1)'),
      ('fc_prod3_nested', 'Dense(8, W_std=1.2) FanOut(3) parallel(Identity, serial(Erf Dense(8, W_std=2.0)), '
       'serial(FanOut(2), parallel(Dense(8, b_std=0.3), Identity), FanInProd)) FanInProd Dense(4, b_std=0.1) Erf '
       'Dense(1)'),
      # Dropout(rate, mode='train'): a sample's own entries (the matrix's
      # diagonal, and every variance after it) times 1/rate; its output is
      # not Gaussian (a Dense before the next nonlinearity); mode='test' is
      # the identity; twice, last, inside a block.
      ('fc_dropout', "Dense(16, W_std=1.3, b_std=0.1) Relu Dense(16, W_std=1.5, b_std=0.1) Dropout(0.8) "
       "Dense(8, W_std=1.2) Relu Dense(1)"),
      ('fc_dropout_twice_last', "Dense(8, W_std=1.5) Dropout(0.5) Dense(8, W_std=1.1, b_std=0.2) Erf Dense(4) "
       "Dropout(0.9, mode='train')"),
      ('fc_dropout_test', "Dense(8, W_std=1.4, b_std=0.1) Relu Dropout(0.3, mode='test') Dense(4, W_std=1.2) "
       "Dropout(rate=0.7) Dense(1)"),
      ('fc_dropout_block', "Dense(16, W_std=1.3) FanOut(2) parallel(serial(Relu, Dense(16, W_std=1.5), "
       "Dropout(0.6)), Identity) FanInProd Dense(8, b_std=0.1) Gelu Dense(1)"),
      # LayerNorm's axis on vectors: the features, 1 or -1.
      ('fc_layernorm_axis1', "Dense(16, W_std=1.5, b_std=0.1) LayerNorm(axis=(1,)) Relu Dense(8, W_std=1.2) "
       "LayerNorm((-1,), 0.1) Erf Dense(1)"),
  ):
    out.append(dict(case(name, arch, n=6, d=7), stax_syntax=True))
  # Standard parameterisation (stax's syntax, every Dense with
  # parameterization='standard'): the widths scale the NTK; a bias given as
  # a number, even 0, adds 1 to it, None does not.
  for name, arch in (
      ('fc_standard_d3_b', 'Dense(64, W_std=1.5, b_std=0.1) Relu Dense(32, W_std=1.2, b_std=0.0) Erf Dense(3)'),
      ('fc_standard_d3_nobias', 'Dense(16, W_std=1.3) Gelu Dense(128, W_std=0.9, b_std=None) Relu Dense(1, b_std=0.2)'),
      ('fc_standard_residual', 'Dense(32, W_std=1.5, b_std=0.1) FanOut(2) parallel(serial(Relu, Dense(64, W_std=1.3), '
       'Relu, Dense(32, W_std=1.1, b_std=0.0)), Identity) FanInSum Relu Dense(1)'),
      ('fc_standard_concat', 'Dense(16, W_std=1.5, b_std=0.1) FanOut(2) parallel(serial(Relu, Dense(32, W_std=1.3)), '
       'Identity) FanInConcat Dense(8, W_std=1.2) Relu Dense(1)'),
      ('fc_standard_prod', 'Dense(16, W_std=1.5, b_std=0.1) FanOut(2) parallel(serial(Relu, Dense(16, W_std=1.3)), '
       'Identity) FanInProd Dense(8, W_std=1.2, b_std=0.0) Relu Dense(1)'),
      ('fc_standard_dropout', 'Dense(16, W_std=1.5, b_std=0.1) Relu Dense(32, W_std=1.3) Dropout(0.75) '
       'Dense(8, W_std=1.2, b_std=0.0) Relu Dense(1)'),
  ):
    out.append(dict(case(name, arch, n=6, d=9), stax_syntax=True, standard=True))
  # RectifiedMonomial: stax's own kernel is NaN on the diagonal, and so
  # everywhere after a second such layer (compute()): one layer, with and
  # without a Dense after it.
  for n in (0, 1, 3):
    out.append(dict(case(f'fc_rectmono{n}_d2_b', f'{dense(1.3, 0.1)} RectifiedMonomial({n}) {dense(1.1, 0.2)}',
                         n=7, d=5), nan_diag=True))
    out.append(dict(case(f'fc_rectmono{n}_act', f'{dense(0.9, 0.0)} RectifiedMonomial({n})', n=6, d=4),
                    nan_diag=True))
  return out


def map_cnn_cases():
  small = (4, 6, 6, 2)
  out = []
  for tag, act, scale in MAPS:
    # GlobalAvgPool after stride-1 SAME convolutions (the slice paths), and a
    # Flatten readout without pooling (the same-position path).
    out.append(image_case(
        f'cnn_{tag}_gap_b',
        f'{conv(3, 1, "SAME", 1.5, 0.1)} {act} {conv(3, 1, "SAME", 1.5, 0.1)} '
        f'{act} GlobalAvgPool {dense(1.5, 0.1)}', small, scale=scale))
    out.append(image_case(
        f'cnn_{tag}_flat',
        f'{conv(3, 1, "VALID", 1.3, 0)} {act} Flatten {dense(1.0, 0)} {act} '
        f'{dense(1.0, 0.1)}', small, scale=scale))
  return out


def conv(f, stride, padding, w, b):
  return (f'Conv({f},{stride},{padding},W_std={fmt_num(w)},'
          f'b_std={fmt_num(b)})')


def image_case(name, arch, shape, scale=1.0):
  """shape = (N, H, W, C); inputs are NHWC."""
  return {'name': name, 'arch': arch, 'shape': tuple(shape), 'scale': scale}


def wrn_arch(block_size, k, num_classes, pool):
  """neural-tangents' README WideResnet (stax.WideResnet in its docs:
  WideResnetBlock / WideResnetGroup / WideResnet) in ntkd's syntax, which
  is stax's: the first block of each group has a Conv shortcut, the
  others Identity; AvgPool((pool, pool)) at the end (8 on 32 x 32)."""
  def block(ch, s, conv_shortcut):
    strides = f'({s}, {s})'
    main = (f"serial(Relu, Conv({ch}, (3, 3), {strides}, padding='SAME'), Relu, "
            f"Conv({ch}, (3, 3), padding='SAME'))")
    short = f"Conv({ch}, (3, 3), {strides}, padding='SAME')" if conv_shortcut else 'Identity'
    return f'FanOut(2) parallel({main}, {short}) FanInSum'

  def group(ch, s):
    out = block(ch, s, True)
    if block_size > 1:
      out += f' [{block(ch, 1, False)}]*{block_size - 1}'
    return out

  return (f"Conv(16, (3, 3), padding='SAME') {group(16 * k, 1)} {group(32 * k, 2)} {group(64 * k, 2)} "
          f"AvgPool(({pool}, {pool})) Flatten Dense({num_classes}, W_std=1.0, b_std=0.0)")


def cnn_cases():
  small = (4, 6, 6, 2)   # N, H, W, C
  large = (3, 8, 8, 3)
  tiny = (4, 4, 4, 1)
  rect = (4, 5, 7, 2)    # non-square images
  gap, flat = 'GlobalAvgPool', 'Flatten'

  def two_conv(f, stride, padding, act, w, b, readout, w_out=None):
    """conv act conv act readout Dense; only the first conv has `stride`."""
    parts = [conv(f, stride, padding, w, b), act, conv(f, 1, padding, w, b),
             act, readout]
    parts.append(dense(w if w_out is None else w_out, b))
    return ' '.join(parts)

  c = image_case
  cases = [
      # Each padding mode, Relu and Erf, GlobalAvgPool readout.
      c('cnn_same_relu_gap', two_conv(3, 1, 'SAME', 'Relu', 1.5, 0, gap),
        small),
      c('cnn_same_relu_gap_b', two_conv(3, 1, 'SAME', 'Relu', 1.5, 0.1, gap),
        large),
      c('cnn_same_erf_gap', two_conv(3, 1, 'SAME', 'Erf', 1.0, 0, gap), small),
      c('cnn_same_erf_gap_b', two_conv(3, 1, 'SAME', 'Erf', 2.0, 0.1, gap),
        large),
      c('cnn_valid_relu_gap_b', two_conv(3, 1, 'VALID', 'Relu', 1.5, 0.1, gap),
        large),
      c('cnn_valid_erf_gap', two_conv(3, 1, 'VALID', 'Erf', 1.0, 0, gap),
        small),
      c('cnn_circ_relu_gap_b',
        two_conv(3, 1, 'CIRCULAR', 'Relu', 2.0, 0.1, gap), small),
      c('cnn_circ_erf_gap_b', two_conv(3, 1, 'CIRCULAR', 'Erf', 1.5, 0.05, gap),
        large),
      # Stride 2 (SAME with stride 2 pads asymmetrically: 6 -> 3 pads (0, 1),
      # 5 -> 3 pads (1, 1), 7 -> 4 pads (1, 1)).
      c('cnn_same_s2_relu_gap_b',
        two_conv(3, 2, 'SAME', 'Relu', 1.5, 0.1, gap), small),
      c('cnn_same_s2_relu_gap', two_conv(3, 2, 'SAME', 'Relu', 2.0, 0, gap),
        large),
      c('cnn_valid_s2_relu_gap_b',
        f'{conv(3, 2, "VALID", 1.5, 0.1)} Relu {conv(2, 1, "VALID", 1.5, 0.1)}'
        f' Relu {gap} {dense(1.5, 0.1)}', large),
      c('cnn_circ_s2_erf_gap_b',
        two_conv(3, 2, 'CIRCULAR', 'Erf', 1.5, 0.1, gap), small),
      # Even and larger filters (SAME with f=2 pads (0, 1), f=4 pads (1, 2)).
      c('cnn_f2_same_relu_gap_b',
        two_conv(2, 1, 'SAME', 'Relu', 1.5, 0.1, gap), small),
      c('cnn_f2_valid_erf_gap', two_conv(2, 1, 'VALID', 'Erf', 2.0, 0, gap),
        small),
      c('cnn_f4_circ_relu_gap_b',
        two_conv(4, 1, 'CIRCULAR', 'Relu', 1.5, 0.1, gap), small),
      c('cnn_f5_same_relu_gap', two_conv(5, 1, 'SAME', 'Relu', 1.0, 0, gap),
        large),
      # Non-square images.
      c('cnn_rect_same_relu_gap_b',
        two_conv(3, 1, 'SAME', 'Relu', 1.5, 0.1, gap), rect),
      c('cnn_rect_s2_relu_gap_b',
        two_conv(3, 2, 'SAME', 'Relu', 1.5, 0.1, gap), rect),
      c('cnn_rect_valid_s2_erf_flat',
        f'{conv(3, 2, "VALID", 1.5, 0)} Erf {conv(2, 1, "VALID", 1.5, 0)} '
        f'Erf {flat} {dense(1.5, 0)}', rect),
      # Average pooling between conv stages.
      c('cnn_myrtle_relu_b',
        f'{conv(3, 1, "SAME", 1.5, 0.1)} Relu AvgPool(2,2) '
        f'{conv(3, 1, "SAME", 1.5, 0.1)} Relu {gap} {dense(1.5, 0.1)}', large),
      c('cnn_pool3_relu',
        f'{conv(3, 1, "SAME", 2.0, 0)} Relu AvgPool(3,1) '
        f'{conv(3, 1, "SAME", 2.0, 0)} Relu {gap} {dense(1.0, 0)}', small),
      c('cnn_pool2s1_erf_flat_b',
        f'{conv(3, 1, "SAME", 1.5, 0.1)} Erf AvgPool(2,1) '
        f'{conv(3, 1, "VALID", 1.5, 0.1)} Erf {flat} {dense(1.5, 0.1)}',
        small),
      c('cnn_pool_first_relu_gap_b',
        f'AvgPool(2,2) {conv(3, 1, "SAME", 1.5, 0.1)} Relu {gap} '
        f'{dense(1.5, 0.1)}', large),
      # Flatten readouts.
      c('cnn_same_relu_flat_b', two_conv(3, 1, 'SAME', 'Relu', 1.5, 0.1, flat),
        small),
      c('cnn_valid_relu_flat', two_conv(3, 1, 'VALID', 'Relu', 2.0, 0, flat),
        large),
      c('cnn_s2_erf_flat_b',
        f'{conv(3, 2, "SAME", 1.5, 0.1)} Erf {conv(3, 2, "SAME", 1.5, 0.1)} '
        f'Erf {flat} {dense(1.5, 0.1)}', large),
      # Deeper: [Conv Relu] x 4.
      c('cnn_deep4_relu_gap_b',
        ' '.join([f'{conv(3, 1, "SAME", 1.5, 0.1)} Relu'] * 4) +
        f' {gap} {dense(1.5, 0.1)}', small),
      # Other readout shapes.
      c('cnn_same_relu_gap_nodense',
        f'{conv(3, 1, "SAME", 1.5, 0)} Relu {conv(3, 1, "SAME", 1.5, 0)} '
        f'Relu {gap}', small),
      c('cnn_same_relu_gap_mlp_b',
        f'{conv(3, 1, "SAME", 1.5, 0.1)} Relu {conv(3, 1, "SAME", 1.5, 0.1)} '
        f'Relu {gap} {dense(1.5, 0.1)} Relu {dense(1.5, 0.1)}', large),
      c('cnn_conv_gap', f'{conv(3, 1, "SAME", 1.0, 0)} {gap}', small),
      # Other activations, tiny single-channel images, large variances.
      c('cnn_leaky_gap_b',
        two_conv(3, 1, 'SAME', 'LeakyRelu(0.1)', 1.5, 0.1, gap), small),
      c('cnn_abs_flat', two_conv(3, 1, 'VALID', 'Abs', 1.0, 0, flat), small),
      c('cnn_tiny_relu_gap_b', two_conv(3, 1, 'SAME', 'Relu', 1.5, 0.1, gap),
        tiny),
      c('cnn_tiny_circ_erf_flat',
        two_conv(3, 1, 'CIRCULAR', 'Erf', 2.0, 0, flat), tiny),
      c('cnn_erf_gap_b_big', two_conv(3, 1, 'SAME', 'Erf', 1.5, 0.1, gap),
        small, scale=3.0),
  ]
  # Written as stax users write them (see build_stax_syntax): ntkd must read
  # the same network from the same text.
  cases += [
      dict(c('cnn_stax_syntax_pool_flat',
             "Conv(32, (3, 3), padding='SAME', W_std=1.5, b_std=0.1) Relu AvgPool((2, 2)) "
             "Conv(16, (3, 3), strides=(2, 2), padding='SAME', W_std=1.5, b_std=None) Relu Flatten "
             "Dense(10, W_std=1.2, b_std=0.1)", large), stax_syntax=True),
      dict(c('cnn_stax_syntax_strided_gap',
             "Conv(8, (3, 3), (2, 2), 'VALID', W_std=2.0) Erf AvgPool((2, 2), strides=(2, 2)) "
             "Conv(8, filter_shape=(2, 2), padding='CIRCULAR', b_std=0.2) Gelu GlobalAvgPool Dense(512, W_std=1.1)",
             (3, 9, 9, 2)), stax_syntax=True),
  ]
  # Sums instead of means: SumPool between stages, GlobalSumPool readouts
  # (the slice paths' sums and the batched one), and stax's spelling.
  cases += [
      c('cnn_sumpool_gsp_b',
        f'{conv(3, 1, "SAME", 1.5, 0.1)} Relu SumPool(2,2) {conv(3, 1, "SAME", 1.2, 0.1)} Relu GlobalSumPool '
        f'{dense(1.1, 0.1)}', large),
      c('cnn_gsp_single', two_conv(3, 1, 'SAME', 'Erf', 1.5, 0.1, 'GlobalSumPool'), small),
      c('cnn_sumpool_s1_flat',
        f'{conv(3, 1, "SAME", 1.5, 0)} Relu SumPool(2,1) {conv(2, 1, "VALID", 1.2, 0.1)} Relu Flatten '
        f'{dense(1.0, 0.1)}', small),
      dict(c('cnn_stax_syntax_sumpool',
             "Conv(8, (3, 3), padding='SAME', W_std=1.5) Relu SumPool((2, 2), strides=(2, 2)) "
             "Conv(8, (2, 2), W_std=1.3, b_std=0.1) Relu GlobalSumPool Dense(4)", large), stax_syntax=True),
  ]
  # Standard parameterisation on images: fan-ins of channels x filter area,
  # a per-position Dense, Flatten's and GlobalAvgPool's widths.
  for name, arch, shape in (
      ('cnn_standard_gap', "Conv(16, (3, 3), padding='SAME', W_std=1.5, b_std=0.1) Relu Dense(8, W_std=1.2) "
       "Relu Conv(4, (2, 2), W_std=1.1, b_std=0.0) Erf GlobalAvgPool Dense(32, W_std=1.3) Relu Dense(2)", small),
      ('cnn_standard_pool_flat', "Conv(8, (3, 3), padding='SAME', W_std=1.5) Relu AvgPool((2, 2), strides=(2, 2)) "
       "Conv(4, (3, 3), strides=(2, 2), padding='SAME', b_std=0.2) Relu Flatten Dense(16, W_std=1.2) Gelu Dense(1)",
       large),
      ('cnn_standard_residual', "Conv(8, (3, 3), padding='SAME', W_std=1.5) FanOut(2) parallel(serial(Relu, "
       "Conv(16, (3, 3), (2, 2), 'SAME', W_std=1.3), Relu, Conv(8, (3, 3), padding='SAME', b_std=0.1)), "
       "Conv(8, (1, 1), (2, 2), 'SAME')) FanInSum Relu GlobalAvgPool Dense(1)", large),
      ('cnn_standard_concat', "Conv(8, (3, 3), padding='SAME', W_std=1.5) FanOut(2) parallel(serial(Relu, "
       "Conv(16, (3, 3), padding='SAME', W_std=1.3)), Identity) FanInConcat Conv(4, (3, 3), padding='SAME', "
       "b_std=0.1) Relu GlobalAvgPool Dense(8) Relu Dense(1)", small),
  ):
    cases.append(dict(c(name, arch, shape), stax_syntax=True, standard=True))
  # Residual blocks: the WideResNet block (identity shortcut), a strided
  # block with a convolutional shortcut, a same-position (Flatten) network,
  # FanInConcat, and neural-tangents' README WideResNet (block size 4,
  # k = 1) at 8 x 8 with its final pooling scaled to the image (wrn_arch).
  cases += [
      dict(c('cnn_residual_block_gap',
             "Conv(8, (3, 3), padding='SAME', W_std=1.5) FanOut(2) parallel(serial(Relu, Conv(8, (3, 3), "
             "padding='SAME', W_std=1.3, b_std=0.1), Relu, Conv(8, (3, 3), padding='SAME')), Identity) FanInSum "
             "Relu GlobalAvgPool Dense(1)", small), stax_syntax=True),
      dict(c('cnn_residual_strided_shortcut',
             "Conv(8, (3, 3), padding='SAME', W_std=1.4) FanOut(2) parallel(serial(Relu, Conv(8, (3, 3), (2, 2), "
             "'SAME', W_std=1.3), Relu, Conv(8, (3, 3), padding='SAME', b_std=0.1)), Conv(8, (3, 3), (2, 2), "
             "'SAME')) FanInSum Relu AvgPool((2, 2)) Flatten Dense(1)", large), stax_syntax=True),
      dict(c('cnn_residual_flat_concat',
             "Conv(8, (3, 3), W_std=1.5) FanOut(2) parallel(serial(Erf, Conv(8, (1, 1), W_std=1.2)), "
             "Conv(8, (1, 1), b_std=0.2)) FanInConcat Flatten Dense(1)", small), stax_syntax=True),
      dict(c('cnn_wrn_8x8', wrn_arch(4, 1, 10, 2), (2, 8, 8, 3)), stax_syntax=True),
      # FanInConcat of unequal widths (stax weights the branches by their
      # widths; an Identity branch has its input's), on the slice path and
      # on the same-position path.
      dict(c('cnn_residual_concat_widths',
             "Conv(8, (3, 3), padding='SAME', W_std=1.5) FanOut(3) parallel(serial(Relu, Conv(16, (3, 3), "
             "padding='SAME', W_std=1.3, b_std=0.1)), Identity, serial(Erf, Conv(4, (1, 1)))) FanInConcat "
             "Conv(8, (3, 3), padding='SAME') Relu GlobalAvgPool Dense(1)", small), stax_syntax=True),
      dict(c('cnn_residual_concat_input_flat',
             "FanOut(2) parallel(Conv(8, (3, 3), padding='SAME', W_std=1.5), Identity) FanInConcat "
             "Conv(8, (3, 3), W_std=1.2, b_std=0.1) Relu Flatten Dense(1)", small), stax_syntax=True),
      # Residual blocks after the readout, in the fully-connected tail.
      dict(c('cnn_tail_residual_flat',
             "Conv(8, (3, 3), W_std=1.5) Relu Flatten Dense(16, W_std=1.2) FanOut(2) parallel(serial(Relu, "
             "Dense(16, W_std=1.3, b_std=0.1)), Identity) FanInSum Relu Dense(1)", small), stax_syntax=True),
      dict(c('cnn_tail_residual_gap_concat',
             "Conv(8, (3, 3), padding='SAME', W_std=1.4) Relu GlobalAvgPool Dense(16, b_std=0.1) FanOut(2) "
             "parallel(serial(Erf, Dense(32, W_std=1.5)), Identity) FanInConcat Dense(4) Relu Dense(1)", small),
           stax_syntax=True),
  ]
  # FanInConcat along a spatial axis (issue 29): the branches' covariances
  # block-diagonal over the concatenated positions, the image grows; rows
  # and columns, branches of different lengths (a strided one), negative
  # and positive axes, a nonlinearity after it (the output is Gaussian),
  # Flatten and GlobalAvgPool readouts, 1-D data. (With Erf or Gelu in
  # cnn_concat_cols_strided_flat, neural-tangents' NTK diagonal is off by
  # up to 6.4e-10, its NNGP and off-diagonal NTK within 1e-16: for a
  # Flatten readout it takes its diagonal_spatial path, where nngp[i,i]
  # and cov1[i] come out of Erf/Gelu one ulp apart, and the last Relu's
  # angle amplifies the ulp. ntkd agrees with the independent 40-digit
  # reference of scripts/concat_reference.py to 5e-16, tested against it
  # in tests/data/ref_concat.txt; Relu here keeps neural-tangents exact.)
  cases += [
      dict(c('cnn_concat_rows_gap',
             "Conv(8, (3, 3), padding='SAME', W_std=1.5) FanOut(2) parallel(serial(Relu, Conv(8, (3, 3), "
             "padding='SAME', W_std=1.3, b_std=0.1)), Conv(8, (1, 1), b_std=0.2)) FanInConcat(axis=1) Relu "
             "Conv(4, (3, 3), padding='SAME') Relu GlobalAvgPool Dense(1)", small), stax_syntax=True),
      dict(c('cnn_concat_cols_strided_flat',
             "Conv(8, (3, 3), padding='SAME', W_std=1.4) FanOut(3) parallel(Conv(8, (3, 3), strides=(1, 2), "
             "padding='SAME', W_std=1.2), Identity, serial(Relu, Conv(8, (1, 2), W_std=1.1, b_std=0.1))) "
             "FanInConcat(axis=-2) Relu Conv(4, (2, 3), strides=(2, 1), W_std=1.3) Relu Flatten Dense(1)", small),
           stax_syntax=True),
      dict(c('cnn_concat_pool_rows_flat',
             "Conv(8, (3, 3), padding='SAME', W_std=1.5) FanOut(2) parallel(Identity, AvgPool((2, 1), "
             "strides=(2, 1))) FanInConcat(-3) Conv(8, (3, 3), W_std=1.2, b_std=0.1) Relu Flatten Dense(1)", small),
           stax_syntax=True),
      dict(c('cnn_concat_1d',
             "Conv(8, (3,), padding='SAME', W_std=1.5, b_std=0.1) FanOut(2) parallel(serial(Relu, Conv(8, (3,), "
             "W_std=1.3)), Identity) FanInConcat(axis=1) Relu Conv(4, (3,), padding='SAME') Relu GlobalAvgPool "
             "Dense(1)", (4, 7, 3)), stax_syntax=True, one_d=True),
  ]
  # Rectangular filters, windows and strides, and 1-D convolutions on
  # (N, L, C) sequences (ntkd: [data] layout = NLC, L x 1 images).
  cases += [
      dict(c('cnn_rect_filters',
             "Conv(8, (3, 5), strides=(2, 1), padding='SAME', W_std=1.5, b_std=0.1) Relu Conv(8, (1, 3), "
             "padding='SAME', W_std=1.2) Erf AvgPool((2, 3), strides=(1, 2)) Conv(4, (2, 1), W_std=1.3) Relu "
             "GlobalAvgPool Dense(1)", (3, 7, 9, 2)), stax_syntax=True),
      dict(c('cnn_rect_flat',
             "Conv(8, (1, 3), W_std=1.4) Relu Conv(8, (3, 1), strides=(1, 2), padding='CIRCULAR', b_std=0.1) Gelu "
             "Flatten Dense(1)", (3, 5, 6, 2)), stax_syntax=True),
      dict(c('cnn_1d_gap',
             "Conv(8, (3,), padding='SAME', W_std=1.5, b_std=0.1) Relu Conv(8, (5,), strides=(2,), padding='SAME', "
             "W_std=1.3) Relu AvgPool((2,), strides=(2,)) Conv(4, (3,), padding='SAME') Relu GlobalAvgPool Dense(1)",
             (4, 12, 3)), stax_syntax=True, one_d=True),
      dict(c('cnn_1d_flat',
             "Conv(8, (3,), W_std=1.4) Relu Conv(8, (2,), padding='CIRCULAR', b_std=0.2) Erf Flatten Dense(1, b_std=0.1)",
             (4, 9, 2)), stax_syntax=True, one_d=True),
  ]
  # Pooling with SAME padding: the window's cells in the padding count
  # (normalize_edges=False, stax's default) or not (True); odd sizes, so the
  # padding is uneven; SumPool too.
  for name, arch, shape in (
      ('cnn_avgpool_same_gap', "Conv(8, (3, 3), padding='SAME', W_std=1.5, b_std=0.1) Relu "
       "AvgPool((3, 3), strides=(2, 2), padding='SAME') Conv(8, (3, 3), padding='SAME', W_std=1.2) Relu "
       "GlobalAvgPool Dense(1)", (3, 7, 7, 2)),
      ('cnn_avgpool_same_norm_flat', "Conv(8, (3, 3), padding='SAME', W_std=1.5) Erf "
       "AvgPool((2, 2), strides=(1, 1), padding='SAME', normalize_edges=True) Conv(4, (2, 2), W_std=1.3, b_std=0.1) "
       "Relu AvgPool((3, 3), (2, 2), 'SAME', normalize_edges=True) Flatten Dense(1)", (3, 6, 5, 2)),
      ('cnn_sumpool_same_gap', "Conv(8, (3, 3), W_std=1.5) Relu SumPool((2, 2), strides=(2, 2), padding='SAME') "
       "Conv(4, (2, 2), padding='SAME', W_std=0.7) Relu GlobalAvgPool Dense(1)", (3, 7, 7, 2)),
  ):
    cases.append(dict(c(name, arch, shape), stax_syntax=True))
  # FanInProd: a slice-local block (the batched kernels), strided branches
  # (the full covariance), the same-position path, and the tail.
  cases += [
      dict(c('cnn_prod_slice_gap',
             "Conv(8, (3, 3), padding='SAME', W_std=1.5) FanOut(2) parallel(serial(Relu, Conv(8, (3, 3), "
             "padding='SAME', W_std=1.3, b_std=0.1)), Conv(8, (1, 1), padding='SAME', b_std=0.2)) FanInProd "
             "Conv(8, (3, 3), padding='SAME', W_std=1.2) Relu GlobalAvgPool Dense(1)", small), stax_syntax=True),
      dict(c('cnn_prod_strided_pool',
             "Conv(8, (3, 3), padding='SAME', W_std=1.4) FanOut(2) parallel(serial(Relu, Conv(8, (3, 3), (2, 2), "
             "'SAME', W_std=1.3)), Conv(8, (3, 3), (2, 2), 'SAME', b_std=0.1)) FanInProd AvgPool((2, 2)) Flatten "
             "Dense(1)", large), stax_syntax=True),
      dict(c('cnn_prod_flat',
             "Conv(8, (3, 3), W_std=1.5) FanOut(2) parallel(serial(Erf, Conv(8, (1, 1), W_std=1.2)), "
             "Conv(8, (1, 1), b_std=0.2)) FanInProd Flatten Dense(1)", small), stax_syntax=True),
      dict(c('cnn_tail_prod',
             "Conv(8, (3, 3), padding='SAME', W_std=1.4) Relu GlobalAvgPool Dense(16, b_std=0.1) FanOut(2) "
             "parallel(serial(Erf, Dense(16, W_std=1.5)), Identity) FanInProd Dense(4) Relu Dense(1)", small),
           stax_syntax=True),
  ]
  # Pooling with CIRCULAR padding: the window wraps around the image (stax
  # pads periodically, then pools VALID; normalize_edges has no effect);
  # uneven padding, rectangular windows, SumPool, a window wider than its
  # input, and pooling between runs into GAP (the Myrtle shape, which the
  # batched kernels leave to the pair path).
  for name, arch, shape in (
      ('cnn_avgpool_circ_gap', "Conv(8, (3, 3), padding='SAME', W_std=1.5, b_std=0.1) Relu "
       "AvgPool((3, 3), strides=(2, 2), padding='CIRCULAR') Conv(8, (3, 3), padding='SAME', W_std=1.2) Relu "
       "GlobalAvgPool Dense(1)", (3, 7, 7, 2)),
      ('cnn_sumpool_circ_flat', "Conv(8, (3, 3), W_std=1.5) Erf SumPool((2, 2), strides=(1, 1), padding='CIRCULAR') "
       "Conv(4, (2, 2), W_std=0.7, b_std=0.1) Relu AvgPool((3, 2), (2, 1), 'CIRCULAR', normalize_edges=True) Flatten "
       "Dense(1)", (3, 6, 5, 2)),
      ('cnn_avgpool_circ_wide_flat', "Conv(4, (3, 3), W_std=1.5) Relu AvgPool((5, 5), padding='CIRCULAR') Flatten "
       "Dense(1)", (3, 5, 5, 2)),
      ('cnn_avgpool_circ_myrtle', "Conv(8, (3, 3), padding='SAME', W_std=1.5) Relu AvgPool((2, 2), (2, 2), "
       "'CIRCULAR') Conv(8, (3, 3), padding='SAME', W_std=1.3, b_std=0.1) Relu AvgPool((3, 3), (1, 1), 'CIRCULAR') "
       "Conv(8, (3, 3), padding='SAME') Relu GlobalAvgPool Dense(1)", (3, 8, 8, 3)),
  ):
    cases.append(dict(c(name, arch, shape), stax_syntax=True))
  # Dropout(rate, mode='train'): each image's entries with itself at the
  # same position times 1/rate: in a slice run into GAP, on the
  # same-position path, before strided pooling (the full covariance),
  # inside a slice-local block, and in the tail after the readout.
  cases += [
      dict(c('cnn_dropout_gap',
             "Conv(8, (3, 3), padding='SAME', W_std=1.5, b_std=0.1) Relu Conv(8, (3, 3), padding='SAME', W_std=1.3) "
             "Dropout(0.7) Conv(8, (3, 3), padding='SAME') Relu GlobalAvgPool Dense(1)", small), stax_syntax=True),
      dict(c('cnn_dropout_flat',
             "Conv(8, (3, 3), W_std=1.5) Dropout(0.5) Conv(8, (2, 2), W_std=1.2, b_std=0.1) Erf Flatten Dense(1)",
             small), stax_syntax=True),
      dict(c('cnn_dropout_pool',
             "Conv(8, (3, 3), (2, 2), 'SAME', W_std=1.4) Dropout(0.8) AvgPool((2, 2)) Conv(4, (2, 2), W_std=1.2) "
             "Relu Flatten Dense(1)", large), stax_syntax=True),
      dict(c('cnn_dropout_block',
             "Conv(8, (3, 3), padding='SAME', W_std=1.5) FanOut(2) parallel(serial(Relu, Conv(8, (3, 3), "
             "padding='SAME', W_std=1.3), Dropout(0.75)), Conv(8, (1, 1), padding='SAME', b_std=0.2)) FanInProd "
             "Conv(8, (3, 3), padding='SAME', W_std=1.2) Relu GlobalAvgPool Dense(1)", small), stax_syntax=True),
      dict(c('cnn_tail_dropout',
             "Conv(8, (3, 3), padding='SAME', W_std=1.4) Relu GlobalAvgPool Dense(16, b_std=0.1) Dropout(0.6) "
             "Dense(4) Relu Dense(1) Dropout(0.9)", small), stax_syntax=True),
  ]
  # LayerNorm over positions too (axis with H, W or L besides the
  # channels): each image's variances averaged over those axes; all of
  # them (a slice run into GAP: the batched kernels), rows or columns only
  # (the same-position path), between pooling runs (Myrtle's shape),
  # strided (the full covariance) with a tail LayerNorm, and 1-D.
  cases += [
      dict(c('cnn_layernorm_all_gap',
             "Conv(8, (3, 3), padding='SAME', W_std=1.5, b_std=0.1) LayerNorm(axis=(1, 2, 3)) Relu Conv(8, (3, 3), "
             "padding='SAME', W_std=1.3) LayerNorm((1, 2, 3), 0.1) Erf GlobalAvgPool Dense(1)", small, scale=2.0),
           stax_syntax=True),
      dict(c('cnn_layernorm_rows_cols_flat',
             "Conv(8, (3, 3), W_std=1.5) LayerNorm(axis=(1, 3)) Relu Conv(4, (2, 2), W_std=1.2, b_std=0.1) "
             "LayerNorm(axis=(-2, -1)) Gelu Flatten Dense(1)", (3, 7, 6, 2), scale=1.5), stax_syntax=True),
      dict(c('cnn_layernorm_pool_gap',
             "Conv(8, (3, 3), padding='SAME', W_std=1.5) Relu AvgPool((2, 2), (2, 2)) Conv(8, (3, 3), padding='SAME', "
             "W_std=1.3, b_std=0.1) LayerNorm(axis=(-3, -2, -1), eps=0.01) Relu Conv(8, (3, 3), padding='SAME') Relu "
             "GlobalAvgPool Dense(1)", large), stax_syntax=True),
      dict(c('cnn_layernorm_strided_flat',
             "Conv(8, (3, 3), (2, 2), 'SAME', W_std=1.4) LayerNorm(axis=(1, 2, 3)) Erf AvgPool((2, 2)) "
             "Conv(4, (2, 2), W_std=1.2) Relu Flatten Dense(4, b_std=0.1) LayerNorm(axis=1) Relu Dense(1)", large),
           stax_syntax=True),
      dict(c('cnn1d_layernorm',
             "Conv(8, (3,), W_std=1.4) LayerNorm(axis=(1, 2)) Relu Conv(8, (2,), padding='SAME', b_std=0.2) "
             "LayerNorm(axis=(-2, -1), eps=0.5) Erf Flatten Dense(1, b_std=0.1)", (4, 9, 2)), stax_syntax=True,
           one_d=True),
  ]
  # LayerNorm over channels, per position: in a slice run, before pooling,
  # and in the tail after the readout.
  cases += [
      c('cnn_layernorm_gap_b',
        f'{conv(3, 1, "SAME", 1.5, 0.1)} LayerNorm Relu {conv(3, 1, "SAME", 1.5, 0.1)} LayerNorm Gelu '
        f'GlobalAvgPool {dense(1.5, 0.1)} LayerNorm', small, scale=2.0),
      c('cnn_layernorm_pool_flat',
        f'{conv(3, 1, "SAME", 2.0, 0)} Relu AvgPool(2,2) {conv(3, 1, "VALID", 1.5, 0.2)} LayerNorm(eps=0.25) Erf '
        f'Flatten {dense(1.5, 0.1)}', large),
  ]
  # ConvLocal (unshared weights: 0 between two positions): the
  # same-position path (Flatten, where it is a Conv), the general one
  # (GlobalAvgPool, pooling, strides, CIRCULAR), beside shared Convs, both
  # parameterisations, 1-D. Rectangular filters and strides only where no
  # shared Conv comes before: after an odd number of them neural-tangents
  # 0.6.5 applies a ConvLocal's filter and strides to the swapped axes
  # (docs/MIGRATING.md, "What differs": where neural-tangents' numbers are off).
  cases += [
      dict(c('cnn_lcn_flat',
             "ConvLocal(8, (3, 3), padding='SAME', W_std=1.5, b_std=0.1) Relu ConvLocal(8, (3, 3), (2, 2), 'VALID', "
             "W_std=1.3) Erf Flatten Dense(1)", small), stax_syntax=True),
      dict(c('cnn_lcn_gap_rect',
             "ConvLocal(8, (3, 2), strides=(2, 1), padding='SAME', W_std=1.5, b_std=0.1) Relu ConvLocal(8, (3, 3), "
             "padding='CIRCULAR', b_std=0.2) Relu GlobalAvgPool Dense(1)", rect), stax_syntax=True),
      dict(c('cnn_lcn_mixed_pool',
             "Conv(8, (3, 3), padding='SAME', W_std=1.5) Relu ConvLocal(8, (2, 2), strides=(2, 2), W_std=1.4, "
             "b_std=0.3) Relu AvgPool((2, 2)) Conv(8, (2, 2), padding='SAME', b_std=0.1) Relu GlobalAvgPool "
             "Dense(1)", large), stax_syntax=True),
      dict(c('cnn_lcn_direct_gap', "ConvLocal(8, (3, 3), padding='SAME', W_std=1.2, b_std=0.5) GlobalAvgPool "
             "Dense(1, b_std=0.1)", small), stax_syntax=True),
      dict(c('cnn_lcn_residual',
             "ConvLocal(8, (3, 3), padding='SAME', W_std=1.5) FanOut(2) parallel(serial(Relu, ConvLocal(8, (3, 3), "
             "padding='SAME', W_std=1.3, b_std=0.1)), Identity) FanInSum Relu GlobalAvgPool Dense(1)", small),
           stax_syntax=True),
      dict(c('cnn_standard_lcn',
             "ConvLocal(8, (3, 3), padding='SAME', W_std=1.5, b_std=0.1) Relu ConvLocal(4, (2, 2), W_std=1.2) Erf "
             "GlobalAvgPool Dense(2)", small), stax_syntax=True, standard=True),
      dict(c('cnn_standard_lcn_nobias',
             "Conv(8, (3, 3), padding='SAME', W_std=1.5) Relu ConvLocal(4, (3, 3), padding='SAME', W_std=1.2) Relu "
             "Flatten Dense(2)", small), stax_syntax=True, standard=True),
      dict(c('cnn_lcn_1d',
             "ConvLocal(8, (3,), padding='SAME', W_std=1.5, b_std=0.1) Relu ConvLocal(8, (2,), strides=(2,), "
             "W_std=1.3) Erf GlobalAvgPool Dense(1)", (4, 9, 2)), stax_syntax=True, one_d=True),
  ]
  # ConvTranspose (the image grows: n*s, plus max(f - s, 0) for VALID;
  # CIRCULAR folds VALID's extent onto n*s): each padding, strides 1-3,
  # rectangular filters and strides after a Conv, pooling after it, a
  # residual branch, 1-D, standard parameterisation.
  cases += [
      dict(c('cnn_convt_valid_s2_gap',
             "ConvTranspose(8, (3, 3), strides=(2, 2), W_std=1.5, b_std=0.1) Relu Conv(8, (3, 3), padding='SAME') "
             "Relu GlobalAvgPool Dense(1)", tiny), stax_syntax=True),
      dict(c('cnn_convt_same_rect_gap',
             "Conv(8, (3, 2), padding='SAME', W_std=1.4) Relu ConvTranspose(8, (3, 2), strides=(2, 1), "
             "padding='SAME', b_std=0.2) Erf GlobalAvgPool Dense(1)", small), stax_syntax=True),
      dict(c('cnn_convt_circular_flat',
             "ConvTranspose(8, (3, 3), strides=(2, 2), padding='CIRCULAR', W_std=1.3) Erf ConvTranspose(8, (4, 1), "
             "padding='CIRCULAR', b_std=0.1) Erf Flatten Dense(1)", tiny), stax_syntax=True),
      dict(c('cnn_convt_pool_flat',
             "ConvTranspose(8, (2, 2), strides=(3, 3), padding='SAME', W_std=1.2) Relu AvgPool((2, 2), strides=(2, 2)) "
             "Conv(4, (2, 2), b_std=0.1) Erf Flatten Dense(1)", tiny), stax_syntax=True),
      dict(c('cnn_convt_residual',
             "Conv(8, (3, 3), padding='SAME', W_std=1.5) FanOut(2) parallel(serial(Relu, ConvTranspose(8, (3, 3), "
             "padding='SAME', W_std=1.3, b_std=0.1)), Identity) FanInSum Relu GlobalAvgPool Dense(1)", tiny),
           stax_syntax=True),
      dict(c('cnn_standard_convt',
             "ConvTranspose(8, (3, 3), strides=(2, 2), padding='SAME', W_std=1.5, b_std=0.1) Relu Conv(4, (2, 2), "
             "W_std=1.2) Erf GlobalAvgPool Dense(2)", tiny), stax_syntax=True, standard=True),
      dict(c('cnn_convt_1d',
             "ConvTranspose(8, (3,), strides=(2,), padding='SAME', W_std=1.5, b_std=0.3) Relu ConvTranspose(8, (2,), "
             "W_std=1.3) Erf GlobalAvgPool Dense(1)", (4, 6, 2)), stax_syntax=True, one_d=True),
  ]
  # GlobalSelfAttention (its infinite-width limit: each image's weights
  # from its own covariance, docs/MATH.md): every mechanism, linear scaling
  # and the IDENTITY one without it, one-hot positional embeddings summed
  # and concatenated (into the values too), 1-D and 2-D, on the raw input,
  # a transformer block (residual attention, LayerNorm, an MLP), Flatten
  # and pooling readouts, standard parameterisation.
  att = "GlobalSelfAttention(8, 8, 8, 2, "
  cases += [
      dict(c('cnn_attn_softmax_1d',
             f"Conv(8, (3,), padding='SAME', W_std=1.5) Relu {att}W_key_std=1.3, W_query_std=0.9, W_value_std=1.1, "
             "b_std=0.2) Relu GlobalAvgPool Dense(1)", (4, 6, 2)), stax_syntax=True, one_d=True),
      dict(c('cnn_attn_sum_flat',
             f"Conv(8, (2, 2), padding='SAME', W_std=1.4, b_std=0.1) Erf {att}pos_emb_type='SUM', W_pos_emb_std=0.7, "
             "W_out_std=1.2) Relu Flatten Dense(1)", (4, 3, 4, 2)), stax_syntax=True),
      dict(c('cnn_attn_concat_values',
             f"Conv(8, (3,), padding='SAME', W_std=1.3) Relu {att}attention_mechanism='IDENTITY', "
             "pos_emb_type='CONCAT', val_pos_emb=True, W_key_std=0.8) Gelu GlobalAvgPool Dense(1)", (4, 5, 2)),
           stax_syntax=True, one_d=True),
      dict(c('cnn_attn_relu_abs_direct',
             f"{att}attention_mechanism='RELU', pos_emb_type='SUM', val_pos_emb=True) Erf {att}"
             "attention_mechanism='ABS', b_std=0.3) AvgPool((2,), strides=(1,)) Relu GlobalAvgPool Dense(1)",
             (4, 6, 3)), stax_syntax=True, one_d=True),
      dict(c('cnn_attn_identity_sqrt',
             f"Conv(8, (2, 2), padding='SAME', W_std=1.2) Relu {att}linear_scaling=False, "
             "attention_mechanism='IDENTITY', pos_emb_type='SUM', W_pos_emb_std=0.5, b_std=0.1) Erf "
             f"{att}linear_scaling=False, attention_mechanism='IDENTITY') GlobalAvgPool Dense(1)", (4, 3, 3, 2)),
           stax_syntax=True),
      dict(c('cnn_attn_transformer',
             f"Dense(8, W_std=1.2) FanOut(2) parallel(Identity, {att}pos_emb_type='CONCAT', W_pos_emb_std=0.8)) "
             "FanInSum LayerNorm FanOut(2) parallel(Identity, serial(Dense(8, W_std=1.4, b_std=0.1), Relu, "
             "Dense(8))) FanInSum LayerNorm GlobalAvgPool Dense(1)", (4, 6, 3)), stax_syntax=True, one_d=True),
      dict(c('cnn_standard_attn',
             f"Conv(8, (3,), padding='SAME', W_std=1.5, b_std=0.1) Relu GlobalSelfAttention(6, 4, 4, 2, "
             "b_std=0.2) Relu Dense(4, b_std=0.1) GlobalAvgPool Dense(2)", (4, 5, 2)), stax_syntax=True,
           one_d=True, standard=True),
  ]
  # ImageResize (jax.image.resize of the covariance: a linear map of the
  # positions): 'linear' up and down, with and without antialias, 'nearest',
  # one axis kept, 1-D, inside a residual branch, before Flatten and pooling.
  # An even number of Convs before a non-square resize: after an odd number
  # neural-tangents 0.6.5 resizes the swapped axes (docs/MIGRATING.md, "What
  # differs").
  cases += [
      dict(c('cnn_resize_linear_down',
             "Conv(8, (2, 2), padding='SAME', W_std=1.4, b_std=0.1) Relu Conv(8, (2, 2), padding='SAME') "
             "ImageResize((-1, 3, 2, -1), 'linear') Erf Conv(8, (2, 2), padding='SAME', W_std=1.3) Relu "
             "GlobalAvgPool Dense(1)", rect), stax_syntax=True),
      dict(c('cnn_resize_bilinear_up_flat',
             "Conv(8, (1, 1)) Conv(8, (3, 3), padding='SAME', W_std=1.5) ImageResize((-1, 9, 7, -1), 'bilinear') "
             "Relu Conv(8, (2, 2), strides=(2, 2), b_std=0.2) Relu Flatten Dense(1)", small), stax_syntax=True),
      dict(c('cnn_resize_no_antialias_keep',
             "Conv(8, (1, 1)) Conv(8, (2, 2), padding='SAME', W_std=1.2) ImageResize((-1, -1, 3, -1), 'linear', "
             "antialias=False) "
             "Gelu AvgPool((2, 2)) Conv(8, (2, 2), padding='SAME') Relu GlobalAvgPool Dense(1)", rect),
           stax_syntax=True),
      dict(c('cnn_resize_nearest_residual',
             "Conv(8, (3, 3), padding='SAME', W_std=1.5) FanOut(2) parallel(Identity, serial(ImageResize((-1, 9, 9, "
             "-1), 'nearest'), ImageResize((-1, 6, 6, -1), 'linear'))) FanInSum Relu GlobalAvgPool Dense(1)",
             small), stax_syntax=True),
      dict(c('cnn_resize_nearest_10_25',
             "Conv(8, (1,), W_std=1.3) ImageResize((-1, 25, -1), 'nearest') Relu Conv(8, (3,), padding='SAME') "
             "Erf GlobalAvgPool Dense(1)", (4, 10, 2)), stax_syntax=True, one_d=True),
      dict(c('cnn_resize_1d',
             "Conv(8, (3,), padding='SAME', W_std=1.5, b_std=0.1) ImageResize((-1, 13, -1), 'linear') Relu "
             "Conv(8, (2,), W_std=1.3) ImageResize((-1, 5, -1), 'nearest') Erf GlobalAvgPool Dense(1)", (4, 7, 2)),
           stax_syntax=True, one_d=True),
  ]
  # Index (stax's x[idx] on the spatial axes: a selection of positions):
  # crops, strides, reversed axes, an Ellipsis, 1-D, before pooling and
  # Flatten.
  cases += [
      dict(c('cnn_index_crop_stride',
             "Conv(8, (2, 2), padding='SAME', W_std=1.4, b_std=0.1) Index(Slice[:, 1:5, ::2]) Relu Conv(8, (2, 2), "
             "padding='SAME', W_std=1.3) Erf GlobalAvgPool Dense(1)", rect), stax_syntax=True),
      dict(c('cnn_index_reverse_flat',
             "Conv(8, (3, 3), padding='SAME', W_std=1.5) Relu Conv(8, (2, 2), padding='SAME') Index(Slice[..., "
             "::-2, :]) Relu AvgPool((2, 2)) Conv(8, (2, 2), b_std=0.2) Relu Flatten Dense(1)", small),
           stax_syntax=True),
      dict(c('cnn_index_1d',
             "Conv(8, (3,), padding='SAME', W_std=1.5, b_std=0.1) Index(Slice[:, -5:]) Relu Conv(8, (2,), "
             "W_std=1.3) Index(Slice[:, 3:0:-1, :]) Erf GlobalAvgPool Dense(1)", (4, 8, 2)), stax_syntax=True,
           one_d=True),
  ]
  return cases + map_cnn_cases()


def graph_cases():
  """Graph networks (stax.Aggregate): each sample's pattern (case_pattern)
  is passed to kernel_fn as pattern=(p, p). Node features are (N, V, C)
  sequences (one_d) or (N, H, W, C) images; the patterns binary, weighted,
  with self-loops, and with a sample that has no edges at all."""
  def g(name, arch, shape, pattern='binary', one_d=True, agg=None):
    c = dict(image_case(name, arch, shape), stax_syntax=True, one_d=one_d, pattern=pattern)
    if agg:  # the positions the Aggregates see, where a layer before them changes the image's size
      c['agg'] = agg
    return c
  return [
      g('graph_relu_gap', "Dense(8, W_std=1.3, b_std=0.2) Relu Aggregate Dense(8, W_std=1.5, b_std=0.1) Relu "
        "Aggregate GlobalAvgPool Dense(1)", (5, 7, 3)),
      g('graph_weighted_flatten', "Aggregate Dense(8, W_std=1.2, b_std=0.3) Erf Aggregate Flatten Dense(1)",
        (5, 6, 2), 'weighted'),
      g('graph_self_loops_gelu', "Dense(8, W_std=1.4) Gelu Aggregate Dense(8, W_std=1.1, b_std=0.1) Gelu "
        "Aggregate Dense(8) Relu GlobalAvgPool Dense(1)", (4, 8, 3), 'self_loops'),
      g('graph_no_edges', "Dense(8, W_std=1.3, b_std=0.1) Relu Aggregate GlobalAvgPool Dense(1)", (5, 6, 2),
        'one_empty'),
      g('graph_conv_axis', "Conv(8, (3,), padding='SAME', W_std=1.3, b_std=0.1) Relu Aggregate(aggregate_axis=1) "
        "Conv(8, (3,), padding='SAME') Relu GlobalAvgPool Dense(1)", (4, 7, 2), 'weighted'),
      g('graph_residual_layernorm', "Dense(8, W_std=1.2) FanOut(2) parallel(Identity, serial(Aggregate, "
        "Dense(8, W_std=1.3, b_std=0.1), Relu, Dense(8))) FanInSum LayerNorm Aggregate GlobalAvgPool Dense(1)", (4, 6, 3)),
      g('graph_images_conv', "Conv(8, (2, 2), padding='SAME', W_std=1.2, b_std=0.1) Relu Aggregate "
        "Conv(8, (3, 3), padding='SAME', W_std=1.3) Relu GlobalAvgPool Dense(1)", (4, 3, 3, 2), 'binary', False),
      g('graph_images_flatten', "Aggregate(aggregate_axis=(1, 2)) Conv(8, (1, 1), W_std=1.5, b_std=0.2) Erf "
        "Aggregate Flatten Dense(1)", (4, 2, 3, 2), 'weighted', False),
      # at most an eighth of the entries nonzero: ntkd's edge-by-edge products (cnn_impl.h, pattern_sparse);
      # 'mixed': half the samples sparse, half dense, so pairs take one of each
      g('graph_sparse_chain', "Dense(8, W_std=1.3, b_std=0.1) Relu Aggregate Dense(8, W_std=1.2) Erf Aggregate "
        "GlobalAvgPool Dense(1)", (4, 20, 2), 'chain'),
      g('graph_sparse_mixed', "Dense(8, W_std=1.3, b_std=0.1) Relu Aggregate Dense(8, W_std=1.2, b_std=0.1) Relu "
        "Aggregate Flatten Dense(1)", (4, 18, 2), 'mixed'),
      # after a VALID convolution (8 -> 6 positions) and a pooling (3 x 4 -> 2 x 3): patterns of those sizes
      g('graph_after_valid_conv', "Conv(8, (3,), W_std=1.3, b_std=0.1) Relu Aggregate Conv(8, (1,)) Relu "
        "GlobalAvgPool Dense(1)", (4, 8, 2), 'weighted', True, (6,)),
      g('graph_after_pool', "Conv(8, (2, 2), padding='SAME', W_std=1.3) Relu AvgPool((2, 2), (1, 1)) Aggregate "
        "Conv(8, (1, 1)) Erf Aggregate Flatten Dense(1)", (4, 3, 4, 2), 'binary', False, (2, 3)),
  ]


def case_pattern(c):
  """A graph case's patterns, (N, V, V), V the positions in row-major order:
  edges drawn per sample from a seed of the case's name; weights multiples
  of 1/8 (exact products, as the inputs)."""
  rng = np.random.RandomState((zlib.crc32(c['name'].encode()) + 1) & 0x7fffffff)
  n, v = c['shape'][0], int(np.prod(c.get('agg', c['shape'][1:-1])))
  p = (rng.uniform(size=(n, v, v)) < 0.4).astype(np.float64)
  if c['pattern'] == 'weighted':
    p *= np.round(rng.uniform(0.125, 2.0, size=(n, v, v)) * 8.0) / 8.0
  if c['pattern'] == 'self_loops':
    p[:, np.arange(v), np.arange(v)] = 1.0
  if c['pattern'] == 'one_empty':
    p[2] = 0.0
  if c['pattern'] in ('chain', 'mixed'):  # a self-loop and a weighted edge to the next node
    chain = np.eye(v) + np.diag(np.round(rng.uniform(0.25, 1.5, size=v - 1) * 8.0) / 8.0, 1)
    p[:] = chain
    if c['pattern'] == 'mixed':
      p[1::2] = (rng.uniform(size=(len(p[1::2]), v, v)) < 0.4).astype(np.float64)
  return p


def case_inputs(c):
  # Per-case seed from the name: adding/reordering cases never changes the
  # inputs of existing ones.
  rng = np.random.RandomState(zlib.crc32(c['name'].encode()) & 0x7fffffff)
  dims = c['shape'] if 'shape' in c else (c['n'], c['d'])
  x = rng.standard_normal(dims) * c['scale']
  # Quantise to multiples of 1/8: every product and partial sum of x.x' is
  # then exact in float64, so neural-tangents' nngp[i,i] (a dot product) and
  # cov1[i] (a separate sum of squares) agree bit for bit. With unquantised
  # inputs they differ by an ulp, which the ReLU angle theta = atan2(sq, q12)
  # amplifies to ~1e-8 noise on the NTK diagonal, above the 1e-10 test bound.
  # For images the same holds for the input layer's per-position channel dot
  # products (at most a few channels).
  x = np.round(x * 8.0) / 8.0
  return np.asarray(x, dtype=np.float64)
