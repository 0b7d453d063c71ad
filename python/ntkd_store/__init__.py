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

The store format is docs/STORE-FORMAT.md; this reader finds records exactly
as ntkd's C reader (src/coordinator/store.c) does and checks every checksum
it reads (XXH3-64, hence the xxhash package): the header copies, the job
text, each record header and each payload. Blocks come from the stored
lower-triangle tiles, the upper triangle by symmetry; entries of the test x
test block of a kernel-regression store that were not computed are NaN.
Only the tiles a block touches are read, one at a time: memory is the block
plus one tile. Like `ntkd export`, reading refuses a damaged store
(DamagedStoreError) and a block that needs a tile the store lacks
(IncompleteStoreError); a block whose tiles are all present is read from an
unfinished store.

Dependencies: numpy, zstandard, xxhash (Debian: python3-numpy,
python3-zstandard, python3-xxhash).
"""

import math
import os
import stat
import struct

import numpy as np
import xxhash
import zstandard

__all__ = [
    "open", "Store", "Kernel", "VerifyReport", "StoreError", "NotAStoreError", "DamagedStoreError",
    "IncompleteStoreError",
]
__version__ = "0.1.0"

# ---- the format (docs/STORE-FORMAT.md, src/coordinator/store.c) -------------------

_HEADER_MAGIC = b"NTKDSTOR"
_RECORD_MAGIC = b"NTKDTILE"
_VERSION = 2
_HEADER_SIZE = 4096
_RECORD_HEADER = 128
_DESC_MAX = 1024
_JOB_TEXT_AT = 2 * _HEADER_SIZE
_JOB_TEXT_MAX = 64 << 20
_PAGE = 4096
_MAX_N = 1 << 40
_MAX_TILE = 16384
_MAX_TILES = 1 << 34
_FLAG_TEST_TEST = 1
_KIND_TILE, _KIND_DEAD = 1, 2
_CODEC_SHUFFLE_ZSTD = 1
_CODEC_RAW = 2
_NO_TILE = (1 << 64) - 1
_KERNEL_NNGP, _KERNEL_NTK = 1, 2
_SCAN_CHUNK = 1 << 20

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


# ---- errors -------------------------------------------------------------------------


class StoreError(Exception):
    """A store that cannot be read: the base of the errors below. `path` names the file."""

    def __init__(self, message, path=None):
        super().__init__(message)
        self.path = path


class NotAStoreError(StoreError):
    """The file is not an ntkd store (no NTKDSTOR magic), or one of another format version."""


class DamagedStoreError(StoreError):
    """Damage: a header, job text, record or payload fails its checks. `tile` and `offset`
    name the record when one is concerned (else None); `report` is set by verify()."""

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

_DCTX = zstandard.ZstdDecompressor()


def _zstd_decode(data, raw, check_frame_size):
    """What ZSTD_decompress into a buffer of `raw` bytes gives (every frame of `data`, in
    turn), or None unless it is exactly `raw` bytes. check_frame_size: first refuse a first
    frame whose header gives another content size (ntk_codec_decompress does)."""
    data = bytes(data)
    if check_frame_size:
        try:
            size = zstandard.frame_content_size(data)
        except zstandard.ZstdError:
            return None
        if size != -1 and size != raw:
            return None
    parts, total = [], 0
    while data:
        obj = _DCTX.decompressobj()
        try:
            chunk = obj.decompress(data)
        except zstandard.ZstdError:
            return None
        total += len(chunk)
        if total > raw or not obj.eof:  # too much, or a frame cut short
            return None
        parts.append(chunk)
        data = obj.unused_data
    return b"".join(parts) if total == raw else None


def _unshuffle(shuffled, elem):
    """Inverse of the byte shuffle: byte b of value i is at b * count + i."""
    count = len(shuffled) // elem
    return np.frombuffer(shuffled, dtype=np.uint8).reshape(elem, count).T.copy().view("<f%d" % elem).reshape(count)


# ---- the store ----------------------------------------------------------------------------


def open(path):  # noqa: A001 (the module's entry point, as in gzip.open)
    """Open the store at `path` for reading: check its header, index its records."""
    return Store(path)


class _Scan:
    """What a scan of the records found (struct ntk_store_scan)."""

    def __init__(self):
        self.index = {}  # tile -> (offset, payload bytes, sequence number)
        self.duplicates = 0
        self.hurt = set()  # tiles with a record whose payload is damaged
        self.regions = []  # (offset, bytes, tile or None, why)
        self.dead = self.dead_bytes = 0
        self.tail_bytes = 0
        self.tail_damaged = False
        self.end = 0
        self.payload_bytes = 0

    @property
    def damaged_tiles(self):
        return sorted(t for t in self.hurt if t not in self.index)


class Store:
    """An ntkd store opened for reading (ntkd_store.open). Never writes.

    Attributes: path, shape (N, N), n, n_train (0: no train/test split), test_test, tile,
    kernels, precision ("float32"/"float64"), dtype, features, description, job_text,
    job_hash (hex), complete, damaged, tiles_present, tiles_needed.
    """

    def __init__(self, path):
        self.path = os.fspath(path)
        st = os.stat(self.path)
        if not stat.S_ISREG(st.st_mode):
            raise StoreError("%s is not a regular file (store)" % self.path, self.path)
        self._fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            self._open()
        except BaseException:
            self.close()
            raise

    # -- low level

    def _pread(self, n, off):
        """Up to n bytes at off: fewer only at the end of the file."""
        parts, got = [], 0
        while got < n:
            b = os.pread(self._fd, min(n - got, 1 << 30), off + got)
            if not b:
                break
            parts.append(b)
            got += len(b)
        return b"".join(parts)

    def _size(self):
        return os.fstat(self._fd).st_size

    def _damaged(self, message, tile=None, offset=None):
        return DamagedStoreError("%s: %s" % (self.path, message), self.path, tile, offset, detail=message)

    # -- opening: header copies, job text, scan (open_scan in store.c)

    def _open(self):
        size = self._size()
        h = self._pread(2 * _HEADER_SIZE, 0).ljust(2 * _HEADER_SIZE, b"\0")
        a, b = h[:_HEADER_SIZE], h[_HEADER_SIZE:]

        def intact(x):
            return x[:8] == _HEADER_MAGIC and _u64(x, _H_CHECKSUM) == _xxh3(x[:_H_CHECKSUM])

        a_ok, b_ok = intact(a), intact(b)
        if not a_ok and not b_ok:
            if a[:8] != _HEADER_MAGIC and b[:8] != _HEADER_MAGIC:
                raise NotAStoreError("%s: not an ntkd store (no NTKDSTOR magic)" % self.path, self.path)
            raise self._damaged("both copies of the store header are damaged")
        if a_ok and b_ok and a != b:
            raise self._damaged("the two copies of the store header disagree")
        good = a if a_ok else b
        self._decode_header(good)
        self.header_damaged = not (a_ok and b_ok)
        if size < self._first:
            raise self._damaged("store is shorter than its own header")
        self._read_job_text(good)
        self._scan = self._scan_records(False, size)

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
        text_len, text_raw = _u64(h, _H_TEXT_LEN), _u64(h, _H_TEXT_RAW)
        buf = self._pread(text_len, _JOB_TEXT_AT)
        text = None
        if len(buf) == text_len and _xxh3(buf) == _u64(h, _H_TEXT_SUM):
            text = _zstd_decode(buf, text_raw, False)
        self.job_text_damaged = text is None
        # The C reader keeps it as a C string.
        self.job_text = "" if text is None else text.split(b"\0", 1)[0].decode("utf-8", "replace")

    # -- records (classify, find_next, scan_records in store.c)

    def _classify(self, r, off, size):
        if r[:8] != _RECORD_MAGIC or _u64(r, _R_CHECKSUM) != _xxh3(r[:_R_CHECKSUM]):
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

    def _raw_bytes(self, rows, cols):
        return rows * cols * self._elem * len(_kernel_names(self._kernel_mask))

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

    def _scan_records(self, check_payload, size):
        sc = _Scan()
        off = self._first
        while off < size:
            r = self._pread(_RECORD_HEADER, off) if size - off >= _RECORD_HEADER else b""
            kind = self._classify(r, off, size) if len(r) == _RECORD_HEADER else _REC_TORN
            if kind == _REC_TORN:
                break  # the tail: a write cut short
            if kind == _REC_BAD:
                nxt = self._find_next(off + self._align, size)
                if nxt == size:
                    break  # the tail, classified below
                sc.regions.append((off, nxt - off, None, "not an intact record of this store"))
                off = nxt
                continue
            extent, seq = _u64(r, _R_EXTENT), _u64(r, _R_SEQ)
            if _u32(r, _R_KIND) == _KIND_DEAD:
                sc.dead += 1
                sc.dead_bytes += extent
                off += extent
                continue
            tile, n = _u64(r, _R_TILE), _u64(r, _R_LEN)
            if check_payload and not self._payload_intact(r, off):
                sc.hurt.add(tile)
                sc.regions.append((off, extent, tile, "payload checksum mismatch"))
            elif self._tiling.is_needed(tile):
                # The newest record of a tile wins, by sequence number (ties: the later one).
                old = sc.index.get(tile)
                if old is not None:
                    sc.duplicates += 1
                if old is None or seq >= old[2]:
                    if old is not None:
                        sc.payload_bytes -= old[1]
                    sc.index[tile] = (off, n, seq)
                    sc.payload_bytes += n
            # else: a test x test tile this store does not ask for: stepped over.
            off += extent
        sc.end = off
        sc.tail_bytes = size - off if off < size else 0
        if sc.tail_bytes:
            # A write cut short leaves a prefix of a record; anything else is damage.
            r = self._pread(_RECORD_HEADER, off)
            torn = sc.tail_bytes < _RECORD_HEADER or (
                len(r) == _RECORD_HEADER and self._classify(r, off, size) == _REC_TORN)
            sc.tail_damaged = not torn
        return sc

    @staticmethod
    def _scan_damaged(sc, header_damaged, job_text_damaged):
        return bool(sc.regions or sc.damaged_tiles or sc.tail_damaged or header_damaged or job_text_damaged)

    # -- reading tiles (ntk_store_read_payload, ntk_codec_decompress)

    def _tile_desc(self, tile):
        _, _, r0, rows, c0, cols = self._tiling.tile_of(tile)
        return "tile %d (rows %d:%d, cols %d:%d)" % (tile, r0, r0 + rows, c0, c0 + cols)

    def _read_payload(self, tile, index):
        off = index[tile][0]
        r = self._pread(_RECORD_HEADER, off)
        # Read again now: the file may have changed since the scan.
        if (len(r) != _RECORD_HEADER or r[:8] != _RECORD_MAGIC or _u64(r, _R_CHECKSUM) != _xxh3(r[:_R_CHECKSUM])
                or r[_R_STOREID:_R_STOREID + 16] != self._store_id or _u64(r, _R_TILE) != tile):
            raise self._damaged("record of %s at offset %d is damaged" % (self._tile_desc(tile), off), tile, off)
        n = _u64(r, _R_LEN)
        payload = self._pread(n, off + _RECORD_HEADER)
        if len(payload) != n:
            raise self._damaged("%s at offset %d is truncated" % (self._tile_desc(tile), off), tile, off)
        if _xxh3(payload) != _u64(r, _R_SUM):
            raise self._damaged("%s at offset %d is damaged: checksum mismatch" % (self._tile_desc(tile), off),
                                tile, off)
        return payload, off, _u32(r, _R_CODEC)

    def _read_tile(self, tile, index=None):
        """Every kernel of tile `tile`: an array (kernels, rows, cols) of the store's dtype."""
        index = self._scan.index if index is None else index
        _, _, _, rows, _, cols = self._tiling.tile_of(tile)
        raw = self._raw_bytes(rows, cols)
        payload, off, codec = self._read_payload(tile, index)
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

    def _check_readable(self, tiles):
        """Refuse a damaged store, then a request for tiles the store does not hold."""
        if self.damaged:
            raise self._damaged("the store is damaged (ntkd verify lists where); run the job again to repair "
                                "it and recompute what was lost")
        missing = [t for t in tiles if self._tiling.is_needed(t) and t not in self._scan.index]
        if missing:
            first = min(missing)
            raise IncompleteStoreError(
                "%s is not complete (%d of %d tiles) and this needs %d tiles it lacks, the first %s; run the job "
                "to finish it" % (self.path, self.tiles_present, self.tiles_needed, len(missing),
                                  self._tile_desc(first)), self.path, first, len(missing))

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
        return len(self._scan.index)

    @property
    def tiles_needed(self):
        return self._tiling.needed

    @property
    def complete(self):
        return self.tiles_present == self._tiling.needed

    @property
    def damaged(self):
        """Whether opening found damage (what `ntkd export` refuses and `ntkd verify` exits 4 on;
        payloads are checked as they are read, all of them only by verify())."""
        return self._scan_damaged(self._scan, self.header_damaged, self.job_text_damaged)

    def __getitem__(self, kernel):
        return Kernel(self, kernel)

    def tiles(self, kernel, allow_missing=False):
        """Iterate over the stored lower-triangle tiles of `kernel` in tile order, as
        ((r0, r1), (c0, c1), array of rows r0..r1-1 and columns c0..c1-1). Tiles never
        computed (test x test) are not stored and not given. A store that lacks needed tiles
        raises IncompleteStoreError unless allow_missing (then they are skipped)."""
        return self[kernel].tiles(allow_missing)

    def verify(self, raise_on_damage=True):
        """Check every record as `ntkd verify` does: a fresh scan that checks every payload's
        checksum and padding, then every indexed tile decoded to its size. Returns a
        VerifyReport; raises DamagedStoreError (with .report) if the store is damaged, unless
        raise_on_damage is False."""
        sc = self._scan_records(True, self._size())
        problems = []
        for t in sc.damaged_tiles:
            problems.append("%s: payload checksum mismatch, no intact copy" % self._tile_desc(t))
        for off, n, tile, why in sc.regions:
            problems.append("bytes %d..%d (%d bytes): %s%s" % (
                off, off + n - 1, n, why, "" if tile is None else ", a record of tile %d" % tile))
        if self.header_damaged:
            problems.append("one of the two header copies (the other is intact)")
        if self.job_text_damaged:
            problems.append("the job description kept in the store")
        if sc.tail_bytes and sc.tail_damaged:
            problems.append("the last %d bytes are not a write cut short (a damaged or foreign record, or "
                            "garbage)" % sc.tail_bytes)
        ok = bad = 0
        for tile in sorted(sc.index):
            try:
                self._read_tile(tile, sc.index)
                ok += 1
            except DamagedStoreError as e:
                bad += 1
                problems.append(e.detail)
        damaged = self._scan_damaged(sc, self.header_damaged, self.job_text_damaged) or bad > 0
        report = VerifyReport(self.path, ok, bad + len(sc.damaged_tiles), len(sc.index), self._tiling.needed,
                              damaged, sc.tail_bytes if not sc.tail_damaged else 0, problems)
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

    def __del__(self):
        self.close()

    def __repr__(self):
        return "<ntkd_store.Store %s: %d x %d %s %s, %d/%d tiles%s>" % (
            self.path, self.n, self.n, self.precision, "+".join(self.kernels), self.tiles_present,
            self.tiles_needed, ", damaged" if self.damaged else "")


