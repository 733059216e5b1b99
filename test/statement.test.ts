// Statements: run/all/get/values/value/iterate, parameters (positional, named, strict),
// the value types both ways, the query cache, and the bad inputs around them.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Database, SQLiteError, Statement } from "../lib/mod.ts";

let db: Database;
beforeEach(() => {
  db = new Database(":memory:");
  db.exec("CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, data BLOB, n REAL)");
});
afterEach(() => db.close());

describe("running statements", () => {
  it("run() returns changes and lastInsertRowid", () => {
    const r = db.query("INSERT INTO t(name) VALUES (?)").run("a");
    expect(r).toEqual({ changes: 1, lastInsertRowid: 1 });
    db.run("INSERT INTO t(name) VALUES (?), (?)", "b", "c");
    expect(db.changes).toBe(2);
    expect(db.lastInsertRowid).toBe(3);
    expect(db.lastInsertRowId).toBe(3);
    expect(db.run("UPDATE t SET name = 'x'")).toEqual({ changes: 3, lastInsertRowid: 3 });
    expect(db.totalChanges).toBe(6);
  });

  it("all(), get(), values(), value(), iterate(), iter() and for..of", () => {
    db.run("INSERT INTO t(name, n) VALUES ('a', 1.5), ('b', 2.5)");
    const q = db.query("SELECT name, n FROM t ORDER BY id");
    expect(q.all()).toEqual([{ name: "a", n: 1.5 }, { name: "b", n: 2.5 }]);
    expect(q.get()).toEqual({ name: "a", n: 1.5 });
    expect(db.query("SELECT * FROM t WHERE id = 99").get()).toBeNull();
    expect(q.values()).toEqual([["a", 1.5], ["b", 2.5]]);
    expect(q.value()).toEqual(["a", 1.5]);
    expect(db.query("SELECT 1 WHERE 0").value()).toBeUndefined();
    expect([...q.iterate()]).toEqual(q.all());
    expect([...q.iter()].length).toBe(2);
    const names: unknown[] = [];
    for (const row of q) names.push(row.name);
    expect(names).toEqual(["a", "b"]);
  });

  it("an iterator closed early releases its statement (no open transaction)", () => {
    db.run("INSERT INTO t(name) VALUES ('a'), ('b'), ('c')");
    const q = db.query("SELECT name FROM t");
    for (const row of q.iterate()) {
      expect(row.name).toBe("a");
      break;
    }
    expect(q.all().length).toBe(3);
    expect(db.inTransaction).toBe(false);
  });

  it("running a statement again while iterating it ends that iterator with an error", () => {
    db.run("INSERT INTO t(name) VALUES ('a'), ('b')");
    const q = db.query("SELECT name FROM t");
    const it1 = q.iterate();
    expect(it1.next().value).toEqual({ name: "a" });
    expect(q.all().length).toBe(2);
    expect(() => it1.next()).toThrow(/run again while this iterator was open/);
  });

  it("query() caches by SQL, prepare() does not", () => {
    // Compared with === : vitest would iterate a Statement (it is iterable) to print it.
    expect(db.query("SELECT 1") === db.query("SELECT 1")).toBe(true);
    expect(db.prepare("SELECT 1") === db.prepare("SELECT 1")).toBe(false);
    const q = db.query("SELECT 2");
    q.finalize();
    const again = db.query("SELECT 2");
    expect(again === q).toBe(false);
    expect(again.values()).toEqual([[2]]);
  });

  it("the query cache is bounded; an evicted statement stays usable until close()", () => {
    const first = db.query("SELECT 0 AS v");
    for (let i = 1; i <= 300; i++) db.query(`SELECT ${i} AS v`);
    expect(db.query("SELECT 0 AS v") === first).toBe(false); // evicted, prepared again
    expect(first.get()).toEqual({ v: 0 });
    expect(db.query("SELECT 300 AS v").get()).toEqual({ v: 300 });
  });

  it("statement properties: columnNames, declaredTypes, paramsCount, readonly, source, expandedSql", () => {
    const q = db.prepare("SELECT id, name, 1 + 1 AS two FROM t WHERE id = ?");
    expect(q.columnNames).toEqual(["id", "name", "two"]);
    expect(q.declaredTypes).toEqual(["INTEGER", "TEXT", null]);
    expect(q.paramsCount).toBe(1);
    expect(q.readonly).toBe(true);
    expect(db.prepare("DELETE FROM t").readonly).toBe(false);
    expect(q.source).toBe("SELECT id, name, 1 + 1 AS two FROM t WHERE id = ?");
    q.get(7);
    expect(q.expandedSql).toBe("SELECT id, name, 1 + 1 AS two FROM t WHERE id = 7");
    expect(String(q)).toBe(q.expandedSql);
    expect(q instanceof Statement).toBe(true);
  });

  it("a column named __proto__ is a plain property", () => {
    const row = db.query("SELECT x'01' AS __proto__, 2 AS b").get()!;
    expect(Object.getPrototypeOf(row)).toBe(Object.prototype);
    expect(Object.keys(row)).toEqual(["__proto__", "b"]);
    expect(Object.getOwnPropertyDescriptor(row, "__proto__")?.value).toEqual(new Uint8Array([1]));
  });

  it("SELECT * sees columns added after it was prepared", () => {
    const q = db.query("SELECT * FROM t");
    expect(q.columnNames).toEqual(["id", "name", "data", "n"]);
    db.exec("ALTER TABLE t ADD COLUMN extra");
    db.run("INSERT INTO t(name, extra) VALUES ('a', 5)");
    expect(q.get()).toEqual({ id: 1, name: "a", data: null, n: null, extra: 5 });
  });
});

