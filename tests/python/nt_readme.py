"""neural-tangents' README examples (its "5-minute intro" and the WideResNet
of its "Infinitely WideResnet" section), transcribed as functions of the
``stax`` module they are written against: run with neural-tangents' stax
(scripts/nt_reference.py --readme writes tests/data/ref_readme.npz) and
with ``from ntkd import stax`` (tests/python/test_readme.py compares).

The inputs are on a grid of 1/8 (as the other references), from numpy,
so both sides see the same bits.
"""

import numpy as np


def inputs():
    rng = np.random.RandomState(2024)
    grid = lambda *shape: np.round(rng.standard_normal(shape) * 8) / 8
    return {
        "x1": grid(10, 100),          # the intro: x1 = random.normal(key1, (10, 100))
        "x2": grid(20, 100),          #            x2 = random.normal(key2, (20, 100))
        "x_train": grid(12, 100),
        "x_test": grid(5, 100),
        "img_train": grid(3, 32, 32, 3),  # the WideResNet: CIFAR-sized images
        "img_test": grid(2, 32, 32, 3),
    }


def intro(stax):
    init_fn, apply_fn, kernel_fn = stax.serial(
        stax.Dense(512), stax.Relu(),
        stax.Dense(512), stax.Relu(),
        stax.Dense(1)
    )
    return kernel_fn


def WideResnetBlock(stax, channels, strides=(1, 1), channel_mismatch=False):
    Main = stax.serial(
        stax.Relu(), stax.Conv(channels, (3, 3), strides, padding='SAME'),
        stax.Relu(), stax.Conv(channels, (3, 3), padding='SAME'))
    Shortcut = stax.Identity() if not channel_mismatch else stax.Conv(
        channels, (3, 3), strides, padding='SAME')
    return stax.serial(stax.FanOut(2),
                       stax.parallel(Main, Shortcut),
                       stax.FanInSum())


def WideResnetGroup(stax, n, channels, strides=(1, 1)):
    blocks = []
    blocks += [WideResnetBlock(stax, channels, strides, channel_mismatch=True)]
    for _ in range(n - 1):
        blocks += [WideResnetBlock(stax, channels, (1, 1))]
    return stax.serial(*blocks)


def WideResnet(stax, block_size, k, num_classes, pool=(8, 8)):
    # pool: the README's AvgPool((8, 8)) for 32 x 32 images; scripts/side_by_side.py --quick
    # gives smaller images the window of their final maps.
    return stax.serial(
        stax.Conv(16, (3, 3), padding='SAME'),
        WideResnetGroup(stax, block_size, int(16 * k)),
        WideResnetGroup(stax, block_size, int(32 * k), (2, 2)),
        WideResnetGroup(stax, block_size, int(64 * k), (2, 2)),
        stax.AvgPool(pool),
        stax.Flatten(),
        stax.Dense(num_classes, 1., 0.))


def examples(stax, x):
    """Every call of the examples, by name: numpy arrays (float64)."""
    out = {}
    kernel_fn = intro(stax)
    # kernel = kernel_fn(x1, x2, 'nngp') ... and every `get` form, x2 = None.
    out["intro_nngp"] = kernel_fn(x["x1"], x["x2"], 'nngp')
    out["intro_ntk"] = kernel_fn(x["x1"], x["x2"], 'ntk')
    both = kernel_fn(x["x1"], x["x2"], ('nngp', 'ntk'))
    out["intro_both_nngp"], out["intro_both_ntk"] = both.nngp, both.ntk
    rev = kernel_fn(x["x1"], x["x2"], ('ntk', 'nngp'))
    out["intro_rev_0"], out["intro_rev_1"] = rev[0], rev[1]
    k = kernel_fn(x["x1"], x["x2"])
    out["intro_none_nngp"], out["intro_none_ntk"] = k.nngp, k.ntk
    out["intro_train_train"] = kernel_fn(x["x_train"], None, 'ntk')
    out["intro_test_train"] = kernel_fn(x["x_test"], x["x_train"], 'ntk')
    _, _, wrn = WideResnet(stax, block_size=4, k=1, num_classes=10)
    w = wrn(x["img_test"], x["img_train"], ('nngp', 'ntk'))
    out["wrn_nngp"], out["wrn_ntk"] = w.nngp, w.ntk
    out["wrn_self"] = wrn(x["img_train"], None, 'ntk')
    return {name: np.asarray(v, dtype=np.float64) for name, v in out.items()}