class VerifyReport:
    """What Store.verify() found: intact, damaged (tiles), present, needed, complete,
    damaged_store (bool: what `ntkd verify` exits 4 on), torn_tail_bytes (a write cut
    short: reported, not damage), problems (one line each)."""

    def __init__(self, path, intact, damaged, present, needed, damaged_store, torn_tail_bytes, problems):
        self.path = path
        self.intact, self.damaged, self.present, self.needed = intact, damaged, present, needed
        self.complete = present == needed
        self.damaged_store = damaged_store
        self.torn_tail_bytes = torn_tail_bytes
        self.problems = problems

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
        S, tg = self.store, self.store._tiling
        n, T = S.n, S.tile
        if not (0 <= r0 <= r1 <= n and 0 <= c0 <= c1 <= n):
            raise IndexError("block rows %d:%d, columns %d:%d: beyond the %d x %d matrix" % (r0, r1, c0, c1, n, n))
        out = np.empty((r1 - r0, c1 - c0), dtype=S.dtype)
        if r0 == r1 or c0 == c1:
            return out
        bi0, bi1, bj0, bj1 = r0 // T, (r1 - 1) // T, c0 // T, (c1 - 1) // T
        # The lower-triangle tiles the block touches, each with the parts of the block it fills.
        parts = {}
        for I in range(bi0, bi1 + 1):
            for J in range(bj0, bj1 + 1):
                parts.setdefault(tg.index(I, J) if J <= I else tg.index(J, I), []).append((I, J))
        S._check_readable(parts)
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

    def tiles(self, allow_missing=False):
        """See Store.tiles."""
        S, tg = self.store, self.store._tiling
        S._check_readable([] if allow_missing else range(tg.ntiles))  # now, not at the first next()
        return self._tiles()

    def _tiles(self):
        S, tg = self.store, self.store._tiling
        for tile in range(tg.ntiles):
            if tile not in S._scan.index:  # absent, or never computed (test x test)
                continue
            _, _, r0, rows, c0, cols = tg.tile_of(tile)
            yield (r0, r0 + rows), (c0, c0 + cols), S._read_tile(tile)[self._which]

    def matvec(self, v):
        """K @ v for v of shape (N,) or (N, k), in float64, reading each stored tile once:
        a tile T of rows R and columns C adds T v[C] to y[R] and, off the diagonal, T^T v[R]
        to y[C]. Rows of a test x test block that was not computed are NaN, as numpy gives
        with the exported matrix."""
        S, tg = self.store, self.store._tiling
        v = np.asarray(v)
        if v.ndim not in (1, 2) or v.shape[0] != S.n:
            raise ValueError("matvec: v must have shape (%d,) or (%d, k), not %s" % (S.n, S.n, v.shape))
        v = v.astype(np.float64)
        y = np.zeros(v.shape, dtype=np.float64)
        S._check_readable(range(tg.ntiles))
        for tile in range(tg.ntiles):
            bi, bj, r0, rows, c0, cols = tg.tile_of(tile)
            R, C = slice(r0, r0 + rows), slice(c0, c0 + cols)
            if not tg.is_needed(tile):
                y[R] += np.nan
                y[C] += np.nan
                continue
            t = S._read_tile(tile)[self._which].astype(np.float64)
            y[R] += t @ v[C]
            if bi != bj:
                y[C] += t.T @ v[R]
        return y
