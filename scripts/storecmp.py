#!/usr/bin/env python3
"""scripts/storecmp.py A B: compare two stores byte for byte, allowing differences
only in the store id (header copies at 72..88, every record header at
16..32) and in the checksums that cover it (header 4088..4096, record
header 120..128). Where records were written in another order (mpirun),
compares the headers so masked and every tile's record (its header but the
id, sequence number and checksum, and its payload), by tile number; a dead
region (a stretch a resume found damaged and recomputed elsewhere) is no
tile and is stepped over."""
import struct, sys
if len(sys.argv) != 3:
    print("usage: scripts/storecmp.py A.ntk B.ntk (exit 0: equal but for the ids, 1: different, 2: not stores)",
          file=sys.stderr)
    sys.exit(2)


def store(path):
    try:
        s = open(path, 'rb').read()
    except OSError as e:
        print("storecmp: %s: %s" % (path, e.strerror), file=sys.stderr)
        sys.exit(2)
    if len(s) < 8192 or s[:8] != b'NTKDSTOR' or s[4096:4104] != b'NTKDSTOR':
        print("storecmp: %s is not an ntkd store (no NTKDSTOR header copies at bytes 0 and 4096)" % path,
              file=sys.stderr)
        sys.exit(2)
    return s


a, b = store(sys.argv[1]), store(sys.argv[2])
def records(s):
    off, out = struct.unpack_from('<Q', s, 136)[0], {}
    while off + 128 <= len(s) and s[off:off + 8] == b'NTKDTILE':
        ext = struct.unpack_from('<Q', s, off + 80)[0]
        if struct.unpack_from('<I', s, off + 12)[0] == 2:  # a dead region (a repaired store): no tile, stepped over
            off += ext
            continue
        tile = struct.unpack_from('<Q', s, off + 32)[0]
        out[tile] = (off, s[off:off + 16] + s[off + 32:off + 88] + s[off + 96:off + 120] + s[off + 128:off + ext])
        off += ext
    return out
ra, rb = records(a), records(b)
if len(a) == len(b):
    allowed = set()
    for h in (0, 4096):
        allowed.update(range(h + 72, h + 88)); allowed.update(range(h + 4088, h + 4096))
    for off, _ in ra.values():
        allowed.update(range(off + 16, off + 32)); allowed.update(range(off + 120, off + 128))
    diff = [i for i in range(len(a)) if a[i] != b[i]]
    if all(i in allowed for i in diff):
        print("%d bytes, %d records: %d bytes differ, all in the ids and their checksums" % (len(a), len(ra), len(diff)))
        sys.exit(0)
mask = lambda s, h: s[h:h + 72] + s[h + 88:h + 4088]
same_hdr = all(mask(a, h) == mask(b, h) for h in (0, 4096))
first = lambda s: struct.unpack_from('<Q', s, 136)[0]
same_text = a[8192:first(a)] == b[8192:first(b)]
same_recs = ra.keys() == rb.keys() and all(ra[t][1] == rb[t][1] for t in ra)
ok = same_hdr and same_text and same_recs
print("%d records in another order: headers but the id %s, job text %s, every tile's record but id, sequence, "
      "checksum %s" % (len(ra), *["identical" if x else "DIFFERENT" for x in (same_hdr, same_text, same_recs)]))
sys.exit(0 if ok else 1)