describe("parameters", () => {
  it("positional: as arguments or as one array; ?NNN too", () => {
    const q = db.query("SELECT ? AS a, ? AS b");
    expect(q.get(1, "x")).toEqual({ a: 1, b: "x" });
    expect(q.get([2, "y"])).toEqual({ a: 2, b: "y" });
    expect(db.query("SELECT ?2 AS a, ?1 AS b").get(1, 2)).toEqual({ a: 2, b: 1 });
  });

  it("named: $x, :x, @x with their prefix", () => {
    const q = db.query("SELECT $a AS a, :b AS b, @c AS c");
    expect(q.get({ $a: 1, ":b": 2, "@c": 3 })).toEqual({ a: 1, b: 2, c: 3 });
    // Not strict: a name left out binds NULL (previous values are cleared).
    expect(q.get({ $a: 9 })).toEqual({ a: 9, b: null, c: null });
  });

  it("strict mode: bare names, and every parameter must be given", () => {
    const s = new Database(":memory:", { strict: true });
    const q = s.query("SELECT $a AS a, :b AS b, @c AS c");
    expect(q.get({ a: 1, b: 2, c: 3 })).toEqual({ a: 1, b: 2, c: 3 });
    expect(q.get({ $a: 1, b: 2, "@c": 3 })).toEqual({ a: 1, b: 2, c: 3 });
    // bun:sqlite's words: the name as strict mode lets it be given, without its prefix.
    expect(() => q.get({ a: 1, b: 2 })).toThrow('Missing parameter "c"');
    s.close();
  });

  it("a wrong number of parameters is an error (bun:sqlite's words); none at all runs with the last bound", () => {
    const q = db.query("SELECT ? AS a, ? AS b");
    expect(() => q.get(1)).toThrow("SQLite query expected 2 values, received 1");
    expect(() => q.get(1, 2, 3)).toThrow("SQLite query expected 2 values, received 3");
    expect(() => db.query("SELECT 1").get(1)).toThrow("SQLite query expected 0 values, received 1");
    try {
      q.get(1);
    } catch (e) {
      expect(e).toBeInstanceOf(SQLiteError);
      expect((e as SQLiteError).code).toBe("SQLITE_RANGE");
    }
  });

  it("a key that names no parameter is ignored, as bun:sqlite ignores it", () => {
    const q = db.query("SELECT $a AS a");
    expect(q.get({ $b: 1 })).toEqual({ a: null });
    expect(q.get({ a: 1 })).toEqual({ a: 1 }); // a bare name finds $a (as @db/sqlite allows)
    expect(q.get({ a: 2, b: 1 })).toEqual({ a: 2 });
    expect(db.query("SELECT ? AS x").get({ x: 1 })).toEqual({ x: null });
    const s = new Database(":memory:", { strict: true });
    expect(s.query("SELECT $a AS a").get({ a: 1, z: 2 })).toEqual({ a: 1 });
    s.close();
  });

  it("a value of an unsupported type is an error", () => {
    const q = db.query("SELECT ? AS v");
    expect(() => q.get(Symbol("s") as never)).toThrow(/cannot bind a value of type symbol/);
    expect(() => q.get((() => 1) as never)).toThrow(/type function/);
    expect(() => q.get(new Date() as never)).toThrow(/type Date/);
    expect(() => q.get([{ a: 1 }] as never)).toThrow(/type Object/);
    // As bun:sqlite: out of range is a RangeError with safeIntegers (or int64)...
    expect(() => q.safeIntegers(true).get(2n ** 64n)).toThrow(new RangeError("BigInt value '18446744073709551616' is out of range"));
    expect(() => new Database(":memory:", { int64: true }).query("SELECT ? AS v").get(-(2n ** 63n) - 1n)).toThrow(RangeError);
    // ...and without, it wraps to 64 bits.
    expect(q.safeIntegers(false).get(2n ** 64n + 5n)).toEqual({ v: 5 });
    expect(q.get(2n ** 63n)).toEqual({ v: -(2 ** 63) });
  });
});

