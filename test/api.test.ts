// The API a bun:sqlite or @db/sqlite user reaches for: error codes by their extended
// name, run() of a SELECT, Database.open, constants, aggregate and window functions,
// function(name, options, fn), statement facts, as(Class), backup, interrupt and the
// progress callback, open flags, and the @db/sqlite names of the JSR entry.
import { Buffer } from "node:buffer";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { constants, Database, isComplete, SQLiteError, sqliteVersion, Statement } from "../lib/mod.ts";
import * as jsr from "../lib/jsr.ts";
import { tempDir } from "./helpers.ts";

const errorOf = (fn: () => unknown): SQLiteError => {
  try {
    fn();
  } catch (e) {
    return e as SQLiteError;
  }
  throw new Error("expected an error");
};

describe("bun:sqlite behaviour", () => {
  it("err.code is the extended name, as bun:sqlite gives it", () => {
    const db = new Database();
    db.exec("CREATE TABLE t(id INTEGER PRIMARY KEY, u TEXT UNIQUE, n NOT NULL)");
    db.run("INSERT INTO t VALUES (1, 'a', 1)");
    const unique = errorOf(() => db.run("INSERT INTO t VALUES (2, 'a', 1)"));
    expect(unique.code).toBe("SQLITE_CONSTRAINT_UNIQUE");
    expect(unique.primaryCode).toBe("SQLITE_CONSTRAINT");
    expect(unique.errno).toBe(2067);
    expect(errorOf(() => db.run("INSERT INTO t VALUES (3, 'b', NULL)")).code).toBe("SQLITE_CONSTRAINT_NOTNULL");
    expect(errorOf(() => db.run("SELECT * FROM nope")).code).toBe("SQLITE_ERROR");
    db.close();
  });

  it("run() of a statement that changes no row reports 0 changes", () => {
    const db = new Database();
    db.exec("CREATE TABLE t(x)");
    expect(db.run("INSERT INTO t VALUES (1), (2)").changes).toBe(2);
    expect(db.query("SELECT * FROM t").run().changes).toBe(0);
    expect(db.run("SELECT 1").changes).toBe(0);
    expect(db.run("CREATE TABLE u(y)").changes).toBe(0);
    expect(db.run("DELETE FROM t WHERE x = 99").changes).toBe(0);
    expect(db.run("UPDATE t SET x = x + 1").changes).toBe(2);
    db.close();
  });

  it("Database.open, open flags as numbers, readwrite", () => {
    const path = join(tempDir(), "o.db");
    const w = Database.open(path);
    expect(w).toBeInstanceOf(Database);
    w.exec("CREATE TABLE t(x)");
    w.close();
    const r = new Database(path, constants.SQLITE_OPEN_READONLY);
    expect(errorOf(() => r.run("INSERT INTO t VALUES (1)")).primaryCode).toBe("SQLITE_READONLY");
    r.close();
    const missing = join(tempDir(), "missing.db");
    expect(() => new Database(missing, constants.SQLITE_OPEN_READWRITE)).toThrow(SQLiteError);
    expect(existsSync(missing)).toBe(false);
    const rw = new Database(missing, constants.SQLITE_OPEN_READWRITE | constants.SQLITE_OPEN_CREATE);
    rw.close();
    expect(existsSync(missing)).toBe(true);
    const viaOption = new Database(path, { readwrite: true });
    viaOption.run("INSERT INTO t VALUES (1)");
    viaOption.close();
    const ro = new Database(path, { readwrite: false });
    expect(() => ro.run("INSERT INTO t VALUES (2)")).toThrow(/readonly/);
    ro.close();
    expect(() => new Database(path, { readonly: true, readwrite: true })).toThrow('A read-only database ("readonly: true" or "readwrite: false") cannot have "create: true" or "readwrite: true"');
    expect(constants.SQLITE_PREPARE_PERSISTENT).toBe(1);
    expect(constants.SQLITE_FCNTL_PERSIST_WAL).toBe(10);
  });

  it("function() takes its options before or after the function", () => {
    const db = new Database();
    db.function("twice", { deterministic: true }, (x) => Number(x) * 2);
    db.function("thrice", (x) => Number(x) * 3, { deterministic: true });
    db.function("count_args", { varargs: true }, (...a) => a.length);
    expect(db.query("SELECT twice(2) AS a, thrice(2) AS b, count_args(1, 2, 3) AS c").get())
      .toEqual({ a: 4, b: 6, c: 3 });
    db.exec("CREATE TABLE t(x); CREATE INDEX i ON t(twice(x))"); // deterministic reached SQLite
    expect(() => db.function("bad", { deterministic: true } as never)).toThrow(/takes a function/);
    db.close();
  });

  it("aggregate(): start, step, result; window functions with inverse", () => {
    const db = new Database();
    db.exec("CREATE TABLE t(g, v); INSERT INTO t VALUES ('a', 1), ('a', 2), ('b', 5), ('a', 3)");
    db.aggregate("product", { start: 1, step: (acc: number, v) => acc * Number(v) });
    expect(db.query("SELECT g, product(v) AS p FROM t GROUP BY g ORDER BY g").all())
      .toEqual([{ g: "a", p: 6 }, { g: "b", p: 5 }]);
    // No rows: the start value (a fresh one from a function).
    db.aggregate("collect", { start: () => [] as unknown[], step: (acc, v) => [...acc, v], result: (acc) => JSON.stringify(acc) });
    expect(db.query("SELECT collect(v) AS c FROM t WHERE 0").get()).toEqual({ c: "[]" });
    expect(db.query("SELECT collect(v) AS c FROM (SELECT v FROM t ORDER BY v)").get()).toEqual({ c: "[1,2,3,5]" });
    db.aggregate("wsum", {
      start: 0,
      step: (acc: number, v) => acc + Number(v),
      inverse: (acc: number, v) => acc - Number(v),
    });
    expect(
      db.query("SELECT v, wsum(v) OVER (ORDER BY v ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS s FROM t ORDER BY v").values(),
    ).toEqual([[1, 1], [2, 3], [3, 5], [5, 8]]);
    // An error in step is the query's error; the connection goes on.
    db.aggregate("boom", { step: (_acc, _v) => {
      throw new Error("step failed");
    } });
    expect(() => db.query("SELECT boom(v) FROM t").get()).toThrow("step failed");
    expect(() => db.aggregate("x", {} as never)).toThrow(/step function/);
    expect(db.query("SELECT product(v) AS p FROM t").get()).toEqual({ p: 30 });
    db.close();
  });

  it("statement facts: columnTypes, declaredTypes, reader, database, native; as(Class)", () => {
    const db = new Database();
    db.exec("CREATE TABLE t(id INTEGER, name TEXT, data BLOB, r REAL); INSERT INTO t VALUES (1, 'a', x'00', 1.5)");
    const q = db.query("SELECT id, name, data, r, NULL AS z FROM t");
    expect(q.columnTypes).toEqual(["INTEGER", "TEXT", "BLOB", "FLOAT", "NULL"]);
    expect(q.declaredTypes).toEqual(["INTEGER", "TEXT", "BLOB", "REAL", null]);
    expect(q.reader).toBe(true);
    expect(db.prepare("INSERT INTO t(id) VALUES (2)").reader).toBe(false);
    expect(q.database === db).toBe(true);
    // native: the statement's own handle, refused once finalized.
    const own = db.prepare("SELECT 1");
    expect(own.native).toBeTruthy();
    expect(own.native).not.toBe(q.native);
    own.finalize();
    expect(() => own.native).toThrow(/finalized/);
    class Row {
      id = 0;
      name = "";
      get shout(): string {
        return this.name.toUpperCase();
      }
    }
    const row = db.query("SELECT id, name FROM t").as(Row).get()!;
    expect(row).toBeInstanceOf(Row);
    expect(row.shout).toBe("A");
    expect(row.id).toBe(1);
    expect(() => q.as(5 as never)).toThrow(/Expected class to be a constructor or undefined/);
    db.close();
  });

  it("clearQueryCache() finalizes the cached statements only", () => {
    const db = new Database();
    const cached = db.query("SELECT 1");
    const prepared = db.prepare("SELECT 2");
    db.clearQueryCache();
    expect(cached.finalized).toBe(true);
    expect(prepared.finalized).toBe(false);
    expect(db.query("SELECT 1") === cached).toBe(false);
    db.close();
  });

  it("deserialize(bytes, { readonly }) and Database.deserialize honour readonly", () => {
    const src = new Database();
    src.exec("CREATE TABLE t(v); INSERT INTO t VALUES (1)");
    const image = src.serialize();
    const ro = Database.deserialize(image, { readonly: true });
    expect(ro.query("SELECT v FROM t").get()).toEqual({ v: 1 });
    expect(errorOf(() => ro.run("INSERT INTO t VALUES (2)")).primaryCode).toBe("SQLITE_READONLY");
    const ro2 = Database.deserialize(image, true); // bun:sqlite's boolean form
    expect(errorOf(() => ro2.run("INSERT INTO t VALUES (2)")).primaryCode).toBe("SQLITE_READONLY");
    ro2.close();
    const rw = Database.deserialize(image);
    rw.run("INSERT INTO t VALUES (2)");
    expect(rw.query("SELECT count(*) AS n FROM t").get()).toEqual({ n: 2 });
    for (const d of [src, ro, rw]) d.close();
  });
});

