#!/usr/bin/env python3
"""ntkd against neural-tangents, side by side, and the in-process pool against
mpirun (issue 27, section 4). One command, one run:

  python3 scripts/side_by_side.py [--build build] [--reps 3]      # the full run
  python3 scripts/side_by_side.py --quick                          # CI: seconds

Part 1 computes the same kernels kernel_fn(x, None, ('nngp', 'ntk')) in
float64 through ntkd's Python API (`from ntkd import stax`, libntkd of the
build, in this interpreter) and through neural-tangents 0.6.5 (the pinned venv
/opt/ntkd-ref-venv, jax on the CPU with jax_enable_x64). The networks are
written once, as functions of a `stax` module: only the import differs.

  fc      the README's network (Dense(512) Relu Dense(512) Relu Dense(1), stax's
          defaults W_std=1, no bias) on the first 2 000 Fashion-MNIST training
          images (/usr/share/datasets/fashion-mnist), pixels / 255, (2000, 784)
  cntk21  CNTK-GAP depth 21 (configs/cntk-gap21.conf): [Conv(3x3, SAME,
          W_std=sqrt 2, no bias) Relu]*20 GlobalAvgPool Dense(W_std=sqrt 2) on
          16 images of CIFAR-10's shape 32x32x3. CIFAR-10 is not on this
          machine: the images are uniform random numbers in [0, 1) (seed 27)
  wrn     neural-tangents' README WideResnet(block_size=4, k=1, num_classes=10)
          (tests/python/nt_readme.py, the transcription test_readme.py checks;
          configs/wrn.conf is the same network) on 8 such images
  attn    a transformer on sequences: the first 100 Fashion-MNIST training
          images as 28 rows of 28 pixels (N, L, C) = (100, 28, 28), pixels /
          255: Dense(256), two blocks of residual GlobalSelfAttention (SOFTMAX,
          linear scaling, positional embeddings summed) and a residual
          Dense-Relu-Dense, each followed by LayerNorm, GlobalAvgPool, Dense(1)
  graph   a graph network (stax.Aggregate, kernel_fn(..., pattern=(p, p))): the
          first 200 Fashion-MNIST training images as graphs of 28 nodes, the
          rows (N, L, C) = (200, 28, 28), pixels / 255; each image's edges (graph_pattern)
          join neighbouring rows and rows whose pixels correlate above 0.5;
          three rounds of Dense(256) Relu Aggregate, GlobalAvgPool, Dense(1)

Each computation runs in its own child process (this script with --child),
so that its peak memory (VmHWM of the child) is its own; the two tools
alternate (ntkd, nt, ntkd, nt, ...) for --reps repetitions and the medians
are printed. A child's time is the kernel_fn call alone: the inputs are read
from an .npy file before the clock starts. ntkd's time includes the copy of
the result into the numpy arrays kernel_fn returns; neural-tangents' includes
block_until_ready and the conversion to numpy. neural-tangents' kernel_fn is
called as its README calls it (not under jax.jit). Times per entry divide
both tools' times by the same count, the n(n+1)/2 distinct entries of the
symmetric n x n kernel (ntkd computes the lower triangle once,
neural-tangents all n^2 entries): the speed ratio is the ratio of the times
of the whole matrix. --nt-images CASE=M measures neural-tangents on the first
M images only (when all n would take too long); its entries are then compared
with the top-left M x M block of ntkd's, and its time divided by M(M+1)/2; a
second row times ntkd on the same M images (a kernel's cost per entry falls
with n: the per-image work is shared), compared with nt's entries too.

Part 2 (in the full run; --only pool runs it alone): the same block through the
in-process pool (kernel_fn, threads=0: every core) and through
`mpirun -np 3 ntkd STEM.conf` (ntkd.batch(..., ranks=2): a coordinator and two
workers), float32, the same tile edge (kernel_fn's: 512 FC, 16 CNN), alternated
(the order swapping each repetition), --reps runs each; every run's kernels must be the same bits. The pool's time is the
kernel_fn call, the copy into numpy included; mpirun's is the ntkd.batch call:
writing the data (.npy) and the job file, starting mpirun and its three
processes, the computation, the store's writes (fsync included) until the
program exits, and opening the store for reading. Throughput is entries per
second; the script prints pool / mpirun against the floor 0.9.

--quick: tiny sizes, one repetition, no part 2 unless --pool-n; exits 1 when
the largest relative difference off the diagonal exceeds 1e-10 (float64) or
the one on it 1e-7 (TOL_DIAG below says why), or when the pool's and
mpirun's kernels differ in a bit; 77 when the venv is missing (ctest reads
77 as skipped: CI's .ci/run does not create it, scripts/nt_reference.sh
does). The full run also exits 1 on a pool ratio under 0.9. ctest's
side_by_side runs --quick --pool-n fc=64 --pool-n cnn=8.
"""

