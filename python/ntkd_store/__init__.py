"""Read ntkd kernel stores (NNGP/NTK matrices) from Python, any block at a time.

    import ntkd_store
    with ntkd_store.open("out/fc.ntk") as S:
        S.shape, S.kernels, S.precision, S.complete   # (N, N), ("nngp", "ntk"), "float32", True
        K = S["ntk"][:1000, 5000:6000]                # a numpy array of the store's dtype
        row = S["ntk"][-1]                            # one row; K[i, j] is one value
        y = S["ntk"].matvec(v)                        # K @ v, tile by tile, in float64
        for (r0, r1), (c0, c1), t in S.tiles("ntk"):  # the stored lower-triangle tiles
            ...
        S.verify()                                    # every record checked, as `ntkd verify`

The store format is docs/STORE-FORMAT.md. This reader is ntkd's C reader
(src/store/store.c, src/store/index.c, src/inspect.c) step by step, so that
the two agree on every store, finished, interrupted, being written or
damaged: it finds the records through the index (STORE.index) exactly as
`ntkd export` does, after the same checks of what the index claims (an
index that disagrees with the store is damage), with the same rule for
writes not yet finished past the index's sync mark, and `verify()` checks
what `ntkd verify` checks. Every checksum read is checked (XXH3-64, hence
the xxhash package): the header copies, the job text, the index, each
record header and each payload. Blocks come from the stored lower-triangle
tiles, the upper triangle by symmetry; entries of the test x test block of
a kernel-regression store that were not computed are NaN. Only the tiles a
block touches are read, one at a time: memory is the block plus one tile,
and memory and time otherwise follow what is stored, never the tile count
a header claims. Like `ntkd export`, reading refuses a damaged store
(DamagedStoreError) and a block that needs a tile the store lacks
(IncompleteStoreError); a block whose tiles are all present is read from an
unfinished store. Bad arguments raise TypeError or ValueError.

Dependencies: numpy, zstandard, xxhash (Debian: python3-numpy,
python3-zstandard, python3-xxhash).
"""

import bisect
import errno
import io
import math
import os
import stat
import struct
import threading

import numpy as np
import xxhash
import zstandard

__all__ = [
    "open", "Store", "Kernel", "VerifyReport", "StoreError", "NotAStoreError", "DamagedStoreError",
    "IncompleteStoreError",
]
__version__ = "0.2.0"

# ---- the format (docs/STORE-FORMAT.md, src/store/store.c) --------------------------------

_HEADER_MAGIC = b"NTKDSTOR"
_RECORD_MAGIC = b"NTKDTILE"
_INDEX_MAGIC = b"NTKDINDX"
_VERSION = 2
_INDEX_VERSION = 1
_HEADER_SIZE = 4096
_RECORD_HEADER = 128
_ENTRY = 64
_DESC_MAX = 1024
_JOB_TEXT_AT = 2 * _HEADER_SIZE
_JOB_TEXT_MAX = 64 << 20
_PAGE = 4096
_MAX_N = 1 << 40
_MAX_TILE = 16384
_MAX_TILES = 1 << 34
_FLAG_TEST_TEST = 1
_KIND_TILE, _KIND_DEAD = 1, 2
_ENTRY_TILE, _ENTRY_SYNC = 1, 2
_CODEC_SHUFFLE_ZSTD = 1
_CODEC_RAW = 2
_NO_TILE = (1 << 64) - 1
_KERNEL_NNGP, _KERNEL_NTK = 1, 2
_SCAN_CHUNK = 1 << 20
_INDEX_CHUNK = 1024  # index lines read at a time
_ANY_SIZE = 1 << 64  # classify() without the file's end: is the header intact?

# Header fields (byte offsets).
_H_VERSION, _H_HSIZE, _H_N, _H_D, _H_TILE, _H_ELEM, _H_KERNELS, _H_ALIGN, _H_NTILES = 8, 12, 16, 24, 32, 36, 40, 44, 48
_H_JOBHASH, _H_STOREID, _H_NTRAIN, _H_FLAGS = 56, 72, 88, 96
_H_TEXT_AT, _H_TEXT_LEN, _H_TEXT_RAW, _H_TEXT_SUM, _H_FIRST, _H_DESC = 104, 112, 120, 128, 136, 144
_H_CHECKSUM = _HEADER_SIZE - 8
# Record header fields.
_R_VERSION, _R_KIND, _R_STOREID, _R_TILE, _R_ROWS, _R_COLS, _R_RAW, _R_LEN, _R_SUM = 8, 12, 16, 32, 40, 44, 48, 56, 64
_R_CODEC, _R_EXTENT, _R_SEQ = 72, 80, 88
_R_CHECKSUM = _RECORD_HEADER - 8

_REC_BAD, _REC_OK, _REC_TORN = 0, 1, 2
_INDEX_NONE, _INDEX_READ, _INDEX_DAMAGED, _INDEX_OUTGROWN = 0, 1, 2, 3  # index.h
_PROBE_OK, _PROBE_DEAD, _PROBE_OTHER, _PROBE_DAMAGED = 0, 1, 2, 3

_xxh3 = xxhash.xxh3_64_intdigest


def _u32(b, off):
    return struct.unpack_from("<I", b, off)[0]


def _u64(b, off):
    return struct.unpack_from("<Q", b, off)[0]


def _align_up(x, a):
    return (x + a - 1) // a * a


def _compress_bound(n):
    """ZSTD_compressBound: the largest zstd frame of n bytes."""
    return n + (n >> 8) + (((128 << 10) - n) >> 11 if n < (128 << 10) else 0)


def _kernel_names(mask):
    return tuple(name for bit, name in ((_KERNEL_NNGP, "nngp"), (_KERNEL_NTK, "ntk")) if mask & bit)


# ---- errors -------------------------------------------------------------------------------


class StoreError(Exception):
    """A store that cannot be read: the base of the errors below. `path` names the file."""

    def __init__(self, message, path=None):
        super().__init__(message)
        self.path = path


class NotAStoreError(StoreError):
    """The file is not an ntkd store (no NTKDSTOR magic), or one of another format version."""


class DamagedStoreError(StoreError):
    """Damage: a header, job text, index, record or payload fails its checks. `tile` and
    `offset` name the record when one is concerned (else None); `report` is set by verify()."""

    def __init__(self, message, path=None, tile=None, offset=None, report=None, detail=None):
        super().__init__(message, path)
        self.detail = detail if detail is not None else message  # the message without the path
        self.tile = tile
        self.offset = offset
        self.report = report


class IncompleteStoreError(StoreError):
    """The store lacks a tile that was asked for (the job has not finished it). `tile` is the
    first missing one, `missing` how many the request lacks."""

    def __init__(self, message, path=None, tile=None, missing=0):
        super().__init__(message, path)
        self.tile = tile
        self.missing = missing


# ---- tiling (src/base/tiling.h) -----------------------------------------------------


class _Tiling:
    """The lower triangle cut into tiles of edge T, numbered I(I+1)/2 + J; without test x
    test only the columns J < ceil(n_train / T) are needed."""

    def __init__(self, n, tile, n_train, test_test):
        self.n, self.tile = n, tile
        self.nb = (n + tile - 1) // tile
        self.ntiles = self.nb * (self.nb + 1) // 2
        self.nbc = self.nb
        if n_train and not test_test and n_train < n:
            self.nbc = (n_train + tile - 1) // tile
        self.needed = self.nbc * (self.nbc + 1) // 2 + (self.nb - self.nbc) * self.nbc

    @staticmethod
    def index(bi, bj):
        return bi * (bi + 1) // 2 + bj

    def tile_of(self, index):
        """(bi, bj, r0, rows, c0, cols) of tile `index`."""
        bi = (math.isqrt(8 * index + 1) - 1) // 2
        bj = index - bi * (bi + 1) // 2
        r0, c0 = bi * self.tile, bj * self.tile
        return bi, bj, r0, min(self.tile, self.n - r0), c0, min(self.tile, self.n - c0)

    def is_needed(self, index):
        if index >= self.ntiles:
            return False
        return self.nbc == self.nb or self.tile_of(index)[1] < self.nbc


