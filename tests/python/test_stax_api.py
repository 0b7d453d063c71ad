"""neural-tangents' stax semantics that ntkd.stax must keep or refuse, found
by running the same user code under both libraries (cases where ntkd once
returned other numbers than neural-tangents without saying so)."""

import numpy as np
import pytest

from ntkd import stax


def test_spatial_data_without_readout_is_refused(rng):
    # neural-tangents applies Dense position by position to (N, L, C) or
    # (N, H, W, C) data and returns an (n1, n2, L, L) or (n1, n2, H, H, W, W)
    # kernel; ntkd once returned the (n1, n2) kernel of the flattened samples.
    _, _, kernel_fn = stax.serial(stax.Dense(3, W_std=1.4, b_std=0.1), stax.Relu(), stax.Dense(1))
    for shape in ((3, 6, 2), (3, 5, 4, 2)):
        x = rng.standard_normal(shape)
        with pytest.raises(NotImplementedError, match="no Flatten, GlobalAvgPool or GlobalSumPool"):
            kernel_fn(x, None, "ntk")
    _, _, identity = stax.Identity()
    with pytest.raises(NotImplementedError, match="keeps the spatial axes"):
        identity(rng.standard_normal((2, 3, 3, 1)))


def test_spatial_data_with_readout(rng):
    # With a readout the numbers are neural-tangents': Flatten first is the
    # MLP of the flattened samples.
    x = rng.standard_normal((3, 6, 2))
    _, _, flat_first = stax.serial(stax.Flatten(), stax.Dense(3, W_std=1.4, b_std=0.1), stax.Relu(), stax.Dense(1))
    _, _, mlp = stax.serial(stax.Dense(3, W_std=1.4, b_std=0.1), stax.Relu(), stax.Dense(1))
    np.testing.assert_allclose(flat_first(x, None, "ntk"), mlp(x.reshape(3, -1), None, "ntk"), rtol=1e-13)