describe("error messages", () => {
  it("an engine option the engine refuses leads with the cause", () => {
    const path = join(tempDir(), "p.db");
    const first = new Database(path);
    try {
      const e = errorOf(() => new Database(path, { processes: true }));
      expect(e.message).toMatch(/^multiwriter: .* is open in this process without mw_mp=1/);
      expect(e.message).not.toMatch(/automatic extension loading failed/);
    } finally {
      first.close();
    }
  });
});

describe("backup, interrupt, progress", () => {
  it("backup() copies an engine database in use into a plain file, or into an open Database", () => {
    const dir = tempDir();
    const db = new Database(join(dir, "live.db"));
    db.exec("CREATE TABLE t(x); WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 1000) INSERT INTO t SELECT i FROM c");
    const other = new Database(join(dir, "live.db"));
    other.run("INSERT INTO t VALUES (1001)"); // another connection's commit is included
    const pages = db.backup(join(dir, "copy.db"));
    expect(pages).toBeGreaterThan(1);
    const copy = new Database(join(dir, "copy.db"), { multiwriter: false, readonly: true });
    expect(copy.query("SELECT count(*) AS n, max(x) AS m FROM t").get()).toEqual({ n: 1001, m: 1001 });
    expect(copy.query("PRAGMA integrity_check").get()).toEqual({ integrity_check: "ok" });
    copy.close();
    const mem = new Database();
    db.backup(mem);
    expect(mem.query("SELECT count(*) AS n FROM t").get()).toEqual({ n: 1001 });
    expect(() => db.backup(db)).toThrow(/source and destination must be distinct/);
    for (const d of [mem, other, db]) d.close();
  });

  it("interrupt() from a custom function and onProgress() stop a runaway query", () => {
    const db = new Database();
    let calls = 0;
    db.function("tick", () => {
      if (++calls === 100) db.interrupt();
      return 1;
    });
    const runaway = "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c) SELECT tick() FROM c";
    expect(errorOf(() => db.query(runaway).all()).primaryCode).toBe("SQLITE_INTERRUPT");
    const deadline = Date.now() + 200;
    db.onProgress(() => Date.now() > deadline, 1000);
    const started = Date.now();
    expect(errorOf(() => db.query("WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c) SELECT count(*) FROM c").get()).primaryCode)
      .toBe("SQLITE_INTERRUPT");
    expect(Date.now() - started).toBeLessThan(30_000);
    db.onProgress(null);
    expect(db.query("SELECT 1 AS one").get()).toEqual({ one: 1 }); // the connection goes on
    db.interrupt(); // nothing running: no effect on the next statement
    expect(db.query("SELECT 2 AS two").get()).toEqual({ two: 2 });
    db.close();
  });
});