describe("values", () => {
  it("round-trips every type; booleans are 0/1; undefined is NULL", () => {
    const q = db.query("SELECT ? AS v, typeof(?1) AS t");
    expect(q.get(42)).toEqual({ v: 42, t: "integer" });
    expect(q.get(-3_000_000_000)).toEqual({ v: -3_000_000_000, t: "integer" });
    expect(q.get(1.25)).toEqual({ v: 1.25, t: "real" });
    expect(q.get(-0)).toEqual({ v: -0, t: "real" }); // bun:sqlite binds -0 as a real
    expect(q.get("héllo ✓")).toEqual({ v: "héllo ✓", t: "text" });
    expect(q.get(true)).toEqual({ v: 1, t: "integer" });
    expect(q.get(false)).toEqual({ v: 0, t: "integer" });
    expect(q.get(null)).toEqual({ v: null, t: "null" });
    expect(q.get(undefined)).toEqual({ v: null, t: "null" });
    expect(q.get(123n)).toEqual({ v: 123, t: "integer" });
    expect(q.get(new Uint8Array([0, 1, 255]))).toEqual({ v: new Uint8Array([0, 1, 255]), t: "blob" });
    expect(q.get(new Uint16Array([1]).buffer)).toEqual({ v: new Uint8Array([1, 0]), t: "blob" });
    expect(q.get(new Uint8Array([9, 8, 7]).subarray(1))).toEqual({ v: new Uint8Array([8, 7]), t: "blob" });
  });

  it("an empty string and an empty blob are not NULL", () => {
    db.query("INSERT INTO t(name, data) VALUES (?, ?)").run("", new Uint8Array(0));
    const row = db.query("SELECT name, data, typeof(name) tn, typeof(data) td FROM t").get();
    expect(row).toEqual({ name: "", data: new Uint8Array(0), tn: "text", td: "blob" });
  });

  it("integers: numbers up to 2^53 - 1, beyond rounded numbers (bun:sqlite) or BigInt with int64, both signs", () => {
    expect(db.query("SELECT ? AS v").get(2n ** 53n + 1n)).toEqual({ v: 2 ** 53 });
    expect(db.query("SELECT ? AS v").get(-(2n ** 63n))).toEqual({ v: -(2 ** 63) });
    const exact = new Database(":memory:", { int64: true });
    const q = exact.query("SELECT ? AS v");
    expect(q.get(Number.MAX_SAFE_INTEGER)).toEqual({ v: Number.MAX_SAFE_INTEGER });
    expect(q.get(-Number.MAX_SAFE_INTEGER)).toEqual({ v: -Number.MAX_SAFE_INTEGER });
    expect(q.get(2n ** 53n)).toEqual({ v: 2n ** 53n });
    expect(q.get(-(2n ** 53n))).toEqual({ v: -(2n ** 53n) });
    expect(q.get(2n ** 63n - 1n)).toEqual({ v: 2n ** 63n - 1n });
    expect(q.get(-(2n ** 63n))).toEqual({ v: -(2n ** 63n) });
    exact.close();
  });

  it("long and non-ASCII text round-trips", () => {
    const q = db.query("SELECT ? AS v, length(?1) AS n");
    const long = "ab\u00e9\u4e2d\u{1F600}".repeat(20_000);
    expect(q.get(long)).toEqual({ v: long, n: 5 * 20_000 });
    expect(q.get("x".repeat(100_000))).toEqual({ v: "x".repeat(100_000), n: 100_000 });
  });

  it("text with an embedded NUL survives", () => {
    expect(db.query("SELECT ? AS v").get("a\0b")).toEqual({ v: "a\0b" });
  });

  it("blob bytes are copied: a row read stays valid after the next step", () => {
    const q = db.query("INSERT INTO t(data) VALUES (?)");
    for (let i = 0; i < 5; i++) q.run(new Uint8Array(1000).fill(i));
    const rows = db.query("SELECT data FROM t ORDER BY id").all();
    rows.forEach((r, i) => expect((r.data as Uint8Array).every((b) => b === i)).toBe(true));
  });

  it("with int64, integers beyond 2^53 read as BigInt; exact ones as numbers", () => {
    const big = 2n ** 53n + 1n;
    const exact = new Database(":memory:", { int64: true });
    exact.exec("CREATE TABLE t(id INTEGER PRIMARY KEY)");
    expect(exact.query("SELECT ? AS v").get(big)).toEqual({ v: big });
    expect(exact.query("SELECT 9007199254740991 AS v").get()).toEqual({ v: 9007199254740991 });
    exact.query("INSERT INTO t(id) VALUES (?)").run(big);
    expect(exact.lastInsertRowid).toBe(big);
    expect(exact.run("INSERT INTO t(id) VALUES (?)", 2 ** 40).lastInsertRowid).toBe(2 ** 40);
    // Without it, as bun:sqlite: the rowid too is a rounded number.
    expect(db.run("INSERT INTO t(id) VALUES (?)", big).lastInsertRowid).toBe(2 ** 53);
    exact.close();
  });

  it("safeIntegers: integers as BigInt (database option, per statement); int64 as @db/sqlite means it", () => {
    const s = new Database(":memory:", { safeIntegers: true });
    expect(s.query("SELECT 1 AS v").get()).toEqual({ v: 1n });
    expect(s.run("SELECT 1").lastInsertRowid).toBe(0n);
    expect(s.query("SELECT 1 AS v").safeIntegers(false).get()).toEqual({ v: 1 });
    s.close();
    // @db/sqlite's int64: BigInt only where a number would lose precision.
    const d = new Database(":memory:", { int64: true });
    expect(d.query("SELECT -(1 << 62) AS v, 5 AS w").get()).toEqual({ v: -(2n ** 62n), w: 5 });
    d.close();
    expect(db.query("SELECT 7 AS v").safeIntegers().get()).toEqual({ v: 7n });
  });
});

