#!/usr/bin/env python3
"""Performance model of the CNN SLICE kernels on a GPU, without a GPU.

Reads the sm_90 SASS of the SLICE kernels (src/backend/cuda/cnn_cuda.cu,
compiled here with nvcc -cubin -lineinfo and the build's IEEE flags; the
line table does not change the code), follows the path one thread takes
through one layer of CNTK-GAP-21 ([Conv(3, 1, SAME) Relu]*20 GlobalAvgPool
Dense, 32x32x3 images, float32, NNGP and NTK), takes the launch geometry
of a pair from the real launch plan (ntkd_bench_cnn --plan, which runs
src/backend/cuda/cnn_gpu.c with an executor that records launches), the
registers from cuobjdump -res-usage and the shared-memory layout from the
kernels' index formulas, and prints a predicted time per entry on an H200.

    python3 scripts/gpu_model.py [BUILD_DIR] [--kernel slice3|slice|both] [--slice3 b4|b3] [-v]

SLICE3 is modelled in the variant the CUDA backend launches by default,
k_slice3_b4 (64 registers, 4 blocks per SM; its spills' local loads and
stores are on the path and counted); --slice3 b3 models k_slice3 (80
registers, 3 blocks, NTKD_GPU_SLICE3_BLOCKS=3).

Needs nvcc, and nvdisasm + cuobjdump (the CUDA toolkit, or the pip wheels
nvidia-cuda-nvdisasm / nvidia-cuda-cuobjdump). Python standard library only.

How instructions are attributed ("path" in the output): the walker starts
at the top of the kernel's per-layer loop (the widest loop around the
layer's barrier) and follows the control flow one thread takes in a CNTK
layer (Conv + Relu, not the last layer, not a capture pass, NTK on) until
the loop's back edge. At each conditional forward branch it looks at the
code the branch would jump over, by source line (nvdisasm -gi: each
instruction's line and the lines it is inlined at): that code is skipped
when it is a short call into the slow path of an IEEE sqrt or division,
when it is one of the compiler's 16/8/4-way unrolled bodies of a
runtime-length filter loop (SLICE; a filter of 3 never enters them), or
when it holds code of another case only (per kernel below: Erf, Dense, the
capture pass, the generic pointwise loop, SLICE3's cell-by-cell path, the
run's last layer); it runs when it holds code of this case (the
convolution, the Relu map) or of no listed case. One branch is decided by
its source instead: SLICE3's choice between its two fast paths (s3_strip's
`if (M->fast == DV_S + 2)`) goes to the side inlined at the call for a
strip in one slice, the common one (nvcc may share the map's code of the
two, under either call's line). Loop back edges are not
taken: one strip (SLICE3) or one cell and one row of row sums (SLICE) per
thread. The count is SASS instructions per thread per layer; divided by
the cells the thread computes in that layer it is instructions per cell
per layer. -vv prints the path, each instruction with its source lines.
"""
import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARCH = "[Conv(3, 1, SAME) Relu]*20 GlobalAvgPool Dense"  # CNTK-GAP-21: depth 21 counting the Dense
NVCC_FLAGS = ["-O3", "-prec-div=true", "-prec-sqrt=true", "-ftz=false", "--fmad=false"]

# H200 (sm_90, GH100 with 132 SMs enabled)
SMS, SCHED, CLOCK = 132, 4, 1.98e9
REGS_PER_SM, MAX_THREADS_SM, MAX_BLOCKS_SM = 65536, 2048, 32
SMEM_PER_SM, SMEM_RESERVED = 228 * 1024, 1024  # bytes; 1 KiB per block reserved by the runtime
SMEM_WAVEFRONTS_PER_CLK = 1  # 32 banks x 4 bytes per clock per SM


