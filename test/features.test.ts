// Custom scalar functions, serialize/deserialize, fileControl, the engine's counters and
// the library facts (versions, source id).
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { Database, mwVersion, SQLiteError, sourceId, sqliteVersion } from "../lib/mod.ts";
import { tempDir } from "./helpers.ts";

describe("custom scalar functions", () => {
  it("receive every type and return every type", () => {
    const db = new Database();
    db.function("kind", (v) => (v instanceof Uint8Array ? `blob:${v.length}` : `${typeof v}:${String(v)}`));
    const q = db.query("SELECT kind(?) AS k");
    expect(q.get(1)).toEqual({ k: "number:1" });
    expect(q.get(1.5)).toEqual({ k: "number:1.5" });
    expect(q.get("x")).toEqual({ k: "string:x" });
    expect(q.get("")).toEqual({ k: "string:" });
    expect(q.get(null)).toEqual({ k: "object:null" });
    expect(q.get(new Uint8Array([1, 2]))).toEqual({ k: "blob:2" });
    // Beyond 2^53 an argument is a rounded number, as bun:sqlite gives it; exact with int64.
    expect(q.get(2n ** 60n)).toEqual({ k: `number:${2 ** 60}` });
    const exact = new Database(":memory:", { int64: true });
    exact.function("kind", (v) => `${typeof v}:${String(v)}`);
    expect(exact.query("SELECT kind(?) AS k").get(2n ** 60n)).toEqual({ k: `bigint:${2n ** 60n}` });
    exact.close();
    db.function("give", (what) => {
      switch (what) {
        case "int": return 7;
        case "negzero": return -0;
        case "real": return 0.5;
        case "big": return 2n ** 62n;
        case "text": return "héllo";
        case "empty": return "";
        case "blob": return new Uint8Array([3, 4]);
        case "emptyblob": return new Uint8Array(0);
        case "bool": return true;
        case "undef": return undefined;
        default: return null;
      }
    });
    const g = db.query("SELECT give(?) AS v, typeof(give(?1)) AS t");
    expect(g.get("int")).toEqual({ v: 7, t: "integer" });
    expect(g.get("real")).toEqual({ v: 0.5, t: "real" });
    expect(g.get("negzero")).toEqual({ v: 0, t: "integer" });
    expect(g.get("big")).toEqual({ v: 2 ** 62, t: "integer" }); // read back rounded, as bun:sqlite
    expect(g.safeIntegers(true).get("big")).toEqual({ v: 2n ** 62n, t: "integer" });
    g.safeIntegers(false);
    expect(g.get("text")).toEqual({ v: "héllo", t: "text" });
    expect(g.get("empty")).toEqual({ v: "", t: "text" });
    expect(g.get("blob")).toEqual({ v: new Uint8Array([3, 4]), t: "blob" });
    expect(g.get("emptyblob")).toEqual({ v: new Uint8Array(0), t: "blob" });
    expect(g.get("bool")).toEqual({ v: 1, t: "integer" });
    expect(g.get("undef")).toEqual({ v: null, t: "null" });
    expect(g.get("null")).toEqual({ v: null, t: "null" });
    db.close();
  });

  it("arity comes from fn.length unless varargs; a function can be replaced", () => {
    const db = new Database();
    db.function("add2", (a, b) => (a as number) + (b as number));
    expect(db.query("SELECT add2(1, 2) AS v").get()).toEqual({ v: 3 });
    expect(() => db.query("SELECT add2(1)")).toThrow(/wrong number of arguments/);
    db.function("sum", (...xs) => xs.reduce((s: number, x) => s + (x as number), 0), { varargs: true });
    expect(db.query("SELECT sum() AS a, sum(1, 2, 3, 4) AS b").get()).toEqual({ a: 0, b: 10 });
    db.function("add2", (a, b) => (a as number) * (b as number));
    expect(db.query("SELECT add2(3, 4) AS v").get()).toEqual({ v: 12 });
    db.close();
  });

  it("deterministic and directOnly reach SQLite", () => {
    const db = new Database();
    db.exec("CREATE TABLE t(x)");
    db.function("det", (x) => x, { deterministic: true });
    db.function("nondet", (x) => x);
    db.exec("CREATE INDEX i1 ON t(det(x))");
    expect(() => db.exec("CREATE INDEX i2 ON t(nondet(x))")).toThrow(/non-deterministic/);
    db.function("direct", () => 1, { directOnly: true, innocuous: false });
    db.exec("CREATE VIEW v AS SELECT direct() AS d");
    expect(() => db.query("SELECT * FROM v").all()).toThrow(/unsafe use of direct\(\)/);
    expect(db.query("SELECT direct() AS d").get()).toEqual({ d: 1 });
    db.close();
  });

  it("an error thrown by the function is what the query throws; the connection stays usable", () => {
    const db = new Database();
    const boom = new RangeError("no such thing");
    db.function("boom", () => {
      throw boom;
    });
    expect(() => db.query("SELECT boom()").get()).toThrow(boom);
    db.function("bad", () => ({}));
    expect(() => db.query("SELECT bad()").get()).toThrow(/cannot return a value of type Object/);
    expect(db.query("SELECT 1 AS v").get()).toEqual({ v: 1 });
    db.close();
  });

  it("arguments follow safeIntegers", () => {
    const db = new Database(":memory:", { safeIntegers: true });
    db.function("t", (x) => typeof x);
    expect(db.query("SELECT t(1) AS v").get()).toEqual({ v: "bigint" });
    db.close();
  });
});

