"""kernel_fn under an address-space limit (ulimit -v, a batch system's h_vmem): OpenBLAS
retries for ever when it cannot map a thread's 128 MiB buffer, and kernel_fn spun at full CPU,
never returning. libntkd now computes on as many threads as the limit holds, and raises
MemoryError naming the limit where it holds none; a later call in the process uses the buffers
the first left. Each case runs in a process of its own (the limit, and OpenBLAS's buffers once
taken, last for the process's life)."""

import os
import subprocess
import sys

import numpy as np

from ntkd import stax

SCRIPT = r"""
import resource, sys
import numpy as np
from ntkd import stax
_, _, kernel_fn = stax.serial(stax.Dense(512, W_std=2.0, b_std=0.1), stax.Relu(), stax.Dense(1, W_std=2.0))
x = np.random.default_rng(0).standard_normal((600, 700))
used = int(open('/proc/self/statm').read().split()[0]) * resource.getpagesize()
resource.setrlimit(resource.RLIMIT_AS, (used + int(sys.argv[1]) * 2**20, resource.RLIM_INFINITY))
for call in range(3):  # the buffers OpenBLAS kept from the first call serve the next ones
    try:
        np.save(sys.argv[2], kernel_fn(x, None, 'ntk'))
        print('computed')
    except MemoryError as e:
        print('MemoryError:', e)
"""


def run(room_mib, out):
    r = subprocess.run([sys.executable, "-c", SCRIPT, str(room_mib), out], capture_output=True, text=True,
                       timeout=120, env=dict(os.environ))
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_no_room_for_one_buffer_raises(tmp_path):
    out = run(64, str(tmp_path / "k.npy")).splitlines()
    assert len(out) == 3, out
    for line in out:
        assert line.startswith("MemoryError: the address-space limit (ulimit -v) is") and "128 MiB" in line, out


def test_room_for_one_thread_computes_the_same_bits(tmp_path):
    _, _, kernel_fn = stax.serial(stax.Dense(512, W_std=2.0, b_std=0.1), stax.Relu(), stax.Dense(1, W_std=2.0))
    want = kernel_fn(np.random.default_rng(0).standard_normal((600, 700)), None, "ntk")
    # room for one thread's buffer (128 MiB), ntkd's first allocations and this script's arrays, not for a
    # second thread (200 MiB more): before, a pool of two or more threads spun here
    out = run(240, str(tmp_path / "k.npy"))
    assert out.split() == ["computed"] * 3, out  # each call, not only the first
    assert np.array_equal(np.load(tmp_path / "k.npy"), want)