def tool(name):
    for d in os.environ.get("PATH", "").split(os.pathsep) + ["/usr/local/cuda/bin"]:
        p = os.path.join(d, name)
        if os.access(p, os.X_OK):
            return p
    try:  # the pip wheels (nvidia-cuda-nvdisasm, nvidia-cuda-cuobjdump)
        import nvidia  # noqa: F401
        for base in nvidia.__path__:
            for sub in sorted(os.listdir(base)):
                p = os.path.join(base, sub, "bin", name)
                if os.path.exists(p):
                    if not os.access(p, os.X_OK):
                        os.chmod(p, 0o755)
                    return p
    except ImportError:
        pass
    sys.exit(f"gpu_model.py: {name} not found (the CUDA toolkit, or pip install nvidia-cuda-{name})")


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode:
        sys.exit(f"gpu_model.py: {' '.join(cmd)} failed:\n{r.stderr}")
    return r.stdout


# ---------------------------------------------------------------- SASS ----

class Ins:
    __slots__ = ("addr", "pred", "op", "text", "stack", "target")

    def __init__(self, addr, pred, op, text, stack):
        self.addr, self.pred, self.op, self.text, self.stack = addr, pred, op, text, stack
        self.target = None


def parse_functions(dis):
    """nvdisasm -gi output -> {name: [Ins]}, labels resolved to addresses."""
    funcs, cur, name, stack, pending, labels = {}, None, None, [], [], {}
    for line in dis.splitlines():
        m = re.match(r"\s*\.text\.(\S+):", line)
        if m:
            name, cur, labels = m.group(1), [], {}
            funcs[name] = (cur, labels)
            stack = []
            continue
        if cur is None:
            continue
        m = re.match(r"\s*//## File \"([^\"]+)\", line (\d+)(?: inlined at \"([^\"]+)\", line (\d+))?", line)
        if m:
            f = os.path.basename(m.group(1))
            pending.append((f, int(m.group(2)), os.path.basename(m.group(3)) if m.group(3) else None,
                            int(m.group(4)) if m.group(4) else None))
            continue
        m = re.match(r"\s*(\.L_x_\d+):", line)
        if m:
            labels[m.group(1)] = None  # filled by the next instruction
            continue
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z0-9_.]+)(.*?);", line)
        if m:
            if pending:  # innermost location first, then the call sites
                stack = [(pending[0][0], pending[0][1])]
                for p in pending:
                    if p[2]:
                        stack.append((p[2], p[3]))
                pending = []
            ins = Ins(int(m.group(1), 16), (m.group(2) or "").strip(), m.group(3), m.group(4), tuple(stack))
            for k, v in labels.items():
                if v is None:
                    labels[k] = ins.addr
            cur.append(ins)
    out = {}
    for name, (ins, labels) in funcs.items():
        for i in ins:
            if i.op.startswith("BRA") or i.op.startswith("CALL"):
                m = re.search(r"`\((\.L_x_\d+)\)", i.text)
                if m:
                    i.target = labels.get(m.group(1))
                else:
                    m = re.search(r"0x([0-9a-f]+)", i.text)
                    i.target = int(m.group(1), 16) if m else None
        out[name] = ins
    return out


def func_named(funcs, pattern):
    names = [n for n in funcs if re.search(pattern, n)]
    if len(names) != 1:
        sys.exit(f"gpu_model.py: kernel {pattern}: found {names}")
    return names[0], funcs[names[0]]


def source_block(src_lines, pattern, after=0):
    """Line numbers (1-based, inclusive) of the body of the brace block opened
    on the first line matching pattern at or after line `after` (the line
    after the match to the closing brace: the condition of an `if` runs
    either way)."""
    for n in range(after, len(src_lines)):
        m = re.search(pattern, src_lines[n])
        if m:
            depth, started = 0, False
            for k in range(n, len(src_lines)):
                for ch in src_lines[k][m.start() if k == n else 0:]:
                    if ch == "{":
                        depth, started = depth + 1, True
                    elif ch == "}":
                        depth -= 1
                        if started and depth <= 0:
                            return (n + 2, k + 1)
            break
    sys.exit(f"gpu_model.py: no source line matches {pattern!r}")


def source_line(src_lines, pattern, after=0):
    for n in range(after, len(src_lines)):
        if re.search(pattern, src_lines[n]):
            return n + 1
    sys.exit(f"gpu_model.py: no source line matches {pattern!r}")


