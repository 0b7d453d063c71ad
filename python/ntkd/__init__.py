"""ntkd from Python: neural-tangents' ``stax`` and ``kernel_fn``, computed by
ntkd in this process on every core, and ntkd's kernel stores.

    from ntkd import stax
    init_fn, apply_fn, kernel_fn = stax.serial(stax.Dense(512), stax.Relu(), stax.Dense(1))
    k = kernel_fn(x_train, x_test, ('nngp', 'ntk'))
"""

from . import _lib
from . import stax
from .errors import (ArchError, CancelledError, DamagedStoreError, DeviceError, IncompleteStoreError, InputError,
                     NonFiniteKernelError, NtkdError, StoreError)

__version__ = _lib.version()

__all__ = [
    "stax", "NtkdError", "ArchError", "InputError", "NonFiniteKernelError", "CancelledError", "StoreError",
    "DamagedStoreError", "IncompleteStoreError", "DeviceError", "__version__",
]
