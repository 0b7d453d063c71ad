"""What ntkd's kernel_fn and predictions return: numpy arrays that also take
JAX's ``block_until_ready()``.

neural-tangents' own examples time a computation with
``kernel_fn(x, None, 'ntk').block_until_ready()`` (its examples/infinite_fcn.py,
its notebooks' ``nt.batch`` cells, predictions too). ntkd computes on the host
and returns finished numpy values, so the call has nothing to wait for: it
returns the array, as JAX's does. Nothing else differs from np.ndarray; a
pickle of one is a plain np.ndarray.
"""

import numpy as np


class Array(np.ndarray):
    """An np.ndarray with JAX's block_until_ready() (a no-op returning it). What is computed
    from one is numpy's own: a reduction (k.max(), np.sum(k)) a numpy scalar, an element-wise
    operation (k + 1, np.exp(k)) a plain np.ndarray; in place (k += 1) it stays itself; it
    prints as an np.ndarray does."""

    def block_until_ready(self):
        """The array itself: its values are computed already (JAX's waits for the device)."""
        return self

    def __array_wrap__(self, obj, context=None, return_scalar=False):
        if obj is self:  # out=self (k += 1, np.add(k, 1, out=k)): the array itself, as numpy's own
            return self
        if obj.ndim == 0:
            return obj[()]
        return obj.view(np.ndarray)

    def __repr__(self):
        return repr(self.view(np.ndarray))

    def __reduce__(self):
        return self.view(np.ndarray).__reduce__()


def ready(x):
    """x with each np.ndarray in it (itself, or the fields of a tuple or
    namedtuple, nested) viewed as Array; anything else as it is."""
    if type(x) is np.ndarray:
        return x.view(Array)
    if isinstance(x, tuple):
        items = [ready(v) for v in x]
        return type(x)(*items) if hasattr(x, "_fields") else type(x)(items)
    return x