class Walker:
    """One thread's path through a kernel's SASS, by the rules above."""

    def __init__(self, ins, hot, cold, trips, verbose=False):
        self.ins = ins
        self.at = {i.addr: k for k, i in enumerate(ins)}
        self.hot = hot        # (file, first, last) ranges: code of this case
        self.cold = cold      # (file, first, last) ranges: code of other cases
        self.trips = trips    # function(loop back-branch Ins) -> iterations
        self.verbose = verbose
        self.unroll_trips = {}  # source line of a runtime-length loop -> its trip count
        self.prefer = {}        # a branch's (file, line) -> (file, line): its side inlined there (first 4 instructions)
        self.log = []

    def kind(self, i):
        """'hot', 'cold' or None. Each source frame of i (the line, and the
        lines it is inlined at) takes the narrowest listed range holding it;
        i is cold if any frame is (code of this case inlined into another
        case's branch), else hot if any frame is."""
        tags = set()
        for (sf, sl) in i.stack:
            best = None
            for tag, ranges in (("hot", self.hot), ("cold", self.cold)):
                for (f, a, b) in ranges:
                    if sf == f and a <= sl <= b and (best is None or b - a < best[0]):
                        best = (b - a, tag)
            if best:
                tags.add(best[1])
        return "cold" if "cold" in tags else "hot" if "hot" in tags else None

    def region_cold(self, k0, k1):
        """Whether the path skips the instructions [k0, k1) that a forward
        branch jumps over: when they start with code of another case, when
        they are a short call into a slow path, or when they hold a loop
        unrolled further than its trip count (the compiler's 16/8/4-way
        bodies of a runtime-length loop, for a filter of 3)."""
        if k0 >= k1:
            return False
        if k1 - k0 <= 16 and any(self.ins[k].op.startswith("CALL") for k in range(k0, k1)):
            return True
        # loads of a runtime-length loop's line, in runs between branches: a
        # region whose every run is longer than the trip count is an unrolled
        # body that this trip count never enters
        runs, run = [], 0
        for k in range(k0, k1):
            i = self.ins[k]
            if i.op.startswith(("BRA", "BAR", "EXIT")):
                if run:
                    runs.append(run)
                run = 0
            elif i.op.startswith(("LDS", "LDG")) and i.stack and i.stack[0][1] in self.unroll_trips:
                run += 1
        if run:
            runs.append(run)
        if runs and min(runs) > min(self.unroll_trips.values()):
            return True
        kinds = {self.kind(self.ins[k]) for k in range(k0, k1)}
        if "hot" in kinds:
            return False
        return "cold" in kinds

    def walk(self, start, stop, limit=200000):
        """Instructions issued from address start until the path reaches
        address stop (not counted). Returns (count, histogram of opcodes)."""
        k, n, hist, taken = self.at[start], 0, {}, {}
        self.visited, self.path = set(), []
        while True:
            i = self.ins[k]
            self.visited.add(i.addr)
            self.path.append(i)
            if i.addr == stop and n:
                return n, hist
            n += 1
            hist[i.op.split(".")[0]] = hist.get(i.op.split(".")[0], 0) + 1
            if n > limit:
                sys.exit("gpu_model.py: the walk does not end (a loop without a trip count?)")
            if i.op == "EXIT" and not i.pred:
                return n, hist
            if i.op.startswith("BRA") and i.target is not None:
                t = self.at[i.target]
                if not i.pred:
                    k = t
                    continue
                if i.target <= i.addr:  # a loop's back edge
                    c = taken.get(i.addr, 0) + 1
                    if c < self.trips(i):
                        taken[i.addr] = c
                        k = t
                        continue
                    taken[i.addr] = 0
                    k += 1
                    continue
                want = self.prefer.get(i.stack[0]) if i.stack else None
                pf = [any(want in y.stack for y in self.ins[x:x + 4]) for x in (k + 1, t)]
                skip = pf[1] if want and pf[0] != pf[1] else self.region_cold(k + 1, t)
                if self.verbose:
                    self.log.append(f"  {i.addr:#06x} {i.pred} BRA -> {i.target:#06x}: "
                                    f"{'jump (skip cold code)' if skip else 'fall through'}")
                k = t if skip else k + 1
                continue
            k += 1


