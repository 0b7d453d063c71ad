#!/usr/bin/env python3
"""The store damage corpus (issue 25, items 3-5), run by tests/store_corpus.sh in a
scratch folder: small stores built with ntkd, then finished, interrupted by SIGKILL at
random moments, read while a job writes them, damaged (flipped bytes in headers, payloads
and padding, zeroed pages, swapped records), their index forged (resealed checksums), and
repaired then interrupted. On every one the C tools and the Python reader must agree:
`ntkd verify` and verify() (exit, and tiles intact / damaged / present / needed),
`ntkd export` and a read of the same block for the whole matrix and two partial blocks
(exit 0 / 4 / 6, and the same bytes when both read), and the verdicts the issue asks
for. Then memory and time that follow the store (a 4 GB sparse index, a header of 1.7e10
tiles with no records) and bad arguments to the reader.

Usage: store_corpus.py NTKD SEED (ntkd_store importable: PYTHONPATH=python)
"""
import io
import os
import random
import re
import shutil
import signal
import struct
import subprocess
import sys
import time
import tracemalloc

import numpy as np
import xxhash

import ntkd_store

NTKD, SEED = os.path.abspath(sys.argv[1]), int(sys.argv[2])
rng = random.Random(SEED)
passed = failed = 0
h3 = xxhash.xxh3_64_intdigest


def check(what, cond, detail=""):
    global passed, failed
    if cond:
        passed += 1
        print("ok: " + what, flush=True)
    else:
        failed += 1
        print("FAILED: " + what + ("\n    " + str(detail).replace("\n", "\n    ") if detail else ""), flush=True)


def run(*args, timeout=300, env=None):
    p = subprocess.run([NTKD, *args], capture_output=True, text=True, timeout=timeout, env=env)
    return p.returncode, p.stdout + p.stderr


def job(name, arch, tile, kernel=None, data="x.npy"):
    with open(name + ".conf", "w") as f:
        f.write("[data]\npath = %s\n[model]\narch = %s\nw_std = 1.4\n" % (data, arch))
        if kernel:
            f.write("kernel = %s\n" % kernel)
        f.write("[compute]\ntile = %d\n[output]\npath = %s.ntk\nprogress = 1000\n" % (tile, name))


def copy(src, dst, index=True):
    shutil.copyfile(src + ".ntk", dst + ".ntk")
    if os.path.exists(dst + ".ntk.index"):
        os.remove(dst + ".ntk.index")
    if index and os.path.exists(src + ".ntk.index"):
        shutil.copyfile(src + ".ntk.index", dst + ".ntk.index")
    conf = open(src + ".conf").read().replace("path = %s.ntk" % src, "path = %s.ntk" % dst)
    open(dst + ".conf", "w").write(conf)


# ---- the format, for forging (docs/STORE-FORMAT.md) ---------------------------------------

def u32(b, o):
    return struct.unpack_from("<I", b, o)[0]


def u64(b, o):
    return struct.unpack_from("<Q", b, o)[0]


def geometry(name):
    """The store's geometry from header copy A, or copy B (at 4096) when A is damaged."""
    with open(name + ".ntk", "rb") as f:
        b = f.read(8192)
    if b[:8] != b"NTKDSTOR":
        b = b[4096:]
    return {"n": u64(b, 16), "tile": u32(b, 32), "align": u32(b, 44), "first": u64(b, 136), "id": b[72:88]}


def records(name):
    """tile -> (offset, extent, payload bytes) of each newest record, from ntkd info --records."""
    out = run("info", "--records", name + ".ntk")[1]
    res = {}
    with open(name + ".ntk", "rb") as f:
        for line in out.splitlines():
            p = line.split()
            if line.startswith("record:") and len(p) == 3:
                t, off = int(p[1]), int(p[2])
                f.seek(off)
                r = f.read(128)
                res[t] = (off, u64(r, 80), u64(r, 56))
    return res