describe("SQL errors", () => {
  it("invalid SQL throws SQLiteError with codes, message, SQL and offset", () => {
    let err: SQLiteError | undefined;
    try {
      db.query("SELECT * FROM nope");
    } catch (e) {
      err = e as SQLiteError;
    }
    expect(err).toBeInstanceOf(SQLiteError);
    expect(err!.code).toBe("SQLITE_ERROR");
    expect(err!.extendedCode).toBe("SQLITE_ERROR");
    expect(err!.errno).toBe(1);
    expect(err!.errcode).toBe(1);
    expect(err!.message).toBe("no such table: nope");
    expect(err!.sql).toBe("SELECT * FROM nope");
    let syntax: SQLiteError | undefined;
    try {
      db.query("SELECT 1 FROM t WHERE WHERE");
    } catch (e) {
      syntax = e as SQLiteError;
    }
    expect(syntax!.message).toBe('near "WHERE": syntax error');
    expect(syntax!.byteOffset).toBe(22);
    expect(() => db.exec("CREATE TABLE")).toThrow(/incomplete input/);
  });

  it("constraint errors carry the extended code", () => {
    db.run("INSERT INTO t(id) VALUES (1)");
    try {
      db.run("INSERT INTO t(id) VALUES (?)", 1);
      expect.unreachable();
    } catch (e) {
      expect((e as SQLiteError).code).toBe("SQLITE_CONSTRAINT_PRIMARYKEY"); // as bun:sqlite names it
      expect((e as SQLiteError).primaryCode).toBe("SQLITE_CONSTRAINT");
      expect((e as SQLiteError).extendedCode).toBe("SQLITE_CONSTRAINT_PRIMARYKEY");
      expect((e as SQLiteError).errno).toBe(1555);
    }
    // The statement was reset: it works again.
    expect(db.run("INSERT INTO t(id) VALUES (?)", 2).changes).toBe(1);
  });

  it("prepare() takes one statement; a trailing comment is fine; empty SQL is an error", () => {
    expect(() => db.prepare("SELECT 1; SELECT 2")).toThrow(/one statement; use exec\(\)/);
    expect(db.prepare("SELECT 1 AS v; -- done").get()).toEqual({ v: 1 });
    expect(() => db.prepare("  -- nothing")).toThrow(/Invalid SQL statement: the SQL holds no statement/);
  });

  it("exec() runs scripts; with parameters one statement", () => {
    db.exec("INSERT INTO t(name) VALUES ('a'); INSERT INTO t(name) VALUES ('b');");
    expect(db.exec("INSERT INTO t(name) VALUES (?)", "c")).toEqual({ changes: 1, lastInsertRowid: 3 });
    expect(db.query("SELECT count(*) AS c FROM t").get()).toEqual({ c: 3 });
  });
});
