#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets into native/fuzz/corpus/ (committed;
rerun only to change the seeds). Logs follow docs/format.md (little-endian, as the
engine writes them on x86-64 and arm64); b-tree pages come from databases that the
stock sqlite3 module of Python builds. Usage: python3 native/fuzz/seeds.py"""
import os
import shutil
import sqlite3
import struct
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")
M64 = (1 << 64) - 1
CK1, CK2, CK3 = 0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9


def rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & M64


def lane(h, w):
    return (rotl(h ^ ((w * CK1) & M64), 29) * CK2) & M64


def checksum(seed, data):
    """mw_log_checksum of log.c."""
    a, b, c, d = seed ^ CK1, seed ^ CK2, seed ^ CK3, rotl(seed, 32)
    n, i = len(data), 0
    word = lambda j: struct.unpack_from("<Q", data, j)[0]
    while i + 32 <= n:
        a, b, c, d = lane(a, word(i)), lane(b, word(i + 8)), lane(c, word(i + 16)), lane(d, word(i + 24))
        i += 32
    while i + 8 <= n:
        a = lane(a, word(i))
        i += 8
    if i < n:
        b = lane(b, int.from_bytes(data[i:] + bytes(8 - (n - i)), "little"))
    h = (rotl(a, 1) + rotl(b, 7) + rotl(c, 12) + rotl(d, 18)) & M64
    h ^= (n * CK3) & M64
    h ^= h >> 33
    h = (h * CK2) & M64
    h ^= h >> 29
    h = (h * CK3) & M64
    h ^= h >> 32
    return h


def log_bytes(ps, base, salt, records, tail=b""):
    h = bytearray(64)
    h[0:8] = b"SQLMWLOG"
    struct.pack_into("<IIIIQQ", h, 8, 1, 0x01020304, ps, 0, base, salt)
    struct.pack_into("<Q", h, 56, checksum(0, bytes(h[:56])))
    out = bytearray(h)
    for epoch, dbpages, pages in records:
        body = b"".join(struct.pack("<I", pg) + img for pg, img in pages)
        rh = bytearray(32)
        struct.pack_into("<IIQII", rh, 0, 0x4D575243, len(pages), epoch, dbpages, 0)
        struct.pack_into("<Q", rh, 24, checksum(checksum(salt, bytes(rh[:24])), body))
        out += rh + body
    return bytes(out) + tail


def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def log_seeds():
    img = lambda ps, k: bytes((k * 31 + i * 7) & 0xFF for i in range(ps))
    for ps, sel in ((512, 0), (1024, 1), (4096, 2)):
        recs = [(2 + e, 3 + e, [(1 + e + j, img(ps, e + j)) for j in range(1 + e % 3)]) for e in range(4)]
        good = log_bytes(ps, 1, 0x1234567890ABCDEF, recs)
        write("fuzz_log", f"ps{ps}-4records", bytes([sel << 3]) + good)
        write("fuzz_log", f"ps{ps}-4records-commit", bytes([sel << 3 | 2]) + good)
        write("fuzz_log", f"ps{ps}-torn", bytes([sel << 3]) + good[: len(good) - 100])
        write("fuzz_log", f"ps{ps}-zero-tail", bytes([sel << 3 | 4]) + good + bytes(3000))
    # Checksums fixed by the target: the fuzzer may change anything.
    recs = [(6, 9, [(2, bytes(512)), (3, b"\x0d" + bytes(511))]), (7, 9, [])]
    write("fuzz_log", "fixsums-base5", bytes([1 | 3 << 3]) + log_bytes(512, 5, 77, recs))
    write("fuzz_log", "header-only", bytes([0]) + log_bytes(512, 1, 1, []))
    write("fuzz_log", "empty", bytes([0]))
    write("fuzz_log", "bad-header-records", bytes([0]) + bytes(64) + log_bytes(512, 1, 1, recs)[64:])


def pages_of(path):
    with open(path, "rb") as f:
        data = f.read()
    ps = struct.unpack(">H", data[16:18])[0]
    ps = 65536 if ps == 1 else ps
    return ps, [data[i:i + ps] for i in range(0, len(data), ps)]


def make_db(path, ps, sql):
    c = sqlite3.connect(path)
    c.execute(f"PRAGMA page_size={ps}")
    c.execute("PRAGMA journal_mode=DELETE")
    c.executescript(sql)
    c.commit()
    c.close()


def two_sides(base, *sides):
    """Copies base to each side's path and runs the side's SQL on it: (path, sql) pairs."""
    for path, sql in sides:
        shutil.copy(base, path)
        c = sqlite3.connect(path)
        c.executescript(sql)
        c.commit()
        c.close()


def btree_seeds(tmp):
    sel = {512: 0, 1024: 1, 4096: 3}
    base_sql = ("CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB);"
                "CREATE INDEX tv ON t(v);"
                "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 60) "
                "INSERT INTO t SELECT i, randomblob(40 + (i % 7) * 30) FROM n;"
                "INSERT INTO t VALUES(1000, randomblob(3000));")
    for ps in (512, 1024):
        p = os.path.join(tmp, f"b{ps}.db")
        make_db(p, ps, base_sql)
        _, pages = pages_of(p)
        ctl = bytes(5 + 12)
        for k, pg in enumerate(pages[:24]):
            write("fuzz_btree", f"read-ps{ps}-page{k + 1}", bytes([sel[ps], 0, 0]) + ctl + pg)
        # merge: the interior table pages three times, and a sibling change on each side
        interior = [pg for pg in pages[1:] if pg[0] == 5]
        for k, pg in enumerate(interior[:3]):
            write("fuzz_btree", f"merge-ps{ps}-same{k}", bytes([sel[ps], 0, 1]) + ctl + pg * 3)
    # merge: both sides grew the same table by appending (base, ours, theirs)
    p0, p1, p2 = (os.path.join(tmp, f"m{k}.db") for k in range(3))
    make_db(p0, 512, "CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB);"
                     "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 40) "
                     "INSERT INTO t SELECT i * 10, randomblob(100) FROM n;")
    append = ("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 8) "
              "INSERT INTO t SELECT {} + i, randomblob(100) FROM n;")
    two_sides(p0, (p1, append.format(10000)), (p2, append.format(20000)))
    trio = [pages_of(p)[1][1] for p in (p0, p1, p2)]  # page 2: the table's root
    write("fuzz_btree", "merge-ps512-append-both", bytes([0, 0, 1]) + bytes(17) + b"".join(trio))
    # relocation: a transaction that grew the table by g pages from the snapshot
    snap, new = pages_of(p0)[1], pages_of(p1)[1]
    n0, g = len(snap), len(new) - len(snap)
    changed = [k + 1 for k in range(1, n0) if snap[k] != new[k]]
    if 0 < g <= 11 and n0 <= 41 and g + len(changed) <= 10:
        ws = [new[n0 + j] for j in range(g)] + [new[pg - 1] for pg in changed]
        ctl = bytearray(5 + 12)  # the bytes from data[3] up to the first page
        ctl[0], ctl[1], ctl[2], ctl[3] = 0, n0 - 2, 3, g
        for i, pg in enumerate(changed):
            ctl[4 + 1 + g + i] = pg - 1  # 1 + ctl % (n0 + g + 2) == pg
        write("fuzz_btree", "relocate-ps512-append", bytes([0, 0, 2]) + bytes(ctl)
              + snap[0] + new[0] + b"".join(ws))
    else:
        raise SystemExit(f"seeds.py: no relocation seed (n0 {n0}, g {g}, changed {len(changed)})")


def leaf_seeds(tmp):
    """Rebase's leaf merge (mode 3): one table leaf, each side changed other rows."""
    p0, p1, p2 = (os.path.join(tmp, f"l{k}.db") for k in range(3))
    make_db(p0, 512, "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);"
                     "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 12) "
                     "INSERT INTO t SELECT i, printf('%.20c', 'a') FROM n;")
    two_sides(p0, (p1, "UPDATE t SET v = 'ours' WHERE id = 3; DELETE FROM t WHERE id = 7;"),
              (p2, "UPDATE t SET v = 'theirs' WHERE id = 5; INSERT INTO t VALUES(13, 'new');"))
    trio = [pages_of(p)[1][1] for p in (p0, p1, p2)]  # page 2: the table's root, a leaf
    write("fuzz_btree", "leaf-ps512-other-rows", bytes([0, 0, 3]) + bytes(17) + b"".join(trio))
    # the same row on both sides (declared reads: byte 3 % 4 == 1, row 3 & 0xf == 3)
    write("fuzz_btree", "leaf-ps512-same-row", bytes([0, 0, 3, 3]) + bytes(16) + trio[0] + trio[1] + trio[1])


def opts_seeds():
    for k, q in enumerate([
        "mw=1", "mw=0", "mw_log_max_mb=64&mw_readcheck=0", "mw_profile=small&mw_fullfsync=on",
        "mw_mp=1", "mw_rebase=0&mw=no", "mw_bogus=1", "mw_log_max_mb=99999999999999999999",
        "cache=shared&mw=true&vfs=multiwriter", "mw_log_max_mb=%31%30", "mw_profile=default&MW=YES",
        "mw_log_max_mb=0", "mw_log_max_mb=1048576", "mw_readcheck", "mode=ro&immutable=1&mw_fullfsync=off",
    ]):
        write("fuzz_opts", f"q{k:02d}", q.encode())


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        log_seeds()
        btree_seeds(tmp)
        leaf_seeds(tmp)
        opts_seeds()