# ---- codec (src/base/codec.c) --------------------------------------------------------------

# One decompressor per thread: python-zstandard's are not to be used by two threads at once, and
# one shared by every handle gave threads reading an intact store "not a zstd frame" errors, a
# crash, and blocks of wrong values (decompressed to the right size, the checksum checked before).
_DCTX = threading.local()


def _dctx():
    d = getattr(_DCTX, "d", None)
    if d is None:
        d = _DCTX.d = zstandard.ZstdDecompressor()
    return d


def _zstd_decode(data, raw, check_frame_size):
    """What ZSTD_decompress into a buffer of `raw` bytes gives (every frame of `data`, in
    turn), or None unless it is exactly `raw` bytes; at most raw + 1 bytes are ever
    decompressed. check_frame_size: first refuse a first frame whose header gives another
    content size (ntk_codec_decompress does)."""
    data = bytes(data)
    if check_frame_size:
        try:
            size = zstandard.frame_content_size(data)
        except zstandard.ZstdError:
            return None
        if size != -1 and size != raw:
            return None
    try:
        reader = _dctx().stream_reader(io.BytesIO(data), read_across_frames=True)
        out = reader.read(raw + 1)
        if len(out) != raw or reader.read(1):
            return None
    except zstandard.ZstdError:
        return None
    return out


def _unshuffle(shuffled, elem):
    """Inverse of the byte shuffle: byte b of value i is at b * count + i."""
    count = len(shuffled) // elem
    return np.frombuffer(shuffled, dtype=np.uint8).reshape(elem, count).T.copy().view("<f%d" % elem).reshape(count)


# ---- the store --------------------------------------------------------------------------------


def open(path):  # noqa: A001 (the module's entry point, as in gzip.open)
    """Open the store at `path` for reading: check its header, index its records through
    its index (as `ntkd export` does)."""
    return Store(path)


class _View:
    """What opening found (struct ntk_store_scan and the tile index of struct ntk_store):
    one per open, as ntkd opens the store afresh for each command."""

    def __init__(self):
        self.map = {}  # tile -> [offset, payload bytes, sequence number, beyond]
        self.others = []  # (tile, offset, len, seq): older records, tiles not needed
        self.ient = []  # the index's entries below its sync mark, sorted by offset
        self.duplicates = 0
        self.hurt = []  # tiles with a damaged payload, in the order found
        self.damaged_count = 0
        self.regions = []  # (offset, bytes, tile or None, why), damage and unfinished writes alike
        self.region_starts = []  # their offsets, in file order
        self.region_list = []  # damage only
        self.unsettled = 0
        self.dead = self.dead_bytes = 0
        self.tail_bytes = 0
        self.tail_damaged = False
        self.end = 0
        self.payload_bytes = 0
        self.settled = 0
        self.index_used = False
        self.index_covered = 0
        self.index_entries = 0
        self.index_note = ""
        self.index_damaged = False
        self.index_problem = ""
        self.index_past_end = 0  # 1: the index names bytes past the store's end; 2: it is longer than the
        # store can need (store.h)
        self.index_dead = 0