describe("@db/sqlite names", () => {
  it("the JSR entry exports SqliteError, SQLITE_VERSION, SQLITE_SOURCEID, isComplete", () => {
    expect(jsr.SqliteError).toBe(SQLiteError);
    expect(jsr.SQLITE_VERSION).toBe(sqliteVersion());
    expect(jsr.SQLITE_SOURCEID).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [0-9a-f]+/);
    expect(jsr.CoreDatabase).toBe(Database); // the @db/sqlite face wraps the same core
    expect(jsr.CoreStatement).toBe(Statement);
    expect(isComplete("SELECT 1;")).toBe(true);
    expect(jsr.isComplete("SELECT 'a")).toBe(false);
  });

  it("transaction().default, db.sql, bare named parameters, int64, path", () => {
    const db = new Database(":memory:", { int64: true });
    db.exec("CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT)");
    const add = db.transaction((name: string) => db.run("INSERT INTO t(name) VALUES (?)", name));
    expect(add.default === add).toBe(true);
    add.default("a");
    add("b");
    const id = 2;
    const evil = "x' OR 1=1 --";
    expect(db.sql<{ name: string }>`SELECT name FROM t WHERE id = ${id}`).toEqual([{ name: "b" }]);
    expect(db.sql`SELECT name FROM t WHERE name = ${evil}`).toEqual([]);
    expect(db.query("SELECT name FROM t WHERE id = :id").get({ id: 1 })).toEqual({ name: "a" });
    expect(db.query("SELECT 9007199254740993 AS big, 3 AS small").get()).toEqual({ big: 9007199254740993n, small: 3 });
    expect(db.path).toBe(":memory:");
    // Generic typings compile: .get<T>() through query<T>().
    const typed: { name: string } | null = db.query<{ name: string }>("SELECT name FROM t").get();
    expect(typed?.name).toBe("a");
    db.close();
  });
});