def read_index(name):
    b = open(name + ".ntk.index", "rb").read()
    return b[:64], [b[i:i + 64] for i in range(64, len(b) // 64 * 64, 64)]


def seal(e):
    e = bytearray(e)
    e[56:64] = h3(bytes(e[:56])).to_bytes(8, "little")
    return bytes(e)


def tile_entry(t, off, n, seq):
    e = bytearray(64)
    struct.pack_into("<I", e, 0, 1)
    struct.pack_into("<QQQQ", e, 8, t, off, n, seq)
    return seal(e)


def mark(covered):
    e = bytearray(64)
    struct.pack_into("<I", e, 0, 2)
    struct.pack_into("<Q", e, 40, covered)
    return seal(e)


def entries(lines):
    """(kind, tile, offset, len, seq, covered) of each line."""
    return [(u32(e, 0),) + struct.unpack_from("<QQQQQ", e, 8) for e in lines]


def write_index(name, header, lines):
    open(name + ".ntk.index", "wb").write(header + b"".join(lines))


def patch(name, off, data):
    with open(name + ".ntk", "r+b") as f:
        f.seek(off)
        f.write(data)


def flip(name, off):
    with open(name + ".ntk", "r+b") as f:
        f.seek(off)
        b = f.read(1)
        f.seek(off)
        f.write(bytes([b[0] ^ (1 << rng.randrange(8))]))


def dead_header(name, off, extent, seq=10 ** 6):
    """A dead-region record header of this store, as a resume writes one."""
    g = geometry(name)
    h = bytearray(128)
    h[0:8] = b"NTKDTILE"
    struct.pack_into("<II", h, 8, 2, 2)
    h[16:32] = g["id"]
    struct.pack_into("<Q", h, 32, (1 << 64) - 1)
    struct.pack_into("<Q", h, 80, extent)
    struct.pack_into("<Q", h, 88, seq)
    h[120:128] = h3(bytes(h[:120])).to_bytes(8, "little")
    patch(name, off, bytes(h))


# ---- the two readers on one store ---------------------------------------------------------

def tile_block(name, t):
    """rows, cols of tile t as --rows/--cols specs."""
    g = geometry(name)
    T, n = g["tile"], g["n"]
    bi = (int((8 * t + 1) ** 0.5) - 1) // 2
    while bi * (bi + 1) // 2 > t:
        bi -= 1
    while (bi + 1) * (bi + 2) // 2 <= t:
        bi += 1
    bj = t - bi * (bi + 1) // 2
    return "%d:%d" % (bi * T, min(bi * T + T, n)), "%d:%d" % (bj * T, min(bj * T + T, n))


def blocks_for(name, focus):
    """The whole matrix, the upper-triangle mirror of tile `focus`, and tile 0's block (or
    the last row's first tile when the focus is 0)."""
    r, c = tile_block(name, focus)
    other = 0 if focus else tile_index_of_last_row(name)
    r2, c2 = tile_block(name, other)
    return [None, (c, r), (r2, c2)]


def tile_index_of_last_row(name):
    g = geometry(name)
    nb = (g["n"] + g["tile"] - 1) // g["tile"]
    return (nb - 1) * nb // 2


def kill_job(p, conf):
    """SIGKILL a job and all its ranks (Open MPI gives the ranks process groups of their
    own): every process of this ntkd on `conf` in this folder, then wait until none is left."""
    here = os.getcwd()

    def ours():
        pids = []
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                cmd = open("/proc/%s/cmdline" % d, "rb").read().split(b"\0")
                if os.fsencode(NTKD) in cmd and os.fsencode(conf) in cmd and os.readlink("/proc/%s/cwd" % d) == here:
                    pids.append(int(d))
            except OSError:
                pass
        return pids

    for pid in [p.pid] + ours():
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    p.wait()
    while ours():
        for pid in ours():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.01)


def tiles_in(name):
    """Tiles present per ntkd info (-1 without a store)."""
    m = re.search(r"progress: +(\d+)/", run("info", name + ".ntk")[1]) if os.path.exists(name + ".ntk") else None
    return int(m.group(1)) if m else -1


def stored(S):
    """The tiles a Store holds (the reader's own map)."""
    return list(S._v.map) if hasattr(S, "_v") else list(S._scan.index)  # (the reader before issue 25)


def sl(spec):
    a, b = spec.split(":")
    return slice(int(a), int(b))


def c_readers(name, blocks):
    rc, out = run("verify", name + ".ntk")
    m = re.search(r"(\d+) tiles intact, (\d+) damaged, (\d+) of (\d+) tiles present", out)
    counts = tuple(map(int, m.groups())) if m else None
    ex = []
    for i, b in enumerate(blocks):
        path = "%s-c%d.npy" % (name, i)
        if os.path.exists(path):
            os.remove(path)
        args = ["export", name + ".ntk", path] + (["--rows", b[0], "--cols", b[1]] if b else [])
        erc, eout = run(*args)
        ex.append((erc, np.load(path) if erc == 0 else None, eout.strip()))
    return rc, counts, out, ex


def py_code(e):
    return 4 if isinstance(e, ntkd_store.DamagedStoreError) else 6 if isinstance(
        e, ntkd_store.IncompleteStoreError) else 2


def py_readers(name, blocks):
    """Python as separate commands: a fresh open for verify and for each block."""
    try:
        S = ntkd_store.open(name + ".ntk")
        try:
            rep = S.verify()
            vrc = 0
        except ntkd_store.DamagedStoreError as e:
            rep, vrc = e.report, 4
        counts = (rep.intact, rep.damaged, rep.present, rep.needed)
        S.close()
    except ntkd_store.StoreError as e:
        vrc, counts = py_code(e), None
    ex = []
    for b in blocks:
        try:
            with ntkd_store.open(name + ".ntk") as S:
                K = S["ntk" if "ntk" in S.kernels else "nngp"]
                ex.append((0, K[:, :] if b is None else K[sl(b[0]), sl(b[1])], ""))
        except ntkd_store.StoreError as e:
            ex.append((py_code(e), None, str(e)))
    return vrc, counts, ex


def readers(name, focus, what, expect=None):
    """Both readers on store `name`; they must agree, and give `expect` if given: a dict of
    verify, full, block (the focus tile's mirror), other (another tile's block)."""
    blocks = blocks_for(name, focus)
    cv, cc, cout, cex = c_readers(name, blocks)
    pv, pc, pex = py_readers(name, blocks)
    got = {"verify": cv, "full": cex[0][0], "block": cex[1][0], "other": cex[2][0]}
    agree = cv == pv and (cc == pc or pc is None) and all(a[0] == b[0] for a, b in zip(cex, pex))
    same = all(a[1] is None or b[1] is None or (a[1].dtype == b[1].dtype and a[1].shape == b[1].shape
                                                 and a[1].tobytes() == b[1].tobytes()) for a, b in zip(cex, pex))
    detail = "C: verify %d %s, exports %s\nPython: verify %d %s, reads %s\n%s\n%s" % (
        cv, cc, [e[0] for e in cex], pv, pc, [e[0] for e in pex],
        "\n".join(l for l in cout.splitlines() if "damaged" in l or "index" in l)[:1500],
        "\n".join(e[2][:400] for e in cex + pex if e[0] not in (0,)))
    check("%s: ntkd and Python agree (verify %d, export whole/block/other %d/%d/%d)%s" % (
        what, cv, got["full"], got["block"], got["other"], ", the same bytes" if any(
            e[0] == 0 for e in cex) else ""), agree and same, detail)
    if expect:
        bad = {k: (got[k], v) for k, v in expect.items() if got[k] != v}
        check("%s: as the issue asks (%s)" % (what, ", ".join("%s %s" % kv for kv in expect.items())), not bad,
              "got %s\n%s" % (bad, detail))
    return got, cout


def resume(name, what, recompute=None, clean=None):
    """Rerun the job on `name`: it repairs (never writes into an intact record), verify
    passes, the matrix equals the clean one; recompute: how many tiles it may compute."""
    rc, out = run(name + ".conf")
    m = re.search(r"ntkd: (\d+) of \d+ tiles to compute", out)
    ncomp = int(m.group(1)) if m else -1
    vrc, vout = run("verify", name + ".ntk")
    info = run("info", name + ".ntk")[1]
    ok = rc == 0 and vrc == 0 and (recompute is None or ncomp == recompute)
    if clean:
        erc, _ = run("export", name + ".ntk", name + "-res.npy")
        ok = ok and erc == 0 and open(name + "-res.npy", "rb").read() == open(clean, "rb").read()
    check("%s: the rerun repairs it (exit %d, %s tiles computed, then verify %d%s)" % (
        what, rc, ncomp, vrc, ", byte-identical" if clean else ""), ok, out[-1500:] + vout[-800:])
    return out, info


# ---- the corpus ------------------------------------------------------------------------------

def calibrate():
    """Layers of [Dense Erf] for a job of ~1.5 s of 78 tiles on this machine, from a run of
    600 layers (the depth is only a size). The time per layer grows with the depth, about as
    its square (tests/e2e_lib.sh, erf_depth), so the depth follows the square root of the time."""
    job("cal", "[Dense Erf]*600 Dense", 50, "nngp")
    t0 = time.monotonic()
    rc, out = run("cal.conf")
    m = re.search(r"tiles ([0-9.]+) s", out)
    took = max(float(m.group(1)) if m else time.monotonic() - t0, 1e-3)
    return max(100, min(1500, int(600 * (1.5 / took) ** 0.5)))


def section(fn, what):
    """Run one part of the corpus; an exception is a failure of that part, and the rest runs."""
    try:
        fn()
    except Exception:  # noqa: BLE001 (reported)
        import traceback
        check("%s: ran to its end" % what, False, traceback.format_exc()[-2000:])


def main():
    print("store_corpus: seed %d (rerun with: tests/store_corpus.sh NTKD %d)" % (SEED, SEED), flush=True)
    r = np.random.default_rng(SEED % (1 << 32))
    np.save("x.npy", r.standard_normal((600, 16)).astype(np.float32))
    np.save("xs.npy", r.standard_normal((300, 16)).astype(np.float32))

    # A finished store: 21 tiles of many pages each (NNGP and NTK).
    job("mine", "Dense Relu Dense", 100)
    rc, _ = run("mine.conf")
    check("a finished store of 21 tiles", rc == 0)
    run("export", "mine.ntk", "mine-clean.npy")
    recs = records("mine")
    order = sorted(recs, key=lambda t: recs[t][0])
    hd, lines = read_index("mine")
    ents = entries(lines)
    readers("mine", 11, "finished", {"verify": 0, "full": 0, "block": 0, "other": 0})
    mid = order[len(order) // 2]  # a record in the middle, not the last below the mark
    size = os.path.getsize("mine.ntk")

    def sec_index():
        # -- 3. the index is checked, not only trusted
        forged = []

        copy("mine", "ix_markall")  # a mark covering the whole file, no entries
        write_index("ix_markall", hd, [mark(size)])
        forged.append(("ix_markall", "index: a sync mark over the whole store and no entries"))
        copy("mine", "ix_markin")  # entries below a record, the mark one page inside it
        X = recs[mid][0]
        write_index("ix_markin", hd, [l for l, e in zip(lines, ents) if e[0] == 1 and e[2] < X] + [mark(X + 4096)])
        forged.append(("ix_markin", "index: the sync mark inside a record"))
        copy("mine", "ix_zeromid")  # a zeroed stretch in the middle
        write_index("ix_zeromid", hd, lines[:5] + [bytes(64)] * 3 + lines[8:])
        forged.append(("ix_zeromid", "index: a zeroed stretch in the middle"))
        copy("mine", "ix_offset")  # an entry's offset moved to another record's (resealed)
        other = order[3]
        write_index("ix_offset", hd, [tile_entry(e[1], recs[other][0], e[3], e[4]) if e[0] == 1 and e[1] == mid else l
                                      for l, e in zip(lines, ents)])
        forged.append(("ix_offset", "index: an entry at another record's offset"))
        copy("mine", "ix_huge")  # a 4 GB sparse index (zeros after its lines)
        os.truncate("ix_huge.ntk.index", 4 << 30)
        forged.append(("ix_huge", "index: 4 GB of zeros after it (truncate -s 4G)"))
        for name, what in forged:
            got, _ = readers(name, mid, what, {"verify": 4, "full": 4, "block": 4})
            info = run("info", name + ".ntk")[1]
            check("%s: info names the index as the damage" % what,
                  re.search(r"^index: +the index .*(disagrees with the store|is damaged)", info, re.M)
                  and "damage:      found" in info, info)
            out, info = resume(name, what, recompute=0, clean="mine-clean.npy")
            check("%s: ... rebuilt from the records, nothing marked dead" % what,
                  "rebuilt from a scan of the records" in out and "dead:" not in info, out[-800:] + info)

        # Forgeries that keep the entries' extents (the index still covers every byte): found
        # where a reader meets them (verify: all; export: the records a block needs, all of them
        # before a tile is called missing); a resume's audit takes the records as they are.
        copy("mine", "ix_retile")  # one tile's entry renamed to another tile
        victim, into = order[4], order[9]
        write_index("ix_retile", hd, [tile_entry(into, e[2], e[3], e[4]) if e[0] == 1 and e[1] == victim else l
                                      for l, e in zip(lines, ents)])
        readers("ix_retile", victim, "index: an entry renamed to another tile", {"verify": 4, "full": 4, "block": 4})
        out, info = resume("ix_retile", "index: an entry renamed to another tile", clean="mine-clean.npy")
        check("index: an entry renamed to another tile: ... nothing marked dead", "dead:" not in info, info)
        copy("mine", "ix_badlen")  # an entry's length changed within its pages
        write_index("ix_badlen", hd, [tile_entry(e[1], e[2], e[3] - 1, e[4]) if e[0] == 1 and e[1] == mid else l
                                      for l, e in zip(lines, ents)])
        readers("ix_badlen", mid, "index: an entry's payload length changed", {"verify": 4, "full": 4, "block": 4,
                                                                                "other": 0})
        out, info = resume("ix_badlen", "index: an entry's payload length changed", recompute=0, clean="mine-clean.npy")
        check("index: an entry's payload length changed: ... the audit takes the record as it is, rewrites the index",
              "placed 1 tile wrongly" in out and "dead:" not in info, out[-800:])
        readers("ix_badlen", mid, "index: an entry's payload length changed, after the rerun", {"verify": 0, "full": 0})

        # two intact records of the same extent swapped in place (the index untouched)
        pairs = [(a, b) for a in order for b in order if a < b and recs[a][1] == recs[b][1] and a != mid]
        if pairs:
            a, b = pairs[rng.randrange(len(pairs))]
            copy("mine", "swap")
            with open("swap.ntk", "r+b") as f:
                f.seek(recs[a][0])
                ra = f.read(recs[a][1])
                f.seek(recs[b][0])
                rb = f.read(recs[b][1])
                f.seek(recs[a][0])
                f.write(rb)
                f.seek(recs[b][0])
                f.write(ra)
            readers("swap", a, "two intact records swapped in place", {"verify": 4, "full": 4, "block": 4})
            out, info = resume("swap", "two intact records swapped in place", recompute=0, clean="mine-clean.npy")
            # (the audit corrects them, or, when one is the record before the mark, the open's
            # check already finds it and the resume rebuilds the index by a scan)
            check("two intact records swapped: ... taken from the records, the index rewritten, nothing marked dead",
                  ("placed 2 tiles wrongly" in out or "rebuilt from a scan of the records" in out)
                  and "dead:" not in info, out[-800:])
            readers("swap", a, "two intact records swapped, after the rerun", {"verify": 0, "full": 0})


    def sec_damage():
        # -- damage: flipped bytes (record header, payload, padding), zeroed pages
        kinds = ["header", "payload", "padding", "page"] * 3
        for k, kind in enumerate(kinds):
            name = "dmg%d" % k
            copy("mine", name)
            t = order[rng.randrange(len(order))]
            off, ext, n = recs[t]
            if kind == "header":
                at = off + rng.randrange(128)
                flip(name, at)
            elif kind == "payload":
                at = off + 128 + rng.randrange(n)
                flip(name, at)
            elif kind == "padding":
                if ext - 128 - n <= 0:
                    continue
                at = off + 128 + n + rng.randrange(ext - 128 - n)
                flip(name, at)
            else:
                page = rng.randrange(size // 4096)
                at = page * 4096
                patch(name, at, bytes(4096))
                hit = [u for u in recs if recs[u][0] <= at < recs[u][0] + recs[u][1]]
                t = hit[0] if hit else t
            what = "%s damaged at byte %d (tile %d)" % (kind, at, t)
            got, _ = readers(name, t, what, {"verify": 4})
            resume(name, what, clean="mine-clean.npy")

    def sec_wip():
        # -- writes not yet finished, frozen: the index's sync mark before the last two records,
        # the first of them a hole (reserved, not yet written) or its payload not yet whole
        last2 = order[-2:]
        L1 = recs[last2[0]]
        for kind in ("hole", "half"):
            name = "wip_" + kind
            copy("mine", name)
            write_index(name, hd, [l for l, e in zip(lines, ents) if e[0] == 1 and e[2] < L1[0]] + [mark(L1[0])])
            if kind == "hole":
                patch(name, L1[0], bytes(L1[1]))
            else:
                patch(name, L1[0] + 128 + L1[2] // 2, bytes(L1[2] - L1[2] // 2))
            what = ("a record past the index's sync mark not yet written (a hole before an intact one)"
                    if kind == "hole" else "a record past the index's sync mark whose payload is not yet whole")
            readers(name, last2[0], what, {"verify": 0, "full": 6, "block": 6, "other": 0})

    def sec_rti():
        # -- repaired, then interrupted: a record the audit marked dead, the index not yet
        # rewritten (a kill in that window), over one record and over two
        t1, t2 = order[6], order[7]
        copy("mine", "rti_one")
        dead_header("rti_one", recs[t1][0], recs[t1][1])
        readers("rti_one", t1, "repaired then killed: one record marked dead, the index still lists it",
                {"verify": 0, "full": 6, "block": 6, "other": 0})
        copy("mine", "rti_two")
        dead_header("rti_two", recs[t1][0], recs[t1][1] + recs[t2][1])
        patch("rti_two", recs[t2][0], bytes(128))
        readers("rti_two", t2, "repaired then killed: a dead region over two records, the second's header gone",
                {"verify": 0, "full": 6, "block": 6, "other": 0})
        info = run("info", "rti_two.ntk")[1]
        check("... info: 19 of 21 tiles, the index's entries over the dead region counted, not damage",
              "progress:    19/21" in info and "over regions a resume marked dead since" in info
              and "damage:" not in info, info)
        out, _ = resume("rti_two", "repaired then killed", clean="mine-clean.npy")
        check("... its audit gives the two tiles back", "2 damaged tiles to recompute" in out, out[-800:])


    def sec_slow():
        # -- a slow job: kills at random moments, a live repaired-then-interrupted run, readers
        # while it writes
        depth = calibrate()
        print("    calibration: %d layers for a job of ~1.5 s" % depth, flush=True)
        job("slow", "[Dense Erf]*%d Dense" % depth, 50, "nngp")
        if os.path.exists("slow.ntk"):
            os.remove("slow.ntk")
        # SIGKILL at random moments, single process and three ranks in turn
        ranks = shutil.which("mpirun")
        for k in range(6):
            mpi = ranks and k % 2 == 1
            cmd = (["mpirun", "-np", "3", NTKD, "slow.conf"] if mpi else [NTKD, "slow.conf"])
            before = tiles_in("slow")
            if before == 78:  # finished: kill a fresh run
                os.remove("slow.ntk")
                before = -1
            p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            # once this run has stored a tile (mpirun takes a while to start its ranks), then at
            # a random moment
            while p.poll() is None and tiles_in("slow") <= before:
                time.sleep(0.02)
            time.sleep(rng.uniform(0.0, 0.6))
            kill_job(p, "slow.conf")
            present = re.search(r"progress: +(\d+)/(\d+)", run("info", "slow.ntk")[1])
            copy("slow", "kill%d" % k)
            what = "SIGKILL %d (%s) at %s tiles" % (k + 1, "3 ranks" if mpi else "1 process",
                                                    present.group(1) if present else "?")
            readers("kill%d" % k, rng.randrange(78), what, {"verify": 0})

        # readers while a job writes it (three ranks: holes and records not yet whole past the
        # index's mark): neither reports damage
        if os.path.exists("slow.ntk"):
            os.remove("slow.ntk")
        cmd = (["mpirun", "-np", "3", NTKD, "slow.conf"] if ranks else [NTKD, "slow.conf"])
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        false_alarms, looks = [], 0
        while p.poll() is None:
            if os.path.exists("slow.ntk"):
                vrc, vout = run("verify", "slow.ntk")
                try:
                    with ntkd_store.open("slow.ntk") as S:
                        S.verify()
                        K = S["nngp"]
                        for t in stored(S)[:2]:
                            rr, cc = tile_block("slow", t)
                            K[sl(rr), sl(cc)]
                    pe = None
                except ntkd_store.DamagedStoreError as e:
                    pe = str(e)
                except (ntkd_store.StoreError, FileNotFoundError):
                    pe = None  # not a store yet, or a tile missing: not damage
                looks += 1
                if vrc not in (0,) or pe:
                    false_alarms.append("verify %d: %s / python: %s" % (vrc, vout[-300:], pe))
            time.sleep(0.02)
        check("readers while a job (%s) writes the store: %d looks, neither reports damage" % (
            "3 ranks" if ranks else "1 process", looks), looks > 0 and not false_alarms, "\n".join(false_alarms[:3]))
        readers("slow", 5, "the store that job finished", {"verify": 0, "full": 0, "block": 0, "other": 0})
        run("export", "slow.ntk", "slow-clean.npy")

        # repaired, then interrupted, live: stop a run half-way, damage a record below the
        # index's mark, rerun; once the audit has marked it dead, SIGUSR1 before it is computed
        os.remove("slow.ntk")
        p = subprocess.Popen([NTKD, "slow.conf"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while p.poll() is None and tiles_in("slow") < 30:
            time.sleep(0.02)
        p.send_signal(signal.SIGUSR1)
        p.wait()
        srecs = records("slow")
        first = min(srecs, key=lambda t: srecs[t][0])
        at = srecs[first][0] + 128 + srecs[first][2] // 2
        with open("slow.ntk", "r+b") as f:
            f.seek(at)
            b = f.read(1)
            f.seek(at)
            f.write(bytes([b[0] ^ 0x5A]))
        log = open("rti.log", "w")
        p = subprocess.Popen([NTKD, "slow.conf"], stdout=log, stderr=log)
        off = srecs[first][0]
        while p.poll() is None:
            with open("slow.ntk", "rb") as f:
                f.seek(off)
                h = f.read(16)
            if h[:8] == b"NTKDTILE" and u32(h, 12) == 2:
                break
            time.sleep(0.005)
        p.send_signal(signal.SIGUSR1)
        rc = p.wait()
        log.close()
        out = open("rti.log").read()
        stopped = rc == 5 and "1 damaged tile to recompute" in out
        check("repaired then interrupted (live): the audit marked the record dead, SIGUSR1 stopped the rerun (exit %d)"
              % rc, stopped, out[-1200:])
        if stopped:
            got, _ = readers("slow", first, "repaired then interrupted (live)",
                             {"verify": 0, "full": 6, "block": 6})
            info = run("info", "slow.ntk")[1]
            check("... the stop's sync wrote a fresh index: no entry over the dead region",
                  re.search(r"^index: +\d+ entries below its sync mark at byte \d+, as the store has them", info, re.M)
                  and "damage:" not in info, info)
            resume("slow", "repaired then interrupted (live)", clean="slow-clean.npy")


    def sec_memory():
        # -- 4. memory and time follow the store, not a file's claim
        copy("mine", "huge")
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
        lim = "ulimit -v 1000000; "  # 1 GB of address space: the old reader needed 4.2 GB here
        os.truncate("huge.ntk.index", 4 << 30)
        p = subprocess.run(["bash", "-c", lim + 'exec "$0" info huge.ntk', NTKD], capture_output=True, text=True,
                           env=env)
        check("a 4 GB sparse index: info in 1 GB of address space says the index is refused unread",
              p.returncode == 0 and "more than this store can need" in p.stdout and "not read" in p.stdout,
              p.stdout + p.stderr)
        tracemalloc.start()
        with ntkd_store.open("huge.ntk") as S:
            damaged, note = S.damaged, getattr(S, "index_problem", "")
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        check("... and Python, allocating %d KB" % (peak >> 10),
              damaged and "not read" in note and peak < (64 << 20), note)

        # a header claiming N = 185363 * 16384 (1.7e10 tiles) with no records, and its index
        claim = "claim"
        g = geometry("mine")
        b = bytearray(open("mine.ntk", "rb").read(g["first"]))
        N, T = 185363 * 16384, 16384
        nb = (N + T - 1) // T
        for base in (0, 4096):
            struct.pack_into("<Q", b, base + 16, N)
            struct.pack_into("<I", b, base + 32, T)
            struct.pack_into("<Q", b, base + 48, nb * (nb + 1) // 2)
            b[base + 4088:base + 4096] = h3(bytes(b[base:base + 4088])).to_bytes(8, "little")
        open(claim + ".ntk", "wb").write(b)
        write_index(claim, hd, [mark(g["first"])])
        outs = {}
        for args in (["info", claim + ".ntk"], ["verify", claim + ".ntk"], ["export", claim + ".ntk", "c.npy"],
                     ["export", claim + ".ntk", "c.npy", "--rows", "0:2", "--cols", "5:7"]):
            p = subprocess.run(["bash", "-c", lim + 'exec "$0" "$@"', NTKD] + args, capture_output=True, text=True,
                               env=env, timeout=300)
            outs[args[0] + str(len(args))] = (p.returncode, p.stdout + p.stderr)
        check("a header of 1.7e10 tiles and no records: info, verify, export in 1 GB (exits %s)" % (
            [v[0] for v in outs.values()]),
            [v[0] for v in outs.values()] == [0, 0, 6, 6] and "progress:    0/%d " % (nb * (nb + 1) // 2) in outs["info2"][1],
            "\n".join(v[1][-400:] for v in outs.values()))
        # Python: every line the reader runs counted (a tracer on its own frames), so that a
        # walk over the tile numbers fails after a budget instead of running for hours
        steps, budget = [0], 10 ** 6
        modfile = ntkd_store.__file__

        def tracer(frame, event, arg):
            if frame.f_code.co_filename != modfile:
                return None

            def local(frame, event, arg):
                if event == "line":
                    steps[0] += 1
                    if steps[0] > budget:
                        raise RuntimeError("more than %d steps in the reader" % budget)
                return local
            return local

        tracemalloc.start()
        res = {}
        sys.settrace(tracer)
        try:
            with ntkd_store.open(claim + ".ntk") as S:
                res["present"] = S.tiles_present
                res["allow_missing"] = sum(1 for _ in S.tiles("nngp", allow_missing=True))
                for what, f in (("tiles", lambda: S.tiles("nngp")), ("block", lambda: S["nngp"][0:2, 5:7])):
                    try:
                        f()
                        res[what] = "read"
                    except ntkd_store.IncompleteStoreError:
                        res[what] = 6
                res["verify"] = bool(S.verify())
        except Exception as e:  # noqa: BLE001 (reported as the failure)
            res["error"] = "%s: %s" % (type(e).__name__, e)
        finally:
            sys.settrace(None)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        check("... Python: no records, no tiles, tiles() and a block refused (6), verify passes, in %d steps and "
              "%d KB" % (steps[0], peak >> 10),
              res == {"present": 0, "allow_missing": 0, "tiles": 6, "block": 6, "verify": True} and peak < (64 << 20),
              res)


    def sec_args():
        # -- 5. bad arguments raise TypeError / ValueError
        S = ntkd_store.open("mine.ntk")
        K = S["ntk"]
        bad = []
        for arg, exc in ((np.ones(600, complex), TypeError), (np.ones(600, bool), TypeError), ("abc", TypeError),
                         (None, TypeError), (np.array(["a"] * 600), TypeError), (np.ones(599), ValueError),
                         (np.ones((600, 2, 2)), ValueError), ([[1.0]], ValueError)):
            try:
                K.matvec(arg)
                bad.append("matvec(%r) accepted" % (arg,))
            except exc:
                pass
            except Exception as e:  # noqa: BLE001
                bad.append("matvec(%s): %s" % (type(arg).__name__, type(e).__name__))
        for f, exc in ((lambda: K[0.5:3, 0:2], TypeError), (lambda: K.block(0.0, 1, 0, 1), TypeError),
                       (lambda: S[3], TypeError), (lambda: S.tiles("ntk", allow_missing="yes"), TypeError),
                       (lambda: S.verify(raise_on_damage=None), TypeError), (lambda: K[0:9:2], ValueError)):
            try:
                f()
                bad.append("accepted")
            except exc:
                pass
            except Exception as e:  # noqa: BLE001
                bad.append(type(e).__name__)
        y = K.matvec(np.arange(600))
        full = np.load("mine-clean.npy").astype(np.float64)
        check("bad arguments to the reader raise TypeError / ValueError (complex, boolean, text, shapes, bounds); "
              "an integer vector is taken", not bad and np.allclose(y, full @ np.arange(600), rtol=1e-12, atol=0), bad)
        S.close()


    section(sec_index, 'the index is checked')
    section(sec_damage, 'damage')
    section(sec_wip, 'writes not yet finished')
    section(sec_rti, 'repaired then interrupted')
    section(sec_slow, 'a slow job: kills, readers while it writes, repaired then interrupted')
    section(sec_memory, 'memory and time follow the store')
    section(sec_args, 'bad arguments')
    print("store_corpus: %d passed, %d failed" % (passed, failed), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
