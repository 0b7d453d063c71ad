"""ctypes bindings to libntkd (include/ntkd.h): the one place that knows the
C library's signatures. The library is the one built with this package
(ntkd/lib/libntkd.so), or the one NTKD_LIBRARY names."""

import ctypes
import os

_here = os.path.dirname(os.path.abspath(__file__))


def _find():
    env = os.environ.get("NTKD_LIBRARY")
    if env:
        return env
    for name in ("libntkd.so.0", "libntkd.so"):
        path = os.path.join(_here, "lib", name)
        if os.path.exists(path):
            return path
    raise ImportError(
        "libntkd was not found beside the ntkd package (ntkd/lib/libntkd.so.0): install the package with "
        "`pip install ./python` from ntkd's source tree, or set NTKD_LIBRARY to a libntkd.so")


lib = ctypes.CDLL(_find())

# ---- errors -----------------------------------------------------------------------
OK, E_USAGE, E_ARCH, E_INPUT, E_NONFINITE, E_CANCELLED, E_MEMORY, E_IO, E_DAMAGED, E_INCOMPLETE, E_DEVICE, \
    E_INTERNAL = range(12)

lib.ntkd_version.restype = ctypes.c_char_p
lib.ntkd_version.argtypes = []
lib.ntkd_status_name.restype = ctypes.c_char_p
lib.ntkd_status_name.argtypes = [ctypes.c_int]
lib.ntkd_last_error.restype = ctypes.c_char_p
lib.ntkd_last_error.argtypes = []

# ---- networks -----------------------------------------------------------------------
PARAM_NTK, PARAM_STANDARD = 0, 1


class NetOptions(ctypes.Structure):
    _fields_ = [("w_std", ctypes.c_double), ("b_std", ctypes.c_double), ("parameterization", ctypes.c_int)]


lib.ntkd_net_create.restype = ctypes.c_int
lib.ntkd_net_create.argtypes = [ctypes.c_char_p, ctypes.POINTER(NetOptions), ctypes.POINTER(ctypes.c_void_p)]
lib.ntkd_net_free.restype = None
lib.ntkd_net_free.argtypes = [ctypes.c_void_p]
lib.ntkd_net_describe.restype = ctypes.c_size_t
lib.ntkd_net_describe.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]

# ---- kernels ----------------------------------------------------------------------------
FLOAT32, FLOAT64 = 4, 8
NNGP, NTK = 1, 2
DEVICE_AUTO, DEVICE_CPU, DEVICE_CUDA = 0, 1, 2


class Data(ctypes.Structure):
    _fields_ = [("x", ctypes.c_void_p), ("n", ctypes.c_size_t), ("ndim", ctypes.c_int),
                ("shape", ctypes.c_size_t * 3), ("dtype", ctypes.c_int)]


PROGRESS = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64)


class ComputeOptions(ctypes.Structure):
    _fields_ = [("threads", ctypes.c_int), ("device", ctypes.c_int), ("tile", ctypes.c_size_t),
                ("progress", PROGRESS), ("progress_arg", ctypes.c_void_p),
                ("cancel", ctypes.POINTER(ctypes.c_int))]


lib.ntkd_kernels.restype = ctypes.c_int
lib.ntkd_kernels.argtypes = [ctypes.c_void_p, ctypes.POINTER(Data), ctypes.POINTER(Data), ctypes.c_uint,
                             ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ComputeOptions)]
lib.ntkd_kernels_graph.restype = ctypes.c_int
lib.ntkd_kernels_graph.argtypes = [ctypes.c_void_p, ctypes.POINTER(Data), ctypes.c_void_p, ctypes.POINTER(Data),
                                   ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p,
                                   ctypes.POINTER(ComputeOptions)]

# ---- stores -------------------------------------------------------------------------------


class StoreInfo(ctypes.Structure):
    _fields_ = [("n", ctypes.c_uint64), ("n_train", ctypes.c_uint64), ("test_test", ctypes.c_int),
                ("dtype", ctypes.c_int), ("kernels", ctypes.c_uint), ("tile", ctypes.c_uint32),
                ("tiles", ctypes.c_uint64), ("tiles_done", ctypes.c_uint64), ("damaged", ctypes.c_int),
                ("description", ctypes.c_char * 1024)]


lib.ntkd_store_open.restype = ctypes.c_int
lib.ntkd_store_open.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]
lib.ntkd_store_close.restype = None
lib.ntkd_store_close.argtypes = [ctypes.c_void_p]
lib.ntkd_store_get_info.restype = ctypes.c_int
lib.ntkd_store_get_info.argtypes = [ctypes.c_void_p, ctypes.POINTER(StoreInfo)]
lib.ntkd_store_read.restype = ctypes.c_int
lib.ntkd_store_read.argtypes = [ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64,
                                ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t]


def version():
    return lib.ntkd_version().decode()


def last_error():
    return lib.ntkd_last_error().decode(errors="replace")