class Store:
    """An ntkd store opened for reading (ntkd_store.open). Never writes.

    Attributes: path, shape (N, N), n, n_train (0: no train/test split), test_test, tile,
    kernels, precision ("float32"/"float64"), dtype, features, description, job_text,
    job_hash (hex), complete, damaged, tiles_present, tiles_needed, index_note (why the
    index was not used: "" when it was), index_problem (what is wrong with it: "" if nothing).
    They, and every read, are the store as this open found it: tiles a running job writes
    later are read through a new open.
    """

    def __init__(self, path):
        if not isinstance(path, (str, bytes, os.PathLike)):
            raise TypeError("ntkd_store.open: a path, not %r" % type(path).__name__)
        self.path = os.fsdecode(os.fspath(path))
        self._fd = None
        # The file the name reaches, absolute: its index sits beside it, whatever link or
        # working folder the name went through (ntkd's rule; the index was looked for beside the
        # name, and after os.chdir in another folder).
        self._file = os.path.realpath(self.path)
        st = os.stat(self._file)
        if not stat.S_ISREG(st.st_mode):
            raise StoreError("%s is not a regular file (store)" % self.path, self.path)
        self._fd = os.open(self._file, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            self._open()
        except BaseException:
            self.close()
            raise

    # -- low level

    def _closed_check(self):
        if self._fd is None:  # os.pread(None) said only "'NoneType' object cannot be interpreted as an integer"
            raise ValueError(f"the store {self.path} is closed (its with-block ended, or close() was called): "
                             "open it again with ntkd.store.open")

    def _pread(self, n, off):
        """Up to n bytes at off: fewer only at the end of the file."""
        self._closed_check()
        parts, got = [], 0
        while got < n:
            b = os.pread(self._fd, min(n - got, 1 << 30), off + got)
            if not b:
                break
            parts.append(b)
            got += len(b)
        return b"".join(parts)

    def _size(self):
        self._closed_check()
        return os.fstat(self._fd).st_size

    def _damaged(self, message, tile=None, offset=None):
        return DamagedStoreError("%s: %s" % (self.path, message), self.path, tile, offset, detail=message)

    # -- opening: header copies, job text (open_scan in store.c)

    def _open(self):
        size = self._size()
        h = self._pread(2 * _HEADER_SIZE, 0).ljust(2 * _HEADER_SIZE, b"\0")
        a, b = h[:_HEADER_SIZE], h[_HEADER_SIZE:]

        def intact(x):
            return x[:8] == _HEADER_MAGIC and _u64(x, _H_CHECKSUM) == _xxh3(x[:_H_CHECKSUM])

        a_ok, b_ok = intact(a), intact(b)
        spliced = None
        if not a_ok and not b_ok:
            # Both damaged, perhaps not in the same bytes (one stretch across
            # their boundary): the first k bytes of one copy and the rest of
            # the other make the header if the checksum says so (header_splice).
            for head, rest in ((a, b), (b, a)):
                for k in range(1, _HEADER_SIZE):
                    x = head[:k] + rest[k:]
                    if intact(x):
                        spliced = x
                        break
                if spliced is not None:
                    break
            # Or a few bytes differ (scattered damage): each from one copy or the other.
            diff = [i for i in range(_HEADER_SIZE) if a[i] != b[i]]
            if spliced is None and 0 < len(diff) <= 12:
                for m in range(1, (1 << len(diff)) - 1):
                    x = bytearray(a)
                    for j, i in enumerate(diff):
                        if m >> j & 1:
                            x[i] = b[i]
                    if intact(bytes(x)):
                        spliced = bytes(x)
                        break
        if not a_ok and not b_ok and spliced is None:
            if a[:8] != _HEADER_MAGIC and b[:8] != _HEADER_MAGIC:
                raise NotAStoreError("%s: not an ntkd store (no NTKDSTOR magic)" % self.path, self.path)
            raise self._damaged("both copies of the store header are damaged")
        if a_ok and b_ok and a != b:
            raise self._damaged("the two copies of the store header disagree")
        good = spliced if spliced is not None else a if a_ok else b
        self._decode_header(good)
        self.header_damaged = not (a_ok and b_ok)
        if size < self._first:
            raise self._damaged("store is shorter than its own header")
        self._read_job_text(good)
        self._v = self._open_view(full_scan=False)

    def _decode_header(self, h):
        version = _u32(h, _H_VERSION)
        if version != _VERSION:
            raise NotAStoreError(
                "%s: store format version %d; this reader reads version %d%s" % (
                    self.path, version, _VERSION,
                    " (version 1 was written by ntkd 0.1: export it with that version, or rerun the job "
                    "with --overwrite)" if version == 1 else ""), self.path)
        self.n = _u64(h, _H_N)
        self.features = _u64(h, _H_D)
        self.tile = _u32(h, _H_TILE)
        self._elem = _u32(h, _H_ELEM)
        self._kernel_mask = _u32(h, _H_KERNELS)
        self._align = _u32(h, _H_ALIGN)
        self.job_hash = bytes(h[_H_JOBHASH:_H_JOBHASH + 16]).hex()
        self._store_id = bytes(h[_H_STOREID:_H_STOREID + 16])
        self.n_train = _u64(h, _H_NTRAIN)
        flags = _u32(h, _H_FLAGS)
        self.test_test = bool(flags & _FLAG_TEST_TEST)
        self._first = _u64(h, _H_FIRST)
        desc = bytes(h[_H_DESC:_H_DESC + _DESC_MAX - 1])
        self.description = desc.split(b"\0", 1)[0].decode("utf-8", "replace")
        text_len, text_raw = _u64(h, _H_TEXT_LEN), _u64(h, _H_TEXT_RAW)
        ok = (_u32(h, _H_HSIZE) == _HEADER_SIZE and 0 < self.n <= _MAX_N and 0 < self.tile <= _MAX_TILE
              and self._elem in (4, 8) and 0 < self._kernel_mask <= 3 and self._align in (512, _PAGE)
              and self.n_train <= self.n and not (flags & ~_FLAG_TEST_TEST)
              and _u64(h, _H_TEXT_AT) == _JOB_TEXT_AT and text_len <= _JOB_TEXT_MAX and text_raw <= _JOB_TEXT_MAX
              and self._first == _align_up(_JOB_TEXT_AT + text_len, _PAGE))
        if not ok:
            raise self._damaged("store header has impossible values")
        self._tiling = _Tiling(self.n, self.tile, self.n_train, self.test_test)
        if _u64(h, _H_NTILES) != self._tiling.ntiles:
            raise self._damaged("store header tile count is inconsistent")
        if self._tiling.ntiles > _MAX_TILES:
            raise self._damaged("%d tiles is more than ntkd supports" % self._tiling.ntiles)

    def _read_job_text(self, h):
        # The stored bytes fit the file (checked above); the raw size is decompressed only once
        # the stored text checks out and its zstd frame says that size (read_job_text).
        text_len, text_raw = _u64(h, _H_TEXT_LEN), _u64(h, _H_TEXT_RAW)
        buf = self._pread(text_len, _JOB_TEXT_AT)
        text = None
        if len(buf) == text_len and _xxh3(buf) == _u64(h, _H_TEXT_SUM):
            try:
                declared = zstandard.frame_content_size(buf)
            except zstandard.ZstdError:
                declared = None
            if declared == text_raw:
                text = _zstd_decode(buf, text_raw, False)
        self.job_text_damaged = text is None
        # The C reader keeps it as a C string.
        self.job_text = "" if text is None else text.split(b"\0", 1)[0].decode("utf-8", "replace")

    # -- records (classify, find_next, scan_records in store.c)

    def _raw_bytes(self, rows, cols):
        return rows * cols * self._elem * len(_kernel_names(self._kernel_mask))

    def _classify(self, r, off, size):
        if len(r) != _RECORD_HEADER or r[:8] != _RECORD_MAGIC or _u64(r, _R_CHECKSUM) != _xxh3(r[:_R_CHECKSUM]):
            return _REC_BAD
        if _u32(r, _R_VERSION) != _VERSION or r[_R_STOREID:_R_STOREID + 16] != self._store_id:
            return _REC_BAD
        extent, A = _u64(r, _R_EXTENT), self._align
        if extent == 0 or extent % A:
            return _REC_BAD
        kind = _u32(r, _R_KIND)
        if kind == _KIND_DEAD:
            if _u64(r, _R_TILE) != _NO_TILE or _u64(r, _R_LEN) or _u32(r, _R_CODEC):
                return _REC_BAD
        elif kind == _KIND_TILE:
            tile = _u64(r, _R_TILE)
            codec = _u32(r, _R_CODEC)
            if tile >= self._tiling.ntiles or codec not in (_CODEC_SHUFFLE_ZSTD, _CODEC_RAW):
                return _REC_BAD
            _, _, _, rows, _, cols = self._tiling.tile_of(tile)
            raw = self._raw_bytes(rows, cols)
            n = _u64(r, _R_LEN)
            if _u32(r, _R_ROWS) != rows or _u32(r, _R_COLS) != cols or _u64(r, _R_RAW) != raw:
                return _REC_BAD
            if n == 0 or n > _compress_bound(raw) or extent != _align_up(_RECORD_HEADER + n, A):
                return _REC_BAD
            if codec == _CODEC_RAW and n != raw:
                return _REC_BAD
        else:
            return _REC_BAD
        return _REC_OK if extent <= size - off else _REC_TORN

    def _header_at(self, off):
        """(intact, dead, extent) of the record header at `off` (header_at)."""
        r = self._pread(_RECORD_HEADER, off)
        if self._classify(r, off, _ANY_SIZE) == _REC_BAD:
            return False, False, 0
        return True, _u32(r, _R_KIND) == _KIND_DEAD, _u64(r, _R_EXTENT)

    def _all_zero(self, off, n):
        while n > 0:
            k = min(n, 1 << 16)
            b = self._pread(k, off)
            if len(b) != k or b.count(0) != k:
                return False
            off += k
            n -= k
        return True

    def _add_region(self, v, off, n, tile, why):
        """A stretch that is not an intact record (add_region): past the index's sync mark a
        hole of zeros, a record of ours whose payload is not yet whole, or a place whose
        header has appeared since is a write not yet finished, not damage."""
        unsettled = bool(v.settled and off >= v.settled and (
            tile is not None or self._all_zero(off, n)
            or self._classify(self._pread(_RECORD_HEADER, off), off, _ANY_SIZE) != _REC_BAD))
        v.regions.append((off, n, tile, why))
        v.region_starts.append(off)
        if unsettled:
            v.unsettled += 1
        else:
            v.region_list.append((off, n, tile, why))

    def _find_next(self, start, size):
        """The next multiple of the alignment at or after `start` where an intact record of
        this store starts, whole or torn; `size` if none."""
        A = self._align
        base = start
        while base < size:
            buf = self._pread(min(_SCAN_CHUNK, size - base), base)
            p = buf.find(_RECORD_MAGIC)
            while p >= 0:
                off = base + p
                if off % A == 0:
                    if off + _RECORD_HEADER > size:
                        return size
                    if self._classify(self._pread(_RECORD_HEADER, off), off, size) != _REC_BAD:
                        return off
                p = buf.find(_RECORD_MAGIC, p + 1)
            base += _SCAN_CHUNK
        return size

    def _payload_intact(self, r, off):
        n, extent = _u64(r, _R_LEN), _u64(r, _R_EXTENT)
        body = self._pread(extent - _RECORD_HEADER, off + _RECORD_HEADER)
        return (len(body) == extent - _RECORD_HEADER and _xxh3(body[:n]) == _u64(r, _R_SUM)
                and not body[n:].strip(b"\0"))

    def _index_record(self, v, tile, off, n, seq):
        """The record at `off` as tile's newest when its sequence number is the highest so
        far (ties: the later one found); the loser joins the others (index_record)."""
        if not self._tiling.is_needed(tile):
            v.others.append((tile, off, n, seq))  # test x test: not counted
            return False
        f = v.map.get(tile)
        if f is not None:
            v.duplicates += 1
            if seq < f[2]:
                v.others.append((tile, off, n, seq))
                return False
            if not f[3]:  # one the index places past its mark joins the others once met
                v.others.append((tile, f[0], f[1], f[2]))
            v.payload_bytes -= f[1]
        v.map[tile] = [off, n, seq, False]
        v.payload_bytes += n
        return True

    def _unindex(self, v, tile):
        """Drop tile's record (damaged, missing, marked dead): the newest other intact record
        of it takes its place, if there is one (unindex)."""
        f = v.map.pop(tile, None)
        if f is None:
            return
        v.payload_bytes -= f[1]
        best = None
        for i, e in enumerate(v.others):
            if e[0] == tile and (best is None or e[3] >= v.others[best][3]):
                best = i
        if best is None:
            return
        e = v.others[best]
        v.others[best] = v.others[-1]
        v.others.pop()
        v.duplicates -= 1
        v.map[tile] = [e[1], e[2], e[3], False]
        v.payload_bytes += e[2]

    def _scan_records(self, v, check_payload, size, start):
        off = start
        while off < size:
            r = self._pread(_RECORD_HEADER, off) if size - off >= _RECORD_HEADER else b""
            kind = self._classify(r, off, size) if len(r) == _RECORD_HEADER else _REC_TORN
            if kind == _REC_TORN:
                break  # the tail: a write cut short
            if kind == _REC_BAD:
                nxt = self._find_next(off + self._align, size)
                if nxt == size:
                    break  # the tail, classified below
                self._add_region(v, off, nxt - off, None, "not an intact record of this store")
                off = nxt
                continue
            extent, seq = _u64(r, _R_EXTENT), _u64(r, _R_SEQ)
            if _u32(r, _R_KIND) == _KIND_DEAD:
                v.dead += 1
                v.dead_bytes += extent
                off += extent
                continue
            tile, n = _u64(r, _R_TILE), _u64(r, _R_LEN)
            intact = not check_payload or self._payload_intact(r, off)
            f = v.map.get(tile)
            if f is not None and f[3] and f[0] == off:  # the index's own record of it
                f[3] = False
                if intact and f[1] == n and f[2] == seq:
                    off += extent
                    continue
                self._unindex(v, tile)
            if not intact and v.settled and off >= v.settled:
                self._add_region(v, off, extent, tile, "payload checksum mismatch")  # a write under way
            elif not intact:
                v.hurt.append(tile)
                self._add_region(v, off, extent, tile, "payload checksum mismatch")
            else:
                self._index_record(v, tile, off, n, seq)
            off += extent
        # Tiles the index places past its sync mark whose record the scan did not meet.
        for tile in [t for t, f in v.map.items() if f[3]]:
            self._unindex(v, tile)
        v.damaged_count = len({t for t in v.hurt if t not in v.map})
        v.end = off
        v.tail_bytes = size - off if off < size else 0
        if v.tail_bytes:
            # A write cut short leaves a prefix of a record; anything else is damage.
            r = self._pread(_RECORD_HEADER, off)
            torn = v.tail_bytes < _RECORD_HEADER or self._classify(r, off, size) == _REC_TORN
            v.tail_damaged = not torn

    # -- the index: what it claims, checked (index.c; load_index, index_check in store.c)

    def _read_index(self):
        """(verdict, entries up to the last sync mark, its covered, why) of STORE.index: its
        header first, its size against what the store can need (the store measured after the
        index), then its lines in chunks (ntk_index_read)."""
        path = self._file + ".index"
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            return _INDEX_NONE, [], 0, "no index"
        except OSError as e:
            # This process's lack (descriptors, memory) or the disk's says nothing of the index: an
            # error, as in ntkd (src/store/index.c), not a store read without its index's check.
            if e.errno in (errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.EIO):
                raise
            return _INDEX_NONE, [], 0, "cannot open %s: %s" % (path, e.strerror)
        try:
            ist = os.fstat(fd)
            if not stat.S_ISREG(ist.st_mode):
                return _INDEX_NONE, [], 0, "%s is not a regular file" % path
            h = os.pread(fd, _ENTRY, 0)
            if len(h) < _ENTRY:
                return _INDEX_DAMAGED, [], 0, "%s is %d bytes, shorter than an index header" % (path, ist.st_size)
            if (h[:8] != _INDEX_MAGIC or _u64(h, 56) != _xxh3(h[:56]) or _u32(h, 8) != _INDEX_VERSION
                    or _u32(h, 12) != _ENTRY):
                return _INDEX_DAMAGED, [], 0, (
                    "%s is not an index (no NTKDINDX magic)" % path if h[:8] != _INDEX_MAGIC
                    else "the header of %s is damaged" % path)
            if h[16:32] != self._store_id:
                return _INDEX_NONE, [], 0, "the index is of another store"
            size = self._size()
            records = (size - self._first) // self._align + 1 if size > self._first else 1
            lines, max_lines = ist.st_size // _ENTRY, 3 * records + 1
            if lines - 1 > max_lines:
                return _INDEX_OUTGROWN, [], 0, "%s is %d bytes, more than this store can need (at most %d): " \
                    "not read" % (path, ist.st_size, (max_lines + 1) * _ENTRY)
            entries, kept, covered, marks, bad = [], 0, 0, 0, 0
            line = 1
            while line < lines:
                k = min(lines - line, _INDEX_CHUNK)
                buf = os.pread(fd, k * _ENTRY, line * _ENTRY)
                if len(buf) < k * _ENTRY:
                    break  # shorter now than when it was measured: read as it was
                for j in range(k):
                    b = buf[j * _ENTRY:(j + 1) * _ENTRY]
                    kind = _u32(b, 0)
                    if _u64(b, 56) != _xxh3(b[:56]):
                        bad = bad or line
                    elif bad:
                        # an intact line after a damaged one: a torn append leaves only a damaged end
                        return _INDEX_DAMAGED, [], 0, (
                            "entry %d of %s fails its checksum and intact entries follow it" % (bad, path))
                    elif kind == _ENTRY_TILE:
                        entries.append((_u64(b, 8), _u64(b, 16), _u64(b, 24), _u64(b, 32)))
                    elif kind == _ENTRY_SYNC:
                        kept, covered = len(entries), _u64(b, 40)
                        marks += 1
                    else:
                        return _INDEX_DAMAGED, [], 0, "entry %d of %s is of no known kind (%d)" % (line, path, kind)
                    line += 1
            if not marks:
                return _INDEX_DAMAGED, [], 0, "%s has no sync mark" % path
            del entries[kept:]
            return _INDEX_READ, entries, covered, ""
        finally:
            os.close(fd)

    def _extent(self, e):
        return _align_up(_RECORD_HEADER + e[2], self._align)

    def _describe_at(self, off):
        r = self._pread(_RECORD_HEADER, off)
        if len(r) < _RECORD_HEADER:
            return "the end of the store"
        if self._classify(r, off, _ANY_SIZE) == _REC_BAD:
            return "no intact record header"
        if _u32(r, _R_KIND) == _KIND_DEAD:
            return "a dead region of %d bytes" % _u64(r, _R_EXTENT)
        return "a record of tile %d (sequence number %d, %d payload bytes)" % (
            _u64(r, _R_TILE), _u64(r, _R_SEQ), _u64(r, _R_LEN))

    def _probe(self, ient, i):
        """(verdict, what is there) for the index entry ient[i] (probe_entry): its record, a
        region marked dead since (at its place, or from an earlier record boundary over it),
        another intact record, or no intact header."""
        tile, off, n, seq = ient[i]
        r = self._pread(_RECORD_HEADER, off)
        if self._classify(r, off, _ANY_SIZE) != _REC_BAD:
            if _u32(r, _R_KIND) == _KIND_DEAD:
                verdict = _PROBE_DEAD
            elif _u64(r, _R_TILE) == tile and _u64(r, _R_LEN) == n and _u64(r, _R_SEQ) == seq:
                verdict = _PROBE_OK
            else:
                verdict = _PROBE_OTHER
            return verdict, self._describe_at(off)
        what = "the end of the store" if len(r) < _RECORD_HEADER else "no intact record header"
        for j in range(i, -1, -1):
            prev_end = ient[j - 1][1] + self._extent(ient[j - 1]) if j else self._first
            cands = []
            if prev_end < ient[j][1]:
                cands.append(prev_end)  # the gap before entry j
            if j:
                cands.append(ient[j - 1][1])
            for c in cands:
                intact, dead, ext = self._header_at(c)
                if intact and dead and c + ext > off:
                    return _PROBE_DEAD, "a dead region from offset %d" % c
                if intact:
                    return _PROBE_DAMAGED, what
        return _PROBE_DAMAGED, what

    def _dead_walk(self, pos, to):
        """(new pos, None) when [pos, to) is dead regions, else (pos, (why, blame))."""
        while pos < to:
            intact, dead, ext = self._header_at(pos)
            if not intact or not dead or pos + ext > to:
                return pos, ("no entry accounts for bytes %d..%d below its sync mark, where the store has %s" % (
                    pos, to - 1, self._describe_at(pos)), intact)
            pos += ext
        return pos, None

    def _index_check(self, v, entries, covered, size):
        """(ok, blame, entries sorted by offset, how many below the mark, why) (index_check); an
        index that names bytes past the store's end sets v.index_past_end."""
        A, tg = self._align, self._tiling
        if covered < self._first or (covered - self._first) % A:
            return False, True, entries, 0, "its sync mark (byte %d) is not a record offset of this store" % covered
        if covered > size:
            v.index_past_end = 1
            return False, True, entries, 0, (
                "its sync mark says the first %d bytes are written, but the store has %d" % (covered, size))
        for tile, off, n, seq in entries:
            bad = None
            if tile >= tg.ntiles:
                bad = "names no tile of this store"
            else:
                _, _, _, rows, _, cols = tg.tile_of(tile)
                extent = _align_up(_RECORD_HEADER + n, A)
                if off < self._first or (off - self._first) % A:
                    bad = "is not at a record offset"
                elif not n or n > _compress_bound(self._raw_bytes(rows, cols)):
                    bad = "has an impossible length"
                elif off > size or extent > size - off:
                    bad = "runs past the end of the store"
                    v.index_past_end = 1
                elif off < covered < off + extent:
                    bad = "straddles its sync mark"
            if bad:
                return False, True, entries, 0, "its entry for tile %d at offset %d %s" % (tile, off, bad)
        entries = sorted(entries, key=lambda e: e[1])  # stable, as qsort by offset (offsets differ)
        k = 0
        while k < len(entries) and entries[k][1] < covered:
            k += 1
        pos = self._first
        for i in range(k):
            if entries[i][1] < pos:
                return False, True, entries, k, "its entries for tiles %d and %d overlap at offset %d" % (
                    entries[i - 1][0], entries[i][0], entries[i][1])
            pos, fail = self._dead_walk(pos, entries[i][1])
            if fail:
                return False, fail[1], entries, k, fail[0]
            pos = entries[i][1] + self._extent(entries[i])
        last_is_entry = k and pos == covered
        pos, fail = self._dead_walk(pos, covered)
        if fail:
            return False, fail[1], entries, k, fail[0]
        if last_is_entry:
            verdict, what = self._probe(entries[:k], k - 1)
            if verdict not in (_PROBE_OK, _PROBE_DEAD):
                return False, verdict == _PROBE_OTHER, entries, k, (
                    "its entry for tile %d at offset %d, the last below its sync mark, where the store has %s" % (
                        entries[k - 1][0], entries[k - 1][1], what))
        return True, True, entries, k, ""

    def _index_damage(self, v, problem):
        v.index_damaged = True
        v.index_problem = problem

    def _index_damage_text(self, v):
        """The sentence every report of a damaged index says (ntk_store_index_damage)."""
        return "the index (%s.index) %s; run the job again: the resume rebuilds it from the records (%s)" % (
            self.path, v.index_problem, (
                "no tile is lost",
                "the store may have been cut short: the tiles the index places past its end are lost, and the "
                "resume computes them again",
                "unless the store was cut short under it: then the tiles past its end are lost, and the resume "
                "computes them again; ntkd verify counts the tiles the store holds")[v.index_past_end])

    def _load_index(self, v, full_scan):
        """Read and check the index (load_index); without full_scan take its entries. Returns
        (the store's size measured after the index, where the scan starts)."""
        verdict, entries, covered, why = self._read_index()
        size = self._size()
        ok, blame, below = verdict == _INDEX_READ, True, 0
        if ok:
            ok, blame, entries, below, why = self._index_check(v, entries, covered, size)
        if verdict == _INDEX_OUTGROWN:  # the store cut short under it, or garbage: load_index
            v.index_past_end = 2
        if verdict in (_INDEX_DAMAGED, _INDEX_OUTGROWN):
            self._index_damage(v, "is damaged: " + why)
        elif verdict == _INDEX_READ and not ok and blame:
            self._index_damage(v, "disagrees with the store: " + why)
        if not ok:
            v.index_note = why + (" (the store is damaged there; the index cannot be checked)"
                                  if verdict == _INDEX_READ and not blame else "")
            return size, self._first
        v.ient = entries[:below]
        v.index_entries = below
        v.index_covered = covered
        v.settled = covered
        if full_scan:
            return size, self._first
        for tile, off, n, seq in entries:
            if off < covered:
                self._index_record(v, tile, off, n, seq)
                continue
            # Past the mark: expected there; the scan must meet it.
            f = v.map.get(tile)
            if not self._tiling.is_needed(tile) or (f is not None and f[2] > seq):
                continue
            if self._index_record(v, tile, off, n, seq):
                v.map[tile][3] = True
        v.index_used = True
        return size, covered

    @staticmethod
    def _in_region(v, off):
        """Whether byte `off` lies in a region the scan found (in file order) not intact."""
        k = bisect.bisect_right(v.region_starts, off)
        return k > 0 and off - v.regions[k - 1][0] < v.regions[k - 1][1]

    def _check_entries_all(self, v):
        """After a full scan (verify): every entry below the mark against the record at its
        place (check_entries_all)."""
        wrong, first = 0, ""
        for i, e in enumerate(v.ient):
            verdict, what = self._probe(v.ient, i)
            v.index_dead += verdict == _PROBE_DEAD
            if verdict in (_PROBE_OK, _PROBE_DEAD) or (verdict == _PROBE_DAMAGED and self._in_region(v, e[1])):
                continue
            if not wrong:
                first = "its entry for tile %d at offset %d, where the store has %s" % (e[0], e[1], what)
            wrong += 1
        if wrong == 1:
            self._index_damage(v, "disagrees with the store: " + first)
        elif wrong:
            self._index_damage(v, "disagrees with the store: %s (and %d more of its %d entries)" % (
                first, wrong - 1, len(v.ient)))

    def _open_view(self, full_scan):
        """Index the records as ntkd does (open_scan): through the index, or (full_scan, as
        verify and info) by a scan of every record header, the index then checked against it."""
        v = _View()
        size, start = self._load_index(v, full_scan)
        self._scan_records(v, False, size, start)
        if full_scan:
            self._check_entries_all(v)
        return v

    # -- readers through the index (ntk_store_check_entry, ntk_store_check_entries)

    def _ient_at(self, v, off):
        lo, hi = 0, len(v.ient)
        while lo < hi:
            mid = (lo + hi) // 2
            if v.ient[mid][1] < off:
                lo = mid + 1
            else:
                hi = mid
        return lo if lo < len(v.ient) and v.ient[lo][1] == off else None

    def _entry_error(self, v, e, verdict, what):
        tile, off = e[0], e[1]
        if verdict == _PROBE_OTHER:
            self._index_damage(v, "disagrees with the store: its entry for tile %d at offset %d, where the store "
                                  "has %s" % (tile, off, what))
            return self._damaged(self._index_damage_text(v), tile, off)
        return self._damaged("the record of %s at offset %d is damaged (%s there); run the job again to repair it "
                             "and recompute what was lost" % (self._tile_desc(tile), off, what), tile, off)

    def _check_entry(self, v, tile):
        while True:
            f = v.map.get(tile)
            if f is None or not v.index_used or f[0] >= v.index_covered:
                return
            i = self._ient_at(v, f[0])
            if i is None:
                return
            verdict, what = self._probe(v.ient, i)
            if verdict == _PROBE_OK:
                return
            if verdict != _PROBE_DEAD:
                raise self._entry_error(v, v.ient[i], verdict, what)
            self._unindex(v, tile)  # marked dead by a resume since: missing

    def _check_entries(self, v):
        if not v.index_used:
            return
        for i, e in enumerate(v.ient):
            verdict, what = self._probe(v.ient, i)
            if verdict == _PROBE_OK:
                continue
            if verdict != _PROBE_DEAD:
                raise self._entry_error(v, e, verdict, what)
            f = v.map.get(e[0])
            if f is not None and f[0] == e[1]:
                self._unindex(v, e[0])
                continue
            for k, o in enumerate(v.others):
                if o[1] == e[1]:
                    v.others[k] = v.others[-1]
                    v.others.pop()
                    v.duplicates -= self._tiling.is_needed(e[0])
                    break

    # -- damage

    @staticmethod
    def _view_damaged(v, header_damaged, job_text_damaged):
        return bool(v.region_list or v.damaged_count or v.tail_damaged or header_damaged or job_text_damaged
                    or v.index_damaged)

    def _damaged_error(self, v):
        if v.index_damaged and not (v.region_list or v.damaged_count or v.tail_damaged or self.header_damaged
                                    or self.job_text_damaged):
            return self._damaged(self._index_damage_text(v))
        return self._damaged("the store is damaged (ntkd verify lists where); run the job again to repair it and "
                             "recompute what was lost")

    # -- reading tiles (read_payload in store.c, ntk_codec_decode)

    def _tile_desc(self, tile):
        if tile >= self._tiling.ntiles:
            return "tile %d" % tile
        _, _, r0, rows, c0, cols = self._tiling.tile_of(tile)
        return "tile %d (rows %d:%d, cols %d:%d)" % (tile, r0, r0 + rows, c0, c0 + cols)

    def _read_payload(self, v, tile):
        f = v.map.get(tile)
        if f is None:
            raise IncompleteStoreError("%s: %s is not in the store" % (self.path, self._tile_desc(tile)), self.path,
                                       tile, 1)
        off = f[0]
        r = self._pread(_RECORD_HEADER, off)
        # Read again now: the file may have changed since the scan, and a record below the
        # index's mark was not read by it.
        if (self._classify(r, off, _ANY_SIZE) == _REC_BAD or _u32(r, _R_KIND) != _KIND_TILE
                or _u64(r, _R_TILE) != tile or _u64(r, _R_LEN) != f[1] or _u64(r, _R_SEQ) != f[2]):
            i = self._ient_at(v, off) if v.index_used and off < v.index_covered else None
            if i is not None:
                verdict, what = self._probe(v.ient, i)
                if verdict == _PROBE_DEAD:
                    self._unindex(v, tile)
                    raise IncompleteStoreError(
                        "%s: %s is missing: a resume found its record (offset %d) damaged and marked it dead; run "
                        "the job to compute it again" % (self.path, self._tile_desc(tile), off), self.path, tile, 1)
                if verdict != _PROBE_OK:
                    raise self._entry_error(v, v.ient[i], verdict, what)
            raise self._damaged("record of %s at offset %d is damaged" % (self._tile_desc(tile), off), tile, off)
        n = _u64(r, _R_LEN)  # at most the tile's compressed bound (classify)
        payload = self._pread(n, off + _RECORD_HEADER)
        if len(payload) != n:
            raise self._damaged("%s at offset %d is truncated" % (self._tile_desc(tile), off), tile, off)
        if _xxh3(payload) != _u64(r, _R_SUM):
            if v.settled and off >= v.settled:
                # Past the index's sync mark: a write under way (or cut short), as the scan takes it.
                raise IncompleteStoreError(
                    "%s: %s is not in the store yet: its record (offset %d, past the index's sync mark) is still "
                    "being written or was cut short" % (self.path, self._tile_desc(tile), off), self.path, tile, 1)
            raise self._damaged("%s at offset %d is damaged: checksum mismatch" % (self._tile_desc(tile), off),
                                tile, off)
        return payload, off, _u32(r, _R_CODEC)

    def _read_tile(self, tile, v=None):
        """Every kernel of tile `tile`: an array (kernels, rows, cols) of the store's dtype."""
        v = self._v if v is None else v
        _, _, _, rows, _, cols = self._tiling.tile_of(tile)
        raw = self._raw_bytes(rows, cols)
        payload, off, codec = self._read_payload(v, tile)
        if codec == _CODEC_RAW:  # stored raw ([output] level = 0): the values as they are
            if len(payload) != raw:
                raise self._damaged("%s at offset %d: a raw payload of %d bytes, expected %d"
                                    % (self._tile_desc(tile), off, len(payload), raw), tile, off)
            return np.frombuffer(bytes(payload), dtype=self.dtype).reshape(-1, rows, cols)
        data = _zstd_decode(payload, raw, True)
        if data is None:
            raise self._damaged("%s at offset %d: the payload is not a zstd frame of the expected size (%d bytes)"
                                % (self._tile_desc(tile), off, raw), tile, off)
        return _unshuffle(data, self._elem).reshape(-1, rows, cols)

    def _block_missing(self, bi0, bi1, bj0, bj1):
        """(how many, the first) tiles of the block the store needs and lacks, in the order
        ntkd export counts them (an upper-triangle tile whose mirror is in the block once)."""
        tg, have = self._tiling, self._v.map
        missing, first = 0, None
        for I in range(bi0, bi1 + 1):
            for J in range(bj0, bj1 + 1):
                if J > I and J <= bi1 and I >= bj0:
                    continue
                idx = tg.index(I, J) if J <= I else tg.index(J, I)
                if tg.is_needed(idx) and idx not in have:
                    if not missing:
                        first = idx
                    missing += 1
        return missing, first

    def _check_block(self, bi0, bi1, bj0, bj1):
        """Refuse a damaged store, then a block that needs a tile the store lacks, exactly as
        `ntkd export` does (export_check): the records the block needs are checked against the
        index, and all of it before a tile is called missing."""
        v, tg = self._v, self._tiling
        if self.damaged:
            raise self._damaged_error(v)
        whole = bi0 == 0 and bj0 == 0 and bi1 + 1 == tg.nb and bj1 + 1 == tg.nb
        if whole:
            self._check_entries(v)
            missing, first = tg.needed - len(v.map), None
            if missing:
                # The first tile missing, in as many steps as there are tiles present.
                first = next(i for i in range(tg.ntiles) if tg.is_needed(i) and i not in v.map)
        else:
            for I in range(bi0, bi1 + 1):
                for J in range(bj0, bj1 + 1):
                    idx = tg.index(I, J) if J <= I else tg.index(J, I)
                    if tg.is_needed(idx):
                        self._check_entry(v, idx)
            missing, first = self._block_missing(bi0, bi1, bj0, bj1)
            if missing:
                self._check_entries(v)
                missing, first = self._block_missing(bi0, bi1, bj0, bj1)
        if missing:
            if whole:
                msg = "%s is not complete (%d of %d tiles), the first missing %s; run the job to finish it" % (
                    self.path, self.tiles_present, self.tiles_needed, self._tile_desc(first))
            else:
                msg = ("%s is not complete (%d of %d tiles) and the block needs %d tiles it lacks, the first %s; run "
                       "the job to finish it" % (self.path, self.tiles_present, self.tiles_needed, missing,
                                                 self._tile_desc(first)))
            raise IncompleteStoreError(msg, self.path, first, missing)

    # -- public

    @property
    def shape(self):
        return (self.n, self.n)

    @property
    def kernels(self):
        return _kernel_names(self._kernel_mask)

    @property
    def precision(self):
        return "float32" if self._elem == 4 else "float64"

    @property
    def dtype(self):
        return np.dtype("<f%d" % self._elem)

    @property
    def tiles_present(self):
        return len(self._v.map)

    @property
    def tiles_needed(self):
        return self._tiling.needed

    @property
    def complete(self):
        return self.tiles_present == self._tiling.needed

    @property
    def damaged(self):
        """Whether opening found damage (what `ntkd export` refuses and `ntkd verify` exits 4 on;
        payloads and the records the index lists are checked as they are read, all of them
        only by verify())."""
        return self._view_damaged(self._v, self.header_damaged, self.job_text_damaged)

    @property
    def index_note(self):
        return self._v.index_note

    @property
    def index_problem(self):
        return self._v.index_problem

    def __getitem__(self, kernel):
        return Kernel(self, kernel)

    def tiles(self, kernel, allow_missing=False):
        """Iterate over the stored lower-triangle tiles of `kernel` in tile order, as
        ((r0, r1), (c0, c1), array of rows r0..r1-1 and columns c0..c1-1). Tiles never
        computed (test x test) are not stored and not given. A store that lacks needed tiles
        raises IncompleteStoreError unless allow_missing (then they are skipped)."""
        return self[kernel].tiles(allow_missing)

    def verify(self, raise_on_damage=True):
        """Check the store as `ntkd verify` does: a fresh scan of every record header, the
        index checked against it, then every tile's payload checksum, padding and decoding.
        Returns a VerifyReport; raises DamagedStoreError (with .report) if the store is
        damaged, unless raise_on_damage is False. The scan is the report's alone: this
        handle's attributes and reads stay as the open found the store (a store a running
        job completes since is read complete through a new ntkd_store.open)."""
        if not isinstance(raise_on_damage, (bool, np.bool_)):
            raise TypeError("verify: raise_on_damage must be a bool, not %r" % type(raise_on_damage).__name__)
        v = self._open_view(full_scan=True)
        problems = []
        for off, n, tile, why in v.region_list:
            problems.append("bytes %d..%d (%d bytes): %s%s" % (
                off, off + n - 1, n, why, "" if tile is None else ", a record of tile %d" % tile))
        if self.header_damaged:
            problems.append("one of the two header copies (the other is intact)")
        if self.job_text_damaged:
            problems.append("the job description kept in the store")
        if v.index_damaged:
            problems.append(self._index_damage_text(v))
        if v.tail_bytes and v.tail_damaged:
            problems.append("the last %d bytes are not a write cut short (a damaged or foreign record, or "
                            "garbage)" % v.tail_bytes)
        ok = bad = unfinished = 0
        for tile in sorted(v.map):
            off = v.map[tile][0]
            r = self._pread(_RECORD_HEADER, off)
            intact = (self._classify(r, off, _ANY_SIZE) != _REC_BAD and _u32(r, _R_KIND) == _KIND_TILE
                      and _u64(r, _R_TILE) == tile and self._payload_intact(r, off))
            why = "payload checksum mismatch or damaged record"
            if intact:
                try:
                    self._read_tile(tile, v)
                except DamagedStoreError as e:
                    intact, why = False, e.detail
            # Past the index's sync mark a record may still be being written: unfinished.
            if not intact and v.settled and off >= v.settled:
                unfinished += 1
                continue
            if intact:
                ok += 1
            else:
                bad += 1
                problems.append("%s: %s" % (self._tile_desc(tile), why))
        damaged = self._view_damaged(v, self.header_damaged, self.job_text_damaged) or bad > 0
        report = VerifyReport(self.path, ok, bad + v.damaged_count, len(v.map) - bad - unfinished,
                              self._tiling.needed, damaged, v.tail_bytes if not v.tail_damaged else 0, problems,
                              v.index_note if not v.index_damaged else "")
        if damaged and raise_on_damage:
            raise DamagedStoreError("%s: FAILED: the store is damaged: %s" % (self.path, "; ".join(problems[:8])),
                                    self.path, report=report)
        return report

    def close(self):
        if getattr(self, "_fd", None) is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __reduce_ex__(self, protocol):
        # A copy would hold the same file descriptor and close it when collected: the original
        # then read whatever file took that number next.
        raise TypeError(f"an open store ({self.path}) cannot be pickled or copied: pass its path, and "
                        "open it again (ntkd.store.open)")

    def __del__(self):
        self.close()

    def __repr__(self):
        return "<ntkd_store.Store %s: %d x %d %s %s, %d/%d tiles%s>" % (
            self.path, self.n, self.n, self.precision, "+".join(self.kernels), self.tiles_present,
            self.tiles_needed, ", damaged" if self.damaged else "")


class VerifyReport:
    """What Store.verify() found: intact, damaged (tiles), present, needed, complete,
    damaged_store (bool: what `ntkd verify` exits 4 on), torn_tail_bytes (a write cut
    short: reported, not damage), problems (one line each), index_note (why there is no
    usable index, as `ntkd verify` notes it: not damage; "" if there is)."""

    def __init__(self, path, intact, damaged, present, needed, damaged_store, torn_tail_bytes, problems,
                 index_note=""):
        self.path = path
        self.intact, self.damaged, self.present, self.needed = intact, damaged, present, needed
        self.complete = present == needed
        self.damaged_store = damaged_store
        self.torn_tail_bytes = torn_tail_bytes
        self.problems = problems
        self.index_note = index_note

    def __bool__(self):
        return not self.damaged_store

    def __repr__(self):
        return "<VerifyReport %s: %d tiles intact, %d damaged, %d of %d tiles present%s%s>" % (
            self.path, self.intact, self.damaged, self.present, self.needed, " (complete)" if self.complete else "",
            ", DAMAGED" if self.damaged_store else "")


def _axis(key, n, what):
    """(start, stop, scalar) of one index: an integer (negative counts from the end) or a
    slice of step 1, clipped like numpy's."""
    if isinstance(key, slice):
        for x in (key.start, key.stop, key.step):
            if x is not None and (not isinstance(x, (int, np.integer)) or isinstance(x, (bool, np.bool_))):
                raise TypeError("%s: slice bounds must be integers, not %r" % (what, type(x).__name__))
        if key.step is not None and key.step != 1:
            raise ValueError("%s: only slices of step 1 are supported, not %r" % (what, key.step))
        start, stop, _ = key.indices(n)
        return start, max(start, stop), False
    if isinstance(key, (int, np.integer)) and not isinstance(key, (bool, np.bool_)):
        i = int(key)
        if not -n <= i < n:
            raise IndexError("%s: index %d is out of bounds for size %d" % (what, i, n))
        i = i + n if i < 0 else i
        return i, i + 1, True
    raise TypeError("%s: an integer or a slice of step 1, not %r" % (what, type(key).__name__))


class Kernel:
    """One kernel of a store, indexed like the N x N numpy array it is:
    K[i0:i1, j0:j1], K[i], K[i, j0:j1], K[i, j]; steps other than 1 are refused."""

    def __init__(self, store, name):
        if not isinstance(name, str):
            raise TypeError("a kernel is named by a string ('nngp' or 'ntk'), not %r" % type(name).__name__)
        if name not in store.kernels:
            raise KeyError("%s holds no %r kernel (it has: %s)" % (store.path, name, ", ".join(store.kernels)))
        self.store, self.name = store, name
        # The payload holds NNGP, then NTK when both are stored.
        self._which = 1 if name == "ntk" and store._kernel_mask & _KERNEL_NNGP else 0

    @property
    def shape(self):
        return self.store.shape

    @property
    def dtype(self):
        return self.store.dtype

    def __len__(self):
        return self.store.n

    def __repr__(self):
        return "<ntkd_store.Kernel %s of %s: %d x %d %s>" % (self.name, self.store.path, self.store.n, self.store.n,
                                                             self.store.precision)

    def __getitem__(self, key):
        if not isinstance(key, tuple):
            key = (key,)
        key = key if key else (slice(None),)
        if len(key) > 2 or any(k is Ellipsis or k is None for k in key):
            raise IndexError("a kernel takes at most two indices (rows, columns), integers or slices of step 1")
        n = self.store.n
        r0, r1, rs = _axis(key[0], n, "rows")
        c0, c1, cs = _axis(key[1] if len(key) > 1 else slice(None), n, "columns")
        out = self.block(r0, r1, c0, c1)
        if rs and cs:
            return out[0, 0]
        if rs:
            return out[0]
        if cs:
            return out[:, 0].copy()
        return out

    def block(self, r0, r1, c0, c1):
        """Rows r0..r1-1 and columns c0..c1-1 (0 <= r0 <= r1 <= N, likewise c) as a new array."""
        for x in (r0, r1, c0, c1):
            if not isinstance(x, (int, np.integer)) or isinstance(x, (bool, np.bool_)):
                raise TypeError("block: bounds must be integers, not %r" % type(x).__name__)
        r0, r1, c0, c1 = int(r0), int(r1), int(c0), int(c1)
        self.store._closed_check()  # every read, also one that needs no tile (never computed, empty)
        S, tg = self.store, self.store._tiling
        n, T = S.n, S.tile
        if not (0 <= r0 <= r1 <= n and 0 <= c0 <= c1 <= n):
            raise IndexError("block rows %d:%d, columns %d:%d: beyond the %d x %d matrix" % (r0, r1, c0, c1, n, n))
        out = np.empty((r1 - r0, c1 - c0), dtype=S.dtype)
        if r0 == r1 or c0 == c1:
            return out
        bi0, bi1, bj0, bj1 = r0 // T, (r1 - 1) // T, c0 // T, (c1 - 1) // T
        S._check_block(bi0, bi1, bj0, bj1)
        # The lower-triangle tiles the block touches, each with the parts of the block it fills.
        parts = {}
        for I in range(bi0, bi1 + 1):
            for J in range(bj0, bj1 + 1):
                parts.setdefault(tg.index(I, J) if J <= I else tg.index(J, I), []).append((I, J))
        for tile in sorted(parts):
            bi, bj, t_r0, rows, t_c0, cols = tg.tile_of(tile)
            data = S._read_tile(tile)[self._which] if tg.is_needed(tile) else None
            for I, J in parts[tile]:
                i0, i1 = max(r0, I * T), min(r1, I * T + T, n)
                j0, j1 = max(c0, J * T), min(c1, J * T + T, n)
                dst = out[i0 - r0:i1 - r0, j0 - c0:j1 - c0]
                if data is None:  # test x test of a regression store that did not ask for it
                    dst[...] = np.nan
                elif (I, J) == (bi, bj):
                    dst[...] = data[i0 - t_r0:i1 - t_r0, j0 - t_c0:j1 - t_c0]
                else:  # upper triangle: the transpose of the stored tile (J, I)
                    dst[...] = data[j0 - t_r0:j1 - t_r0, i0 - t_c0:i1 - t_c0].T
        return out

    def _check_whole(self, allow_missing):
        """The whole matrix, as `ntkd export` checks it; with allow_missing only damage (and
        the index's entries, so that a record marked dead since is skipped, not read)."""
        S = self.store
        if not isinstance(allow_missing, (bool, np.bool_)):
            raise TypeError("allow_missing must be a bool, not %r" % type(allow_missing).__name__)
        if allow_missing:
            if S.damaged:
                raise S._damaged_error(S._v)
            S._check_entries(S._v)
        else:
            nb = S._tiling.nb
            S._check_block(0, nb - 1, 0, nb - 1)

    def tiles(self, allow_missing=False):
        """See Store.tiles."""
        self.store._closed_check()
        self._check_whole(allow_missing)  # now, not at the first next()
        return self._tiles()

    def _tiles(self):
        S, tg = self.store, self.store._tiling
        for tile in sorted(S._v.map):  # what is stored: never a walk over every tile number
            _, _, r0, rows, c0, cols = tg.tile_of(tile)
            yield (r0, r0 + rows), (c0, c0 + cols), S._read_tile(tile)[self._which]

    def matvec(self, v):
        """K @ v for a real vector v of shape (N,) or matrix of shape (N, k), in float64,
        reading each stored tile once: a tile T of rows R and columns C adds T v[C] to y[R]
        and, off the diagonal, T^T v[R] to y[C]. Rows of a test x test block that was not
        computed are NaN, as numpy gives with the exported matrix. A complex, boolean or
        non-numeric v raises TypeError, a wrong shape ValueError."""
        self.store._closed_check()
        S, tg = self.store, self.store._tiling
        if isinstance(v, (str, bytes)) or v is None:
            raise TypeError("matvec: v must be a real array of shape (%d,) or (%d, k), not %r"
                            % (S.n, S.n, type(v).__name__))
        if isinstance(v, np.ma.MaskedArray):  # np.asarray drops the mask: the values under it were multiplied
            raise ValueError("matvec: v is a masked array: pass v.filled(value) as a plain array")
        try:
            v = np.asarray(v)
        except (TypeError, ValueError) as e:
            raise TypeError("matvec: v is not an array: %s" % e) from None
        if v.dtype.kind not in "iuf":
            raise TypeError("matvec: v must be real (integers or floats), not of dtype %s%s" % (
                v.dtype, " (the kernel is real: multiply the real and imaginary parts apart)"
                if v.dtype.kind == "c" else ""))
        if v.ndim not in (1, 2) or v.shape[0] != S.n:
            raise ValueError("matvec: v must have shape (%d,) or (%d, k), not %s" % (S.n, S.n, v.shape))
        v = v.astype(np.float64)
        self._check_whole(False)
        y = np.zeros(v.shape, dtype=np.float64)
        for (r0, r1), (c0, c1), t in self._tiles():
            t = t.astype(np.float64)
            y[r0:r1] += t @ v[c0:c1]
            if r0 != c0:
                y[c0:c1] += t.T @ v[r0:r1]
        if tg.nbc < tg.nb:
            # test x test not computed: those entries are NaN, and so is every row that meets them.
            y[tg.nbc * tg.tile:] = np.nan
        return y
