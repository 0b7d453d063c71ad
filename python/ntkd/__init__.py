"""ntkd from Python: neural-tangents' ``stax`` and ``kernel_fn``, computed by
ntkd in this process on every core; ``batch``, the same ``kernel_fn`` computed
by the ntkd program (one process or an MPI job) into a store that a rerun
resumes; ``predict``, neural-tangents' predictions (MSE, at t = infinity or
during training) over arrays or stores; and ``store``, the reader of ntkd's stores.

    from ntkd import stax
    init_fn, apply_fn, kernel_fn = stax.serial(stax.Dense(512), stax.Relu(), stax.Dense(1))
    k = kernel_fn(x_train, x_test, ('nngp', 'ntk'))
    S = ntkd.batch(kernel_fn, x_train, x_test, store='k.ntk', ranks=4)
    y = ntkd.predict.gp_inference(S, y_train, diag_reg=1e-4)('ntk', k_test_train=S)
"""

import sys as _sys

import ntkd_store as store  # one implementation: ntkd.store is the module ntkd_store

from . import _lib
from . import stax
from .errors import (ArchError, CancelledError, DamagedStoreError, DeviceError, IncompleteStoreError, InputError,
                     NonFiniteKernelError, NtkdError, SolveError, StoreError, StoreInUseError, WorkerTimeoutError)

_sys.modules[__name__ + ".store"] = store  # `import ntkd.store` and `from ntkd.store import open` too

from ._batch import batch  # noqa: E402
from ._kernel import Kernel  # noqa: E402
from . import predict  # noqa: E402

__version__ = _lib.version()

# neural-tangents' top-level functions of finite networks and JAX: `import ntkd as nt` code that calls them
# is told why they are missing, not only that they are.
_FINITE = ("empirical_kernel_fn", "empirical_nngp_fn", "empirical_ntk_fn", "empirical_ntk_vp_fn", "linearize",
           "taylor_expand", "monte_carlo_kernel_fn", "NtkImplementation", "experimental")


def __getattr__(name):
    if name in _FINITE:
        raise AttributeError(f"module 'ntkd' has no attribute {name!r}: neural-tangents' {name} works on finite "
                             "networks (init_fn, apply_fn and their parameters) through JAX; ntkd computes the "
                             "infinite-width kernels only (stax's kernel_fn, predict): use "
                             "neural-tangents for it")
    raise AttributeError(f"module 'ntkd' has no attribute {name!r}")

__all__ = [
    "stax", "batch", "predict", "store", "Kernel", "NtkdError", "ArchError", "InputError", "NonFiniteKernelError",
    "CancelledError", "StoreError", "DamagedStoreError", "IncompleteStoreError", "DeviceError", "StoreInUseError",
    "WorkerTimeoutError", "SolveError", "__version__",
]