describe("openBlob", () => {
  it("reads and writes in place, streams, checks every range, closes with the database", async () => {
    const db = new Database(join(tempDir(), "blob.db"));
    db.exec("CREATE TABLE f(id INTEGER PRIMARY KEY, data BLOB)");
    db.run("INSERT INTO f VALUES (1, zeroblob(200000))");
    const blob = db.openBlob({ table: "f", column: "data", row: 1 });
    expect(blob.byteLength).toBe(200000);
    expect(blob.writeSync(5, new Uint8Array([1, 2, 3]))).toBe(3);
    const back = new Uint8Array(4);
    blob.readSync(4, back);
    expect([...back]).toEqual([0, 1, 2, 3]);
    // Past the end, negative or fractional offsets, a lying length: refused before C.
    expect(() => blob.readSync(199999, new Uint8Array(2))).toThrow(/outside the blob/);
    expect(() => blob.writeSync(-1, new Uint8Array(1))).toThrow(/outside the blob/);
    expect(() => blob.readSync(0.5, new Uint8Array(1))).toThrow(/outside the blob/);
    const liar = new Uint8Array(2);
    Object.defineProperty(liar, "length", { value: 1 << 30 });
    expect(blob.readSync(0, liar)).toBe(2);
    // Web streams: write everything, read it back in chunks.
    const data = new Uint8Array(200000).map((_, i) => i % 251);
    const writer = blob.writable.getWriter();
    await writer.write(data.subarray(0, 100000));
    await writer.write(data.subarray(100000));
    await writer.close();
    const chunks: Uint8Array[] = [];
    for await (const c of blob.readable as unknown as AsyncIterable<Uint8Array>) chunks.push(c);
    expect(chunks.length).toBeGreaterThan(1);
    expect(Buffer.concat(chunks).equals(Buffer.from(data))).toBe(true);
    expect([...blob].reduce((n, c) => n + c.length, 0)).toBe(200000);
    blob.close();
    expect(() => blob.byteLength).toThrow(/blob is closed/);
    const ro = db.openBlob({ table: "f", column: "data", row: 1, readonly: true });
    expect(() => ro.writeSync(0, new Uint8Array(1))).toThrow(SQLiteError);
    expect(() => db.openBlob({ table: "f", column: "data", row: 99 })).toThrow(SQLiteError);
    expect(() => db.openBlob({ table: "nope", column: "data", row: 1 })).toThrow(/no such table/);
    db.close(); // closes ro
    expect(() => ro.byteLength).toThrow(/blob is closed/);
  });

  it("a writable blob outside BEGIN commits at close: a lost commit runs again, or says what it rolled back", () => {
    const path = join(tempDir(), "blob-lost.db");
    const a = new Database(path);
    const b = new Database(path);
    a.exec("CREATE TABLE f(id INTEGER PRIMARY KEY, data BLOB, n INTEGER)");
    a.run("INSERT INTO f VALUES (1, zeroblob(64), 0), (2, zeroblob(64), 0)");
    const head = (n: number) => [...(b.query("SELECT data FROM f WHERE id = 1").values()[0][0] as Uint8Array).subarray(0, n)];
    const counts = () => b.query("SELECT n FROM f ORDER BY id").values().map((r) => r[0]);
    // Blind writes: b commits to the same page first; the close runs the writes again.
    let blob = a.openBlob({ table: "f", column: "data", row: 1 });
    blob.writeSync(0, new Uint8Array([7, 7, 7]));
    b.run("UPDATE f SET n = n + 1 WHERE id = 2");
    blob.close();
    expect(head(3)).toEqual([7, 7, 7]);
    expect(counts()).toEqual([0, 1]);
    // A write computed from a read of the blob is not run again blindly.
    blob = a.openBlob({ table: "f", column: "data", row: 1 });
    const got = new Uint8Array(1);
    blob.readSync(0, got);
    blob.writeSync(1, new Uint8Array([got[0] + 1]));
    b.run("UPDATE f SET n = n + 1 WHERE id = 2");
    expect(() => blob.close()).toThrow(/another writer committed first.*not run again: they followed a read/);
    expect(head(3)).toEqual([7, 7, 7]);
    // A statement run while the blob is open commits with it: both rolled back, and said so.
    blob = a.openBlob({ table: "f", column: "data", row: 1 });
    blob.writeSync(0, new Uint8Array([9]));
    expect(a.run("UPDATE f SET n = 100 WHERE id = 1").changes).toBe(1);
    b.run("UPDATE f SET n = n + 1 WHERE id = 2");
    expect(() => blob.close()).toThrow(/the blob's writes and the 1 row change\(s\) made on this connection while it was open were rolled back/);
    expect(head(1)).toEqual([7]);
    expect(counts()).toEqual([0, 3]);
    // The database's close closes the blob: the same error reaches its caller (it used to be
    // swallowed), and the connection is closed all the same.
    blob = a.openBlob({ table: "f", column: "data", row: 1 });
    blob.writeSync(0, new Uint8Array([5]));
    a.run("UPDATE f SET n = 200 WHERE id = 1");
    b.run("UPDATE f SET n = n + 1 WHERE id = 2");
    expect(() => a.close()).toThrow(/rolled back/);
    expect(() => a.query("SELECT 1")).toThrow(/closed/);
    expect(head(1)).toEqual([7]);
    // Blind writes left open at the database's close are run again there.
    const c = new Database(path);
    blob = c.openBlob({ table: "f", column: "data", row: 1 });
    blob.writeSync(0, new Uint8Array([6]));
    b.run("UPDATE f SET n = n + 1 WHERE id = 2");
    c.close();
    expect(head(1)).toEqual([6]);
    expect(counts()).toEqual([0, 5]);
    // The winner resized the value, or deleted the row: nothing to run again, and said so.
    const d = new Database(path);
    blob = d.openBlob({ table: "f", column: "data", row: 1 });
    blob.writeSync(0, new Uint8Array([4]));
    b.run("UPDATE f SET data = zeroblob(10) WHERE id = 1");
    expect(() => blob.close()).toThrow(/another writer committed first.*another writer changed the value's size/);
    blob = d.openBlob({ table: "f", column: "data", row: 1 });
    blob.writeSync(0, new Uint8Array([4]));
    b.run("DELETE FROM f WHERE id = 1");
    expect(() => blob.close()).toThrow(/another writer committed first.*the row changed: no such rowid: 1/);
    expect(counts()).toEqual([5]);
    d.close();
    b.close();
  });

  it("the JSR face opens blobs too", () => {
    const db = new jsr.Database(":memory:");
    db.exec("CREATE TABLE f(data BLOB); INSERT INTO f VALUES (x'0102')");
    const blob = db.openBlob({ table: "f", column: "data", row: 1 });
    const out = new Uint8Array(2);
    blob.readSync(0, out);
    expect([...out]).toEqual([1, 2]);
    blob.close();
    db.close();
  });
});