import argparse
import gzip
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)
VENV_PY = os.environ.get("NTKD_REF_VENV", "/opt/ntkd-ref-venv") + "/bin/python"
FASHION = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"
TOL = 1e-10       # largest relative difference off the diagonal
# On the diagonal neural-tangents' ReLU takes arccos of a correlation x.x / sqrt(|x|^2 |x|^2)
# that rounds to just under 1, where arccos has an infinite slope: its diagonal NTK is off by
# ~sqrt(2 eps) ~ 2e-8 relative (ntkd's agrees with the closed form 3/4 |x|^2 / d of the FC case
# to 2e-15: docs/PERFORMANCE.md, issue 27's side by side).
TOL_DIAG = 1e-7
FLOOR = 0.9
POOL_TILE = {"fc": 512, "cnn": 16}  # kernel_fn's own choice (src/lib/ntkd.c), given to both sides


# ---------------------------------------------------------------------------
# The networks, written against a `stax` module (neural-tangents' or ntkd's)
# ---------------------------------------------------------------------------

def net_fc(stax, size):
    return stax.serial(stax.Dense(512), stax.Relu(), stax.Dense(512), stax.Relu(), stax.Dense(1))


def net_cntk21(stax, size):
    w = 2 ** 0.5
    conv = [stax.Conv(512, (3, 3), (1, 1), padding="SAME", W_std=w, b_std=None), stax.Relu()]
    return stax.serial(*(conv * 20), stax.GlobalAvgPool(), stax.Dense(512, W_std=w, b_std=None))