def layer_loop(ins, bar_line):
    """The per-layer loop: the back edge (branch at B to T <= B) with the
    widest span around the barrier attributed to bar_line."""
    bars = [i.addr for i in ins if i.op.startswith("BAR") and any(l == bar_line for (_, l) in i.stack)]
    if not bars:
        sys.exit(f"gpu_model.py: no barrier at source line {bar_line}")
    best = None
    for i in ins:
        if i.op.startswith("BRA") and i.target is not None and i.target <= i.addr and i.target <= bars[0] <= i.addr:
            if best is None or i.addr - i.target > best[1] - best[0]:
                best = (i.target, i.addr)
    if best is None:
        sys.exit("gpu_model.py: no loop around the layer barrier")
    return best


# ---------------------------------------------------------------- main ----

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"), help="build dir with ntkd_bench_cnn")
    ap.add_argument("--cubin", help="a cubin built with -lineinfo (default: compile cnn_cuda.cu here)")
    ap.add_argument("--kernel", default="both", choices=["slice3", "slice", "both"])
    ap.add_argument("--slice3", default="b4", choices=["b4", "b3"],
                    help="SLICE3's variant: b4 (64 registers, the default launch) or b3 (80 registers)")
    ap.add_argument("-v", "--verbose", action="count", default=0,
                    help="-v: the branch decisions; -vv: also every instruction on the path")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="gpu_model.")
    try:
        cubin = a.cubin
        if not cubin:
            cubin = os.path.join(tmp, "cnn_cuda.cubin")
            nvcc = tool("nvcc")
            cmd = [nvcc, "-cubin", "-arch=sm_90", "-lineinfo"] + NVCC_FLAGS + [
                "-I", os.path.join(ROOT, "include"), "-I", os.path.join(ROOT, "src"),
                "-o", cubin, os.path.join(ROOT, "src/backend/cuda/cnn_cuda.cu")]
            print("compile:", " ".join(os.path.basename(c) if c == nvcc else c for c in cmd))
            run(cmd)
        dis = run([tool("nvdisasm"), "-gi", "-c", cubin])
        res = run([tool("cuobjdump"), "-res-usage", cubin])
        funcs = parse_functions(dis)
        regs = {}
        for m in re.finditer(r"Function (\S+):\s*\n\s*REG:(\d+) STACK:(\d+) SHARED:(\d+)", res):
            regs[m.group(1)] = (int(m.group(2)), int(m.group(3)), int(m.group(4)))
        kernels = ["slice", "slice3"] if a.kernel == "both" else [a.kernel]
        results = {}
        for kname in kernels:
            results[kname] = model(kname, funcs, regs, geometry(a.build, kname == "slice"), a.verbose, a.slice3)
        if len(results) == 2:
            o, n = results["slice"], results["slice3"]
            print("\n== before (SLICE) -> after (SLICE3)")
            for key, label, fmt in (("ipc", "SASS instructions per cell per layer", "%.1f"),
                                    ("util", "thread-slot use", "%.1f %%"),
                                    ("blocks_sm", "blocks per SM", "%d"),
                                    ("us", "predicted us per entry", "%.1f")):
                mul = 100 if key == "util" else 1
                print(f"  {label:40s} {fmt % (o[key] * mul):>10s} -> {fmt % (n[key] * mul):>10s}")
        last = results.get("slice3") or results.get("slice")
        print(f"predicted CNTK-GAP-21 us per entry: {last['us']:.1f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def geometry(build, generic):
    """The launches of a CNTK-GAP-21 tile of two images, from the real
    launch plan (generic: with the SLICE3 kernel turned off)."""
    exe = os.path.join(build, "ntkd_bench_cnn")
    if not os.access(exe, os.X_OK):
        sys.exit(f"gpu_model.py: {exe} not found: build it (cmake --build {build} --target ntkd_bench_cnn)")
    env = dict(os.environ, NTKD_GPU_SLICE3="0" if generic else "1")
    out = run([exe, "--plan", ARCH, "2"], env=env)
    return [json.loads(l) for l in out.splitlines() if l.startswith("{")]


def wavefronts(addrs, width):
    """Shared-memory wavefronts of one warp-wide access: byte addresses per
    lane (None: lane idle), `width` bytes each. 32 banks of 4 bytes; lanes
    go in groups of 128 / width (one 128-byte wavefront each at best), and a
    group takes as many wavefronts as the most distinct words in one bank."""
    per, total = 128 // width, 0
    for g in range(0, 32, per):
        banks = {}
        for a in addrs[g:g + per]:
            if a is None:
                continue
            for word in range(a // 4, (a + width) // 4):
                banks.setdefault(word % 32, set()).add(word)
        total += max((len(v) for v in banks.values()), default=0)
    return total


def smem_traffic(kname, L, S, pad):
    """Shared-memory wavefronts per layer for one pair (all blocks), and per
    warp on average, from the kernels' layouts and index formulas."""
    h, w, bh, bw, nt = L["h"], L["w"], L["bh"], L["bw"], L["threads"]
    total, warps = 0, 0
    if kname == "slice3":
        LD = w + 3
        ndi, ndj = min(2 * bh + 1, h), min(2 * bw + 1, w)
        items = ((h + S - 1) // S) * w
        cache = {}
        for bx in range(L["gx"]):
            tj = bx % ndj
            Dj = tj if tj <= bw else tj + w - ndj
            if Dj not in cache:  # rows do not change banks: LD pairs apart, every lane on the same row
                t = 0
                for wb in range(0, items, 32):
                    cols = [(it % w) for it in range(wb, min(wb + 32, items))]
                    strip = [(it // w) for it in range(wb, min(wb + 32, items))]
                    mc = [c + 1 + (c >= Dj) for c in cols]
                    for r in range(S + 2):  # the rows around the strip: left, centre, right
                        for dc in (-1, 0, 1):
                            t += wavefronts([8 * ((s * S + r) * LD + m + dc) for s, m in zip(strip, mc)], 8)
                    for k in range(S):      # the stores
                        t += wavefronts([8 * ((s * S + 1 + k) * LD + m) for s, m in zip(strip, mc)], 8)
                cache[Dj] = t
            total += cache[Dj]
            warps += math.ceil(items / 32)
        return total, total / warps, f"LDS.64/STS.64 of (NNGP, NTK) pairs, row stride {LD} pairs"
    ld = w + 2 * pad
    nbw = 2 * bw + 1
    for bx in range(L["gx"]):
        di, dj = bx // nbw - bh, bx % nbw - bw
        i0, j0 = max(di, 0), max(dj, 0)
        hv, vw = h - abs(di), w - abs(dj)
        lo = 1
        # row pass: (hv + 2) rows x vw row sums, g and t: 3 loads and a store each
        n = (hv + 2) * vw
        for k0 in range(0, n, 32):
            ks = range(k0, min(k0 + 32, n))
            base = [4 * ((i0 + pad - lo + k // vw) * ld + pad - lo + j0 + k % vw) for k in ks]
            for b in range(3):
                total += 2 * wavefronts([a + 4 * b for a in base], 4)
            total += 2 * wavefronts([4 * ((i0 + pad - lo + k // vw) * ld + j0 + k % vw) for k in ks], 4)
            warps += 1
        # cell pass: hv x vw cells, 3 loads of row sums and a store, g and t
        n = hv * vw
        for k0 in range(0, n, 32):
            ks = range(k0, min(k0 + 32, n))
            for a_ in range(3):
                total += 2 * wavefronts([4 * ((i0 + k // vw + pad - lo + a_) * ld + j0 + k % vw) for k in ks], 4)
            total += 2 * wavefronts([4 * ((i0 + k // vw + pad) * ld + pad + j0 + k % vw) for k in ks], 4)
            warps += 1
    return total, total / warps, f"LDS.32/STS.32 of separate NNGP, NTK and row-sum arrays, row stride {ld} floats"


def model(kname, funcs, regs, plan, verbose, variant="b4"):
    src_path = os.path.join(ROOT, "src/kernels/cnn_dev_impl.h")
    src = open(src_path).read().splitlines()
    F = "cnn_dev_impl.h"
    maps = open(os.path.join(ROOT, "src/kernels/kernel_maps.h")).read().splitlines()
    erf_lines = [("kernel_maps.h",) + source_block(maps, r"ntk_erff\(float q12"),
                 ("kernel_maps.h",) + source_block(maps, r"ntk_atan2f\(float y")]
    relu = [("kernel_maps.h",) + source_block(maps, r"ntk_abreluf_r\(float a"),
            ("kernel_maps.h",) + source_block(maps, r"ntk_abreluf_angle\(float a"),
            ("kernel_maps.h",) + source_block(maps, r"ntk_acos_over_sinf\(float x")]
    # the GPU's copy of the float ABRelu map on precomputed slot products, and its square root
    devh = open(os.path.join(ROOT, "src/kernels/cnn_dev.h")).read().splitlines()
    relu += [("cnn_dev.h",) + source_block(devh, r"ntk_dev_abreluf_vu\(float a"),
             ("cnn_dev.h",) + source_block(devh, r"ntk_dev_sqrtf_map\(float x")]
    if kname == "slice3":
        fname, ins = func_named(funcs, r"k_slice3_b4_fILi1ELi0E" if variant == "b4" else r"k_slice3_fILi1ELi0E")
        body = source_block(src, r"^static .*\bdv_slice3\(")
        nl = source_block(src, r"^static .*\bs3_nl\(")
        strip = source_block(src, r"^static .*\bs3_strip\(")
        fast = source_block(src, r"^static .*\bs3_fast\(")
        within = source_line(src, r"s3_fast\(.*DV_S \+ 1\);", strip[0])  # the strips in one slice
        slow = source_line(src, r"cell by cell: the last rows", strip[0])
        generic = source_line(src, r"else s3_post\(", fast[0])
        last_out = source_block(src, r"\} else if \(!capture\) \{", fast[0])
        hot = [(F,) + fast, (F, within, within),
               (F,) + source_block(src, r"\} else if \(fuse == NTK_FUSE_RELU\) \{", nl[0]),
               (F,) + source_block(src, r"\} else \{", source_line(src, r"if \(capture\) \{", nl[0]))] + relu
        cold = [(F,) + source_block(src, r"if \(fuse == NTK_FUSE_ERF\) \{", nl[0]),
                (F,) + source_block(src, r"\} else \{", source_line(src, r"REAL a = sizeof\(REAL\) == 4 \? \(REAL\)o->af", nl[0]) - 2),
                (F,) + source_block(src, r"if \(capture\) \{", nl[0]),
                (F, generic, generic),
                (F, slow, strip[1]),
                (F,) + last_out,
                (F,) + source_block(src, r"\} else \{", source_line(src, r"if \(items <= nt\) \{", body[0]))] + erf_lines
        bar_line = source_line(src, r"BLK_SYNC\(B\);", source_line(src, r"while \(kc < k1\)", body[0]))
    else:
        fname, ins = func_named(funcs, r"^_Z9k_slice_f12ntk_dev_args$")
        # dv_slice's steps: the Conv (with its fused nonlinearity) hot, Dense
        # and a nonlinearity on its own cold
        conv = source_block(src, r"^static .*\bdv_slice_conv\(")
        cn = source_block(src, r"^static .*\bdv_cell_nonlin\(")
        nl = source_block(src, r"^static .*\bdv_nonlin\(")
        # the plain SLICE kernel (dv_nonlin's any = 0): ABRelu hot, Erf cold
        erf_call = source_line(src, r"NTK_MAP_ERF\) return ERF", nl[0])
        relu_call = source_line(src, r"return ABRELU_R\(\(REAL\)o->map.a", nl[0])
        hot = [(F,) + conv, (F,) + cn, (F, relu_call, relu_call)] + relu
        cold = [(F,) + source_block(src, r"^static .*\bdv_slice_dense\("),
                (F,) + source_block(src, r"^static .*\bdv_slice_nonlin\("),
                (F,) + source_block(src, r"if \(capture\) \{", cn[0]),
                (F, erf_call, erf_call)] + erf_lines
        bar_line = source_line(src, r"BLK_SYNC\(B\);", source_line(src, r"rows_t\[r \* ld \+ j\] = st;", conv[0]))
    lo, hi = layer_loop(ins, bar_line)
    print(f"\n== {kname.upper()}: {fname}")
    print(f"  per-layer loop: SASS {lo:#06x}..{hi:#06x} ({(hi - lo) // 16 + 1} instructions of code), "
          f"around the barrier of {F}:{bar_line}")
    nreg, stack, _ = regs.get(fname, (0, 0, 0))
    want = "SLICE3" if kname == "slice3" else "SLICE"
    launches = [l for l in plan if l["kernel"] == want and not l["capture"] and l["with_t"]]
    if not launches:
        sys.exit(f"gpu_model.py: no {want} launch for the pairs in the plan")
    L = launches[0]
    h, w, nt, bh, bw, smem = L["h"], L["w"], L["threads"], L["bh"], L["bw"], L["smem"]
    nlayers = sum(1 for op in L["ops"] if op == "CONV")
    S = int(re.search(r"#define DV_S (\d+)", "\n".join(src)).group(1))  # rows per strip
    cells_block, slots = [], []
    if kname == "slice3":
        # block bx = (ti, tj): the wrapped offset (Di, Dj), its four slices' cells
        ndi, ndj = min(2 * bh + 1, h), min(2 * bw + 1, w)
        items = ((h + S - 1) // S) * w
        for bx in range(L["gx"]):
            ti, tj = bx // ndj, bx % ndj
            Di = ti if ti <= bh else ti + h - ndi
            Dj = tj if tj <= bw else tj + w - ndj
            rows = (h - Di if Di <= bh else 0) + (Di if h - Di <= bh else 0)
            cols = (w - Dj if Dj <= bw else 0) + (Dj if w - Dj <= bw else 0)
            cells_block.append(rows * cols)
            slots.append(math.ceil(items / nt) * nt * S)
        cells_thread = S
    else:
        nbw = 2 * bw + 1
        for bx in range(L["gx"]):
            di, dj = bx // nbw - bh, bx % nbw - bw
            n = (h - abs(di)) * (w - abs(dj))
            cells_block.append(n)
            slots.append(math.ceil(n / nt) * nt)
        cells_thread = 1
    # the path of one thread through one layer
    if kname == "slice3":
        wk = Walker(ins, hot, cold, lambda i: 1, verbose)
        wk.prefer = {(F, within - 1): (F, within)}  # a strip in one slice
        n_layer, hist = wk.walk(lo, hi + 16)
        per_cell = n_layer / cells_thread
        how = (f"{n_layer} instructions per thread per layer (one strip of {S} cells: the fast path), "
               f"/ {S} cells per thread")
    else:
        # SLICE: the row pass (rows of the slice + 2 per cell column) and the cell pass;
        # f = 3 loops: the compiler's unrolled-by-4 bodies are skipped, the remainder runs 3 times.
        f_loops = {l for l in range(conv[0], conv[1] + 1) if re.search(r"for \(unsigned [ab] = 0; [ab] < f;", src[l - 1])}
        wk = Walker(ins, hot, cold, lambda i: 1, verbose)
        wk.unroll_trips = {l: 3 for l in f_loops}
        n_layer, hist = wk.walk(lo, hi + 16)
        # the row pass: its loop body once per row cell, (h + 2) rows per h cells
        row_line = source_line(src, r"for \(unsigned k2 = tid; k2 < nr \* vw; k2 \+= nt\)", conv[0])
        back = [i for i in ins if i.op.startswith("BRA") and i.target is not None and i.target <= i.addr
                and i.stack and i.stack[0][1] == row_line and i.addr in wk.visited]
        if len(back) != 1:
            print("\n".join(wk.log))
            sys.exit(f"gpu_model.py: the row pass loop (line {row_line}): {len(back)} back edges")
        b_row, _ = wk.walk(back[0].target, back[0].addr + 16)
        rows_per_cell = (h + 2) / h
        per_cell = n_layer + (rows_per_cell - 1) * b_row
        how = (f"{n_layer} instructions per thread per layer with one row-sum cell and one cell, "
               f"+ {rows_per_cell - 1:.4f} x {b_row} (the row pass body: {h + 2} rows of row sums per {h} rows of "
               f"cells), / 1 cell per thread")
    if verbose:
        print("\n".join(wk.log))
    if verbose > 1:
        for i in wk.path:
            st = " <- ".join(f"{f}:{l}" for f, l in i.stack[:3])
            print(f"    {i.addr:#06x} {i.pred:5s} {i.op:22s} {i.text.strip()[:34]:34s} {st}")
    print(f"  path: {how} = {per_cell:.1f} per cell per layer")
    print("  by opcode: " + ", ".join(f"{k} {v}" for k, v in sorted(hist.items(), key=lambda x: -x[1])[:14]))
    useful, issued = sum(cells_block), sum(slots)
    util = useful / issued
    print(f"  geometry (ntkd_bench_cnn --plan, i.e. cnn_gpu.c's launches): {L['gx']} blocks x {L['gy']} pairs, "
          f"{nt} threads, {h}x{w}, offsets |di| <= {bh}, |dj| <= {bw}, {nlayers} conv layers, {smem} bytes of shared "
          f"memory; cells per block {min(cells_block)}..{max(cells_block)}")
    print(f"  thread slots: {useful} useful cells / {issued} slots issued per layer = {100 * util:.1f} %")
    # occupancy
    regs_alloc = max(8, (nreg + 7) // 8 * 8)
    by_regs = REGS_PER_SM // (regs_alloc * nt)
    by_threads = MAX_THREADS_SM // nt
    by_smem = SMEM_PER_SM // (smem + SMEM_RESERVED)
    bsm = min(by_regs, by_threads, by_smem, MAX_BLOCKS_SM)
    print(f"  registers {nreg} per thread (stack {stack}): blocks per SM = min(regs {by_regs}, threads {by_threads}, "
          f"shared memory {by_smem} of {smem} B, {MAX_BLOCKS_SM}) = {bsm}, {bsm * nt // 32} warps")
    es = L["elem"]
    pad = 0
    if kname == "slice":  # the generic layout's border: 6 (h + 2 pad)(w + 2 pad) elements + 2 nt doubles
        side = math.isqrt((smem - 16 * nt) // (6 * es))
        pad = (side - w) // 2
    wf_total, wf, layout = smem_traffic(kname, L, S, pad)
    print(f"  shared memory: {wf_total:.0f} wavefronts per layer per pair, {wf:.1f} per warp pass on average "
          f"({layout}; 32 banks x 4 bytes, one wavefront per clock per SM)")
    # time
    warps_layer = issued / cells_thread / 32          # warp-slots of cell work per layer per pair
    instr = warps_layer * per_cell * cells_thread * nlayers  # warp instructions per pair
    rate = SMS * SCHED * CLOCK
    t_issue = instr / rate
    t_smem = wf_total * nlayers / (SMS * SMEM_WAVEFRONTS_PER_CLK * CLOCK)
    print(f"  per pair: {warps_layer:.0f} warps x {per_cell * cells_thread:.0f} instructions x {nlayers} layers = {instr:.3g} warp "
          f"instructions; at {SMS} SMs x {SCHED} schedulers x {CLOCK / 1e9:.2f} GHz = {rate:.3g}/s: "
          f"{t_issue * 1e6:.1f} us")
    print(f"  shared memory: {wf_total:.0f} wavefronts x {nlayers} layers at 1 per clock per SM on {SMS} SMs: "
          f"{t_smem * 1e6:.1f} us (overlaps the issue; the larger of the two bounds)")
    t = max(t_issue, t_smem)
    print(f"  predicted: {t * 1e6:.1f} us per entry at full issue (no stalls; the layers only, "
          f"not the per-block set-up, readout or copies)")
    return {"ipc": per_cell, "util": util, "blocks_sm": bsm, "us": t * 1e6}


if __name__ == "__main__":
    main()
