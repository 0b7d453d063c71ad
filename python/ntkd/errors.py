"""ntkd's failures as Python exceptions: each a subclass of NtkdError and of the
built-in exception a Python user expects (ValueError for bad input,
MemoryError, OSError, ...), carrying libntkd's message (what and where)."""

import numpy as np

from . import _lib


class NtkdError(Exception):
    """Any failure reported by libntkd."""


class ArchError(NtkdError, ValueError):
    """An architecture ntkd cannot read, or does not compute on this data."""


class InputError(NtkdError, ValueError):
    """Bad data: a value that is not finite, a shape the network cannot take."""


class NonFiniteKernelError(NtkdError, FloatingPointError):
    """A kernel value beyond the precision (in float32: use float64 inputs)."""


class CancelledError(NtkdError):
    """The computation was stopped (its progress callback failed, or it was cancelled)."""


class StoreError(NtkdError, OSError):
    """A store could not be read."""


class DamagedStoreError(StoreError):
    """A damaged store: `ntkd verify STORE` lists where; rerunning its job repairs it."""


class IncompleteStoreError(StoreError):
    """A read needs a tile the store does not hold yet."""


class DeviceError(NtkdError, RuntimeError):
    """A GPU failed, or none was there where one was asked for."""


class StoreInUseError(StoreError):
    """Another running job holds the store (the ntkd program's exit 7): nothing was read or written."""


class WorkerTimeoutError(NtkdError, TimeoutError):
    """A worker stopped answering (the ntkd program's exit 9); what arrived is stored: rerun to resume."""


class SolveError(NtkdError, np.linalg.LinAlgError):
    """The regularised train kernel could not be solved: not positive definite, or (ntkd solve) too
    ill-conditioned for its reciprocal condition number bound. A larger diag_reg helps."""


_BY_STATUS = {
    _lib.E_USAGE: (NtkdError, ValueError),
    _lib.E_ARCH: ArchError,
    _lib.E_INPUT: InputError,
    _lib.E_NONFINITE: NonFiniteKernelError,
    _lib.E_CANCELLED: CancelledError,
    _lib.E_MEMORY: MemoryError,
    _lib.E_IO: StoreError,
    _lib.E_DAMAGED: DamagedStoreError,
    _lib.E_INCOMPLETE: IncompleteStoreError,
    _lib.E_DEVICE: DeviceError,
    _lib.E_INTERNAL: (NtkdError, RuntimeError),
}
_made = {}


def raise_for(status, message=None):
    """Raise the exception for a libntkd status (nothing for NTKD_OK)."""
    if status == _lib.OK:
        return
    if message is None:
        message = _lib.last_error()
    cls = _BY_STATUS.get(status, (NtkdError, RuntimeError))
    if isinstance(cls, tuple):  # an NtkdError that is also a built-in exception
        if cls not in _made:
            _made[cls] = type(cls[1].__name__, cls, {"__module__": __name__})
        cls = _made[cls]
    raise cls(message)


# The ntkd program's exit codes (docs/CLI.md, "Exit codes") as libntkd's statuses.
_BY_EXIT = {
    1: _lib.E_INTERNAL,
    2: _lib.E_USAGE,  # a bad job, data or store, or a store of another job
    3: _lib.E_IO,
    4: _lib.E_DAMAGED,
    5: _lib.E_CANCELLED,  # stopped by a signal: rerun to resume
    6: _lib.E_INCOMPLETE,
    8: _lib.E_NONFINITE,
}


def raise_for_exit(code, message):
    """Raise the exception for an exit code of the ntkd program (nothing for 0)."""
    if code == 0:
        return
    if code == 7:
        raise StoreInUseError(message)
    if code == 9:
        raise WorkerTimeoutError(message)
    if code in _BY_EXIT:
        raise_for(_BY_EXIT[code], message)
    if code < 0:  # a crash: its last line of output is whatever came before it (a notice), not its cause
        raise_for(_lib.E_INTERNAL, f"the ntkd program was killed by signal {-code}" +
                  (f" (the last line it wrote before: {message})" if message else ""))
    raise_for(_lib.E_INTERNAL, f"the ntkd program ended with exit code {code}: {message}")


def refused(module, name, why):
    """A stand-in for neural-tangents' `module.name`, which ntkd does not
    compute: calling it raises NotImplementedError saying why."""
    def fn(*args, **kwargs):
        raise NotImplementedError(f"{module}.{name}: ntkd does not compute it ({why})")
    fn.__name__ = name
    fn.__doc__ = f"Not computed by ntkd: {why}. Raises NotImplementedError."
    return fn