def net_wrn(stax, size):
    sys.path.insert(0, os.path.join(SRC, "tests", "python"))
    import nt_readme
    # The README's AvgPool((8, 8)) meets 8 x 8 maps after two stride-2 groups of 32 x 32
    # images; the quick mode's smaller images get the window of their maps.
    return nt_readme.WideResnet(stax, block_size=4, k=1, num_classes=10, pool=(size // 4, size // 4))


def net_cnn(stax, size):
    """The block of the pool run: configs/cnn-fashion.conf's network."""
    w = 2 ** 0.5
    conv = lambda: stax.Conv(256, (3, 3), (1, 1), padding="SAME", W_std=w, b_std=None)
    return stax.serial(conv(), stax.Relu(), stax.AvgPool((2, 2), (2, 2)), conv(), stax.Relu(), conv(), stax.Relu(),
                       stax.GlobalAvgPool(), stax.Dense(1, W_std=w, b_std=None))


def net_attn(stax, size):
    def block():
        attn = stax.GlobalSelfAttention(256, 256, 256, 8, W_key_std=1.0, W_query_std=1.0, pos_emb_type="SUM")
        mlp = stax.serial(stax.Dense(256, W_std=2 ** 0.5, b_std=0.05), stax.Relu(), stax.Dense(256))
        return stax.serial(stax.FanOut(2), stax.parallel(stax.Identity(), attn), stax.FanInSum(), stax.LayerNorm(),
                           stax.FanOut(2), stax.parallel(stax.Identity(), mlp), stax.FanInSum(), stax.LayerNorm())
    return stax.serial(stax.Dense(256), block(), block(), stax.GlobalAvgPool(), stax.Dense(1))


def net_graph(stax, size):
    layer = [stax.Dense(256, W_std=2 ** 0.5, b_std=0.1), stax.Relu(), stax.Aggregate()]
    return stax.serial(*(layer * 3), stax.GlobalAvgPool(), stax.Dense(1))


def graph_pattern(x):
    """The graph case's edges, from the samples themselves (so the first M samples' are the
    same whoever computes them): row i to rows i - 1 and i + 1, and to every row whose
    pixels correlate with its own above 0.5, self-loops included; (N, L, L) 0/1."""
    n, v = x.shape[:2]
    z = x - x.mean(axis=2, keepdims=True)
    z /= np.maximum(np.linalg.norm(z, axis=2, keepdims=True), 1e-12)
    p = (np.einsum("nic,njc->nij", z, z) > 0.5).astype(np.float64)
    i = np.arange(v)
    p[:, i, i] = 1
    p[:, i[:-1], i[1:]] = p[:, i[1:], i[:-1]] = 1
    return p


NETS = {"fc": net_fc, "cntk21": net_cntk21, "wrn": net_wrn, "attn": net_attn, "cnn": net_cnn, "graph": net_graph}


def fashion(n, images=False):
    with gzip.open(FASHION, "rb") as f:
        raw = f.read(16 + n * 784)
    x = np.frombuffer(raw, dtype=np.uint8, offset=16).astype(np.float64) / 255
    return x.reshape(n, 28, 28, 1) if images else x.reshape(n, 784)


def cifar_like(n, size):
    return np.random.default_rng(27).random((n, size, size, 3))


# ---------------------------------------------------------------------------
# A child: one kernel_fn call by one tool
# ---------------------------------------------------------------------------

def status_kb(key):
    """VmRSS (now) or VmHWM (peak) of this process, kB. Not ru_maxrss: Linux carries
    that over exec from the parent (the driver, which holds the results)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def child(a):
    x = np.load(a.x)
    if a.tool == "nt":
        import jax
        jax.config.update("jax_enable_x64", True)
        from neural_tangents import stax
    else:
        from ntkd import stax
    kernel_fn = NETS[a.case](stax, x.shape[1] if x.ndim == 4 else 0)[2]
    before = status_kb("VmRSS")
    store = None
    t0 = time.perf_counter()
    kw = {"pattern": (graph_pattern(x),) * 2} if a.case == "graph" else {}
    if a.tool == "nt":
        k = kernel_fn(x, None, ("nngp", "ntk"), **kw)
        k = jax.block_until_ready(k)
        nngp, ntk = np.asarray(k.nngp), np.asarray(k.ntk)
    elif a.tool == "mpirun":
        import ntkd
        store = ntkd.batch(kernel_fn, x, store=a.out + ".ntk", ranks=2, overwrite=True, progress=False,
                           tile=a.tile or None)
    else:
        k = kernel_fn(x, None, ("nngp", "ntk"), tile=a.tile, **kw)
        nngp, ntk = k.nngp, k.ntk
    t = time.perf_counter() - t0
    peak = status_kb("VmHWM")
    if store is not None:
        nngp, ntk = store["nngp"][:, :], store["ntk"][:, :]
    r = {"time": t, "peak_kb": peak, "before_kb": before}
    if a.digest:  # the pool's blocks are large: their bytes' digests only, compared by the driver
        r["digest"] = [hashlib.sha256(np.ascontiguousarray(k).tobytes()).hexdigest() for k in (nngp, ntk)]
    else:
        np.save(a.out + ".nngp.npy", nngp)
        np.save(a.out + ".ntk.npy", ntk)
    print(json.dumps(r))


# ---------------------------------------------------------------------------
# The driver
# ---------------------------------------------------------------------------

class Runner:
    def __init__(self, build, tmp):
        self.tmp = tmp
        self.seq = 0
        prog = os.path.join(build, "ntkd")
        lib = os.path.join(build, "libntkd.so.0")
        for p in (prog, lib):
            if not os.path.exists(p):
                sys.exit(f"side_by_side: {p} is missing: build ntkd first (README, Building)")
        self.env_ntkd = dict(os.environ, NTKD_PROGRAM=prog, NTKD_LIBRARY=lib,
                             PYTHONPATH=os.path.join(SRC, "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
        # The program's OpenBLAS kernel choice for this process too (tests/python/run.sh).
        self.core = os.environ.get("OPENBLAS_CORETYPE", "")
        if not self.core:
            out = subprocess.run([prog, "--version"], capture_output=True, text=True).stdout
            for line in out.splitlines():
                if line.startswith("OpenBLAS kernels: "):
                    self.core = line.split(": ", 1)[1].strip()
        if self.core:
            self.env_ntkd["OPENBLAS_CORETYPE"] = self.core
        for k, v in (("OMPI_ALLOW_RUN_AS_ROOT", "1"), ("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"),
                     ("OMPI_MCA_rmaps_base_oversubscribe", "1"),
                     ("OMPI_MCA_btl_vader_single_copy_mechanism", "none")):  # scripts/env.sh
            self.env_ntkd.setdefault(k, v)
        self.env_nt = dict(os.environ, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")

    def save(self, name, x):
        path = os.path.join(self.tmp, name + ".npy")
        np.save(path, x)
        return path

    def run(self, tool, case, xpath, digest=False, tile=0):
        self.seq += 1
        out = os.path.join(self.tmp, f"r{self.seq}-{tool}-{case}")
        py, env = (VENV_PY, self.env_nt) if tool == "nt" else (sys.executable, self.env_ntkd)
        cmd = [py, os.path.abspath(__file__), "--child", tool, "--case", case, "--x", xpath, "--out", out] + \
            (["--digest"] if digest else []) + (["--tile", str(tile)] if tile else [])
        p = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if p.returncode != 0:
            sys.stderr.write(p.stdout + p.stderr)
            raise RuntimeError(f"{tool} on {case} failed (exit {p.returncode})")
        r = json.loads(p.stdout.strip().splitlines()[-1])
        if not digest:
            r["nngp"], r["ntk"] = np.load(out + ".nngp.npy"), np.load(out + ".ntk.npy")
            for ext in (".nngp.npy", ".ntk.npy"):
                os.unlink(out + ext)
        for f in os.listdir(self.tmp):  # ntkd.batch's store, job, data and log
            if f.startswith(os.path.basename(out) + "."):
                os.unlink(os.path.join(self.tmp, f))
        return r


def diff(a, b):
    """Largest absolute difference, largest relative one |a-b| / max(|a|, |b|) over all
    entries, and the largest relative one off the diagonal."""
    d = np.abs(a - b)
    scale = np.maximum(np.abs(a), np.abs(b))
    rel = np.where(scale > 0, d / np.where(scale > 0, scale, 1), 0)
    off = rel.copy()
    np.fill_diagonal(off, 0)
    return float(d.max()), float(rel.max()), float(off.max())


def loadavg():
    return "%.2f %.2f %.2f" % os.getloadavg()


def machine_line(runner):
    model = platform.processor() or "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} cores, OpenBLAS kernels {runner.core or 'OpenBLAS default'}"


def mb(kb):
    return f"{kb / 1024:.0f}"


def side_by_side(runner, cases):
    rows, worst, worst_diag = [], 0.0, 0.0
    for case, x, m, reps in cases:
        n = x.shape[0]
        xpath = runner.save(case, x)
        xpath_nt = xpath if m == n else runner.save(case + "-nt", x[:m])
        res = {"ntkd": [], "nt": [], "ntkd_m": []}
        for _ in range(reps):
            res["ntkd"].append(runner.run("ntkd", case, xpath))
            res["nt"].append(runner.run("nt", case, xpath_nt))
            if m < n:  # ntkd on nt's images too: the same count of entries
                res["ntkd_m"].append(runner.run("ntkd", case, xpath_nt))
            print(f"  {case}: ntkd {res['ntkd'][-1]['time']:.3f} s, nt {res['nt'][-1]['time']:.3f} s" +
                  (f" on {m} images, ntkd on them {res['ntkd_m'][-1]['time']:.3f} s" if m < n else "") +
                  f" (load {loadavg()})", flush=True)
            for r in res["ntkd"][1:] + res["nt"][1:] + res["ntkd_m"][1:]:  # only the first run's kernels are compared
                r.pop("nngp", None), r.pop("ntk", None)
        a, b = res["ntkd"][0], res["nt"][0]
        dn = diff(a["nngp"][:m, :m], b["nngp"])
        dk = diff(a["ntk"][:m, :m], b["ntk"])
        worst = max(worst, dn[2], dk[2])
        worst_diag = max(worst_diag, dn[1], dk[1])
        med = lambda k: statistics.median(r["time"] for r in res[k])
        peak = lambda k: mb(max(r["peak_kb"] for r in res[k])) + f" ({mb(res[k][0]['before_kb'])})"
        tn, tt = med("ntkd"), med("nt")
        en, et = n * (n + 1) // 2, m * (m + 1) // 2
        pn, pt = tn / en, tt / et
        row = lambda images, e, p1, p2, pk1, pk2, diffs: [case, reps, images, e, f"{p1 * 1e6:.4g}", f"{p2 * 1e6:.4g}",
                                                          f"{p2 / p1:.3g}", pk1, pk2] + diffs
        rows.append(row(n if m == n else f"{n} (nt {m})", en if m == n else f"{en} (nt {et})", pn, pt, peak("ntkd"),
                        peak("nt"), [f"{dn[0]:.1e} / {dn[1]:.1e} / {dn[2]:.1e}", f"{dk[0]:.1e} / {dk[1]:.1e} / {dk[2]:.1e}"]))
        if m < n:
            c = res["ntkd_m"][0]
            dn, dk = diff(c["nngp"], b["nngp"]), diff(c["ntk"], b["ntk"])
            worst = max(worst, dn[2], dk[2])
            worst_diag = max(worst_diag, dn[1], dk[1])
            rows.append(row(f"{m} (both)", et, med("ntkd_m") / et, pt, peak("ntkd_m"), peak("nt"),
                            [f"{dn[0]:.1e} / {dn[1]:.1e} / {dn[2]:.1e}", f"{dk[0]:.1e} / {dk[1]:.1e} / {dk[2]:.1e}"]))
    head = ["case", "reps", "images", "entries n(n+1)/2", "ntkd us/entry", "nt us/entry", "nt/ntkd per entry",
            "ntkd peak MB (before call)", "nt peak MB (before call)", "NNGP max abs / rel / rel off-diag",
            "NTK max abs / rel / rel off-diag"]
    print_table(head, rows)
    return worst, worst_diag


def print_table(head, rows):
    w = [max(len(str(r[i])) for r in [head] + rows) for i in range(len(head))]
    line = lambda r: "| " + " | ".join(str(c).ljust(w[i]) for i, c in enumerate(r)) + " |"
    print(line(head))
    print("|" + "|".join("-" * (k + 2) for k in w) + "|")
    for r in rows:
        print(line(r))


def pool_vs_mpirun(runner, blocks, reps):
    rows, worst, identical = [], float("inf"), True
    # Both sides get kernel_fn's tile edge (512 FC, 16 CNN): a job file's default, 1024,
    # would leave a CNN block of under 1024 images one tile, computed by one of the workers.
    for case, x in blocks:
        x = x.astype(np.float32)
        n = x.shape[0]
        xpath = runner.save("pool-" + case, x)
        res = {"pool": [], "mpirun": []}
        for rep in range(reps):
            # The order swaps each repetition: a run after mpirun's finds its store's pages in
            # the page cache, which the kernel reclaims for the pool's fresh result arrays.
            for tool in ("pool", "mpirun") if rep % 2 == 0 else ("mpirun", "pool"):
                res[tool].append(runner.run("ntkd" if tool == "pool" else "mpirun", case, xpath, digest=True,
                                             tile=POOL_TILE[case]))
            print(f"  {case} n={n}: pool {res['pool'][-1]['time']:.2f} s, mpirun -np 3 "
                  f"{res['mpirun'][-1]['time']:.2f} s (load {loadavg()})", flush=True)
        same = all(r["digest"] == res["pool"][0]["digest"] for r in res["pool"] + res["mpirun"])
        identical &= same
        tp = statistics.median(r["time"] for r in res["pool"])
        tm = statistics.median(r["time"] for r in res["mpirun"])
        e = n * (n + 1) // 2
        ratio = tm / tp
        worst = min(worst, ratio)
        rows.append([case, n, POOL_TILE[case], e, f"{tp:.2f}", f"{tm:.2f}", f"{e / tp:.0f}", f"{e / tm:.0f}", f"{ratio:.3f}",
                     "yes" if same else "NO"])
    print_table(["block", "images", "tile", "entries", "pool s", "mpirun -np 3 s", "pool entries/s", "mpirun entries/s",
                 "pool/mpirun throughput", "bit-identical"], rows)
    print(f"pool / mpirun throughput: {worst:.3f} (lowest of the blocks), floor {FLOOR}: "
          f"{'met' if worst >= FLOOR else 'NOT met'}; every run's kernels bit-identical: {'yes' if identical else 'NO'}")
    return worst, identical


def _pair(text, what, ap):
    k, _, v = text.partition("=")
    if not v.isdigit() or int(v) < 1:
        ap.error(f"{what} {text!r}: expected NAME=COUNT, a positive count")
    return k, int(v)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(SRC, "build"), help="build folder with ntkd and libntkd.so.0")
    ap.add_argument("--reps", type=int, default=None, help="repetitions (default 3; --quick 1)")
    ap.add_argument("--quick", action="store_true", help="tiny sizes (CI)")
    ap.add_argument("--nt-images", action="append", default=[], metavar="CASE=M",
                    help="neural-tangents on the first M images of CASE only")
    ap.add_argument("--case-reps", action="append", default=[], metavar="CASE=R",
                    help="repetitions of one case of part 1 (a long one: fewer)")
    ap.add_argument("--only", choices=("side", "pool"), help="one part only")
    ap.add_argument("--cases", default=None, metavar="A,B", help="part 1's cases (default: fc,cntk21,wrn,attn,graph)")
    ap.add_argument("--pool-n", action="append", default=[], metavar="BLOCK=N",
                    help="images of a pool block (fc, cnn)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--case", help=argparse.SUPPRESS)
    ap.add_argument("--x", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--digest", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--parse-only", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--tile", type=int, default=0, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        a.tool = a.child
        return child(a)

    reps = a.reps or (1 if a.quick else 3)
    pairs = lambda given, what: dict(_pair(s, what, ap) for s in given)
    nt_m = pairs(a.nt_images, "--nt-images")
    pool_n = pairs(a.pool_n, "--pool-n")
    case_reps = pairs(a.case_reps, "--case-reps")
    for name, given, known in (("--nt-images", nt_m, NETS), ("--case-reps", case_reps, NETS),
                               ("--pool-n", pool_n, POOL_TILE)):
        for k in given:
            if k not in known or k == "cnn" and known is NETS:
                ap.error(f"{name}: no case {k!r}")
    if a.parse_only:  # tests/side_by_side.sh: the commands of docs/PERFORMANCE.md parse
        return 0
    if not os.path.exists(VENV_PY):
        print(f"side_by_side: {VENV_PY} is missing (neural-tangents' pinned venv: scripts/nt_reference.sh "
              "creates it): skipped")
        return 77
    if a.quick:
        sizes = {"fc": fashion(12), "cntk21": cifar_like(3, 8), "wrn": cifar_like(2, 8),
                 "attn": fashion(3, images=True).reshape(3, 28, 28)[:, :8, :8],
                 "graph": fashion(3, images=True).reshape(3, 28, 28)[:, :6, :4]}
        blocks = [("fc", fashion(pool_n.get("fc", 64))), ("cnn", fashion(pool_n.get("cnn", 8), images=True))]
    else:
        sizes = {"fc": fashion(2000), "cntk21": cifar_like(16, 32), "wrn": cifar_like(8, 32),
                 "attn": fashion(100, images=True).reshape(100, 28, 28),
                 "graph": fashion(200, images=True).reshape(200, 28, 28)}
        blocks = [("fc", fashion(pool_n.get("fc", 16000))), ("cnn", fashion(pool_n.get("cnn", 110), images=True))]
    chosen = a.cases.split(",") if a.cases else list(sizes)
    for c in chosen:
        if c not in sizes:
            ap.error(f"--cases: no case {c!r}")
    cases = [(c, x, min(nt_m.get(c, x.shape[0]), x.shape[0]), case_reps.get(c, reps)) for c, x in sizes.items()
             if c in chosen]

    with tempfile.TemporaryDirectory(prefix="side_by_side.") as tmp:
        runner = Runner(os.path.abspath(a.build), tmp)
        print(f"machine: {machine_line(runner)}; load average at start {loadavg()}", flush=True)
        rc = 0
        if a.only != "pool":
            print(f"ntkd (Python API, libntkd in-process) against neural-tangents 0.6.5 (jax CPU, float64), "
                  f"median of the runs (reps column); entries = n(n+1)/2 for both tools", flush=True)
            worst, worst_all = side_by_side(runner, cases)
            ok = worst <= TOL and worst_all <= TOL_DIAG
            print(f"largest relative difference off the diagonal {worst:.2e} (tolerance {TOL:g}), on it "
                  f"{worst_all:.2e} (tolerance {TOL_DIAG:g}): {'ok' if ok else 'FAILED'}")
            rc |= 0 if ok else 1
        if a.only == "pool" or (a.only is None and (not a.quick or a.pool_n)):
            print(f"in-process pool (kernel_fn, threads=0) against mpirun -np 3 ntkd (ntkd.batch ranks=2), float32, "
                  f"median of {reps}", flush=True)
            ratio, identical = pool_vs_mpirun(runner, blocks, reps)
            rc |= 0 if (ratio >= FLOOR or a.quick) and identical else 1
        print(f"machine: {machine_line(runner)}; load average at end {loadavg()}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