describe("serialize / deserialize", () => {
  it("a file database round-trips through bytes", () => {
    const db = new Database(join(tempDir(), "s.db"));
    db.exec("CREATE TABLE t(v); INSERT INTO t VALUES ('a'), ('b')");
    const bytes = db.serialize();
    expect(bytes).toBeInstanceOf(Uint8Array);
    expect(new TextDecoder().decode(bytes.subarray(0, 15))).toBe("SQLite format 3");
    db.close();
    const copy = Database.deserialize(bytes);
    expect(copy.query("SELECT v FROM t ORDER BY v").values()).toEqual([["a"], ["b"]]);
    copy.run("INSERT INTO t VALUES ('c')"); // resizeable, writable
    expect(copy.query("SELECT count(*) AS n FROM t").get()).toEqual({ n: 3 });
    copy.close();
  });

  it("deserialize into an open connection, readonly when asked", () => {
    const src = new Database();
    src.exec("CREATE TABLE t(v); INSERT INTO t VALUES (1)");
    const db = new Database();
    db.deserialize(src.serialize(), { readonly: true });
    expect(db.query("SELECT v FROM t").get()).toEqual({ v: 1 });
    try {
      db.run("INSERT INTO t VALUES (2)");
      expect.unreachable();
    } catch (e) {
      expect((e as SQLiteError).code).toBe("SQLITE_READONLY");
    }
    src.close();
    db.close();
  });

  it("bytes that are not a database fail on use with SQLITE_NOTADB", () => {
    const db = Database.deserialize(new Uint8Array(4096).fill(7));
    expect(() => db.query("SELECT * FROM sqlite_schema").all()).toThrow(SQLiteError);
    try {
      db.query("SELECT * FROM sqlite_schema").all();
    } catch (e) {
      expect((e as SQLiteError).code).toBe("SQLITE_NOTADB");
    }
    db.close();
    expect(() => new Database().deserialize("x" as never)).toThrow(/takes a Uint8Array/);
  });
});

describe("fileControl, stats, library facts", () => {
  it("fileControl passes an int in and out, and returns SQLite's code", () => {
    const db = new Database(join(tempDir(), "f.db"));
    const SQLITE_FCNTL_PERSIST_WAL = 10;
    expect(db.fileControl(SQLITE_FCNTL_PERSIST_WAL, 1)).toBe(0);
    const cell = new Int32Array([-1, 0]); // -1: query (8 bytes: bun:sqlite's least buffer)
    expect(db.fileControl(SQLITE_FCNTL_PERSIST_WAL, cell)).toBe(0);
    expect(cell[0]).toBe(1);
    expect(() => db.fileControl(0x7fff_0000, null)).toThrow(/not supported/); // size unknown
    db.close();
  });

  it("stats(): named counters, the raw slots, the engine flag", () => {
    const db = new Database(join(tempDir(), "st.db"));
    db.exec("CREATE TABLE t(v)");
    const before = db.stats();
    db.run("INSERT INTO t VALUES (1)");
    const after = db.stats();
    expect(after.raw.length).toBe(32);
    expect(after.engine).toBe(true);
    for (const k of ["commits", "conflicts", "logBytes", "compactions", "snapshotEpoch", "commitEpoch", "relocations", "retries"] as const) {
      expect(typeof after[k]).toBe("number");
    }
    expect(after.commits).toBe(before.commits + 1);
    expect(after.commitEpoch).toBe(after.visibleEpoch);
    expect(after.snapshotEpoch).toBe(after.commitEpoch - 1);
    expect(after.logBytes).toBeGreaterThan(0);
    // The background workers are shared by every open database of the process (at most 4).
    expect(after.backgroundThreads).toBeGreaterThanOrEqual(1);
    expect(after.backgroundThreads).toBeLessThanOrEqual(4);
    expect(typeof after.compactorRuns).toBe("number");
    // A synchronous=FULL commit was synced: by this process, the only one.
    expect(after.logSyncs).toBeGreaterThan(before.logSyncs);
    expect(after.logRoomInline).toBeGreaterThanOrEqual(0);
    const memory = new Database(":memory:");
    expect(memory.stats().engine).toBe(false);
    memory.close();
    const stock = new Database(join(tempDir(), "stock.db"), { multiwriter: false });
    expect(stock.stats().engine).toBe(false);
    stock.close();
    db.close();
  });

  it("versions and the source id", () => {
    expect(mwVersion()).toMatch(/^\d+\.\d+\.\d+/);
    expect(Database.engineVersion).toBe(mwVersion());
    expect(sqliteVersion()).toBe("3.54.1");
    expect(Database.sqliteVersion).toBe("3.54.1");
    expect(sourceId()).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [0-9a-f]{64}$/);
    expect(Database.sourceId).toBe(sourceId());
    const db = new Database();
    expect(db.query("SELECT mw_version() AS v").get()).toEqual({ v: mwVersion() });
    db.close();
  });
});

describe("VACUUM INTO", () => {
  // Stock sqlite3's view of a copy: opened without the engine, read-only.
  function readCopy(path: string): { check: unknown; n: unknown; s: unknown; mode: unknown } {
    const copy = new Database(path, { multiwriter: false, readonly: true });
    try {
      const { n, s } = copy.query("SELECT count(*) AS n, sum(x) AS s FROM t").get() as { n: number; s: number };
      const check = (copy.query("PRAGMA integrity_check").get() as { integrity_check: string }).integrity_check;
      const mode = (copy.query("PRAGMA journal_mode").get() as { journal_mode: string }).journal_mode;
      return { check, n, s, mode };
    } finally {
      copy.close();
    }
  }

  it("through the engine writes a plain copy that holds every commit made before it, and none still open", () => {
    const dir = tempDir();
    const path = join(dir, "src.db");
    const db = new Database(path);
    const other = new Database(path);
    db.run("CREATE TABLE t(x)");
    db.transaction(() => {
      for (let i = 0; i < 50; i++) db.run("INSERT INTO t VALUES (?)", [i]);
    })();
    other.run("INSERT INTO t VALUES (1000)"); // acknowledged before the copy
    other.run("BEGIN");
    other.run("INSERT INTO t VALUES (5000)"); // open while the copy is taken
    const out = join(dir, "copy.db");
    db.run(`VACUUM INTO '${out}'`);
    other.run("COMMIT");
    expect(readCopy(out)).toEqual({ check: "ok", n: 51, s: 1225 + 1000, mode: "delete" });
    // Only the copy: the engine made no log or lock file of it.
    expect(readdirSync(dir).filter((n) => n.startsWith("copy.db"))).toEqual(["copy.db"]);
    // The way it is spelled does not matter: exec with a comment first, a bound name.
    db.exec(`INSERT INTO t VALUES (1); /* backup */ VACUUM INTO '${join(dir, "copy2.db")}'`);
    expect(readCopy(join(dir, "copy2.db"))).toMatchObject({ check: "ok", n: 53 });
    db.prepare("vacuum into ?").run(join(dir, "copy3.db"));
    expect(readCopy(join(dir, "copy3.db"))).toMatchObject({ check: "ok", n: 53 });
    // An empty file is an empty output, as for stock SQLite.
    writeFileSync(join(dir, "empty.db"), "");
    db.run(`VACUUM INTO '${join(dir, "empty.db")}'`);
    expect(readCopy(join(dir, "empty.db"))).toMatchObject({ check: "ok", n: 53 });
    other.close();
    db.close();
  });

  it("refuses an output with content in stock SQLite's words and leaves it as it was", () => {
    const dir = tempDir();
    const db = new Database(join(dir, "src.db"));
    db.run("CREATE TABLE t(x)");
    db.run("INSERT INTO t VALUES (7)");
    const out = join(dir, "copy.db");
    db.run(`VACUUM INTO '${out}'`);
    const before = readFileSync(out);
    db.run("INSERT INTO t VALUES (8)");
    let err: unknown;
    try {
      db.run(`VACUUM INTO '${out}'`);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(SQLiteError);
    expect((err as SQLiteError).message).toBe("output file already exists");
    expect(readFileSync(out).equals(before)).toBe(true);
    // What the VACUUM asked for does not outlive it: a new file ATTACHed next is an engine
    // database (WAL mode, its page 1 written at once), not a plain one.
    db.run(`ATTACH '${join(dir, "next.db")}' AS n`);
    expect(db.query("PRAGMA n.journal_mode").get()).toEqual({ journal_mode: "wal" });
    expect(statSync(join(dir, "next.db")).size).toBeGreaterThan(0);
    db.close();
  });

  it("without the engine the message is SQLite's own", () => {
    const dir = tempDir();
    const db = new Database(join(dir, "src.db"), { multiwriter: false });
    db.run("CREATE TABLE t(x)");
    const out = join(dir, "copy.db");
    db.run(`VACUUM INTO '${out}'`);
    expect(() => db.run(`VACUUM INTO '${out}'`)).toThrow(/^output file already exists$/);
    db.close();
  });
});
