// The npm entry behaves as bun:sqlite where a differential run against Bun's own driver
// (scripts/bun-sqlite-diff.ts) found it did not: integers beyond 2^53, BigInts out of
// range, calls without parameters, parameter names that name nothing, the open options,
// scripts' change counts, images given to the constructor, the query cache's count, and
// statement facts. Each expectation is bun:sqlite's behaviour, written out (the suite also
// runs under Deno). The last block checks that the JSR entry's @db/sqlite face kept its own.
import { Buffer } from "node:buffer";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { constants, Database, SQLiteError } from "../lib/mod.ts";
import * as jsr from "../lib/jsr.ts";
import { tempDir } from "./helpers.ts";

const errorOf = (fn: () => unknown): Error => {
  try {
    fn();
  } catch (e) {
    return e as Error;
  }
  throw new Error("expected an error");
};

describe("integers (bun:sqlite's safeIntegers)", () => {
  it("beyond 2^53 they read as rounded numbers by default; safeIntegers(true) makes them exact", () => {
    const db = new Database(":memory:");
    db.exec("CREATE TABLE foo (id INTEGER PRIMARY KEY AUTOINCREMENT, age INTEGER NOT NULL)");
    db.run("INSERT INTO foo (age) VALUES (?)", BigInt(Number.MAX_SAFE_INTEGER) + 10n);
    const query = db.query("SELECT * FROM foo");
    expect(query.all()).toEqual([{ id: 1, age: Number.MAX_SAFE_INTEGER + 10 }]);
    query.safeIntegers(true);
    expect(query.all()).toEqual([{ id: 1n, age: BigInt(Number.MAX_SAFE_INTEGER) + 10n }]);
    expect(db.query("SELECT 9007199254740993 AS a, 9007199254740992 AS b").get()).toEqual({ a: 2 ** 53, b: 2 ** 53 });
    db.close();
  });

  it("safeIntegers: true is the default that safeIntegers(false) overrides", () => {
    const db = new Database(":memory:", { safeIntegers: true });
    db.exec("CREATE TABLE foo (id INTEGER PRIMARY KEY AUTOINCREMENT, age INTEGER NOT NULL)");
    db.run("INSERT INTO foo (age) VALUES (?)", BigInt(Number.MAX_SAFE_INTEGER) + 10n);
    const query = db.query("SELECT * FROM foo");
    expect(query.all()).toEqual([{ id: 1n, age: BigInt(Number.MAX_SAFE_INTEGER) + 10n }]);
    query.safeIntegers(false);
    expect(query.all()).toEqual([{ id: 1, age: Number.MAX_SAFE_INTEGER + 10 }]);
    db.close();
  });

  it("a BigInt out of range is a RangeError with safeIntegers, and wraps to 64 bits without", () => {
    const db = new Database(":memory:", { safeIntegers: true });
    db.run("CREATE TABLE test (id INTEGER PRIMARY KEY, value INTEGER)");
    const query = db.query("INSERT INTO test (value) VALUES ($value)");
    expect(() => query.run({ $value: BigInt(Number.MAX_SAFE_INTEGER) ** 2n })).toThrow(RangeError);
    query.safeIntegers(false);
    expect(() => query.run({ $value: BigInt(Number.MAX_SAFE_INTEGER) ** 2n })).not.toThrow();
    const wrapped = BigInt.asIntN(64, BigInt(Number.MAX_SAFE_INTEGER) ** 2n);
    expect(db.query("SELECT value FROM test").get()).toEqual({ value: wrapped });
    db.close();
  });

  it("lastInsertRowid and custom function arguments follow the same rule", () => {
    const db = new Database();
    db.run("CREATE TABLE t(id INTEGER PRIMARY KEY)");
    expect(db.run("INSERT INTO t VALUES (9007199254740993)").lastInsertRowid).toBe(2 ** 53);
    db.function("kind", (v) => typeof v);
    expect(db.query("SELECT kind(9007199254740993) AS k").get()).toEqual({ k: "number" });
    db.close();
  });
});

describe("parameters", () => {
  it("a call without parameters runs with the values bound last; prepare(sql, params) binds them", () => {
    const db = new Database();
    const q = db.query("SELECT ? AS a, ? AS b");
    expect(q.get()).toEqual({ a: null, b: null });
    expect(q.get(1, 2)).toEqual({ a: 1, b: 2 });
    expect(q.get()).toEqual({ a: 1, b: 2 });
    expect(q.all()).toEqual([{ a: 1, b: 2 }]);
    const p = db.prepare("SELECT ? AS a", [5]);
    expect(p.get()).toEqual({ a: 5 });
    expect(p.get(6)).toEqual({ a: 6 });
    expect(p.get()).toEqual({ a: 6 });
    expect(db.prepare("SELECT $x AS x", { $x: "named" }).values()).toEqual([["named"]]);
    // Named values given again replace all of them: a name left out is NULL.
    const n = db.query("SELECT $x AS a, $y AS b");
    expect(n.get({ $x: 1, $y: 2 })).toEqual({ a: 1, b: 2 });
    expect(n.get({ $x: 3 })).toEqual({ a: 3, b: null });
    expect(() => db.prepare("SELECT ? AS a", [1, 2])).toThrow("SQLite query expected 1 values, received 2");
    db.close();
  });

  it("strict mode names a missing parameter without its prefix; names of nothing are ignored", () => {
    const db = new Database(":memory:", { strict: true });
    db.exec("CREATE TABLE cats (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT UNIQUE, age INTEGER)");
    const insert = db.prepare("INSERT INTO cats (name, age) VALUES ($name, $age)");
    insert.run({ name: "Joey", age: 2, color: "grey" });
    const e = errorOf(() => insert.run({ name: "Sally" }));
    expect(e.message).toBe('Missing parameter "age"');
    expect(e).toBeInstanceOf(SQLiteError);
    expect(db.query("SELECT name, age FROM cats").all()).toEqual([{ name: "Joey", age: 2 }]);
    db.close();
  });

  it("-0 binds as the real -0", () => {
    const db = new Database();
    expect(db.query("SELECT ? AS v, typeof(?1) AS t").get(-0)).toEqual({ v: -0, t: "real" });
    db.close();
  });
});

describe("opening", () => {
  it("SQLite's message alone when the file cannot be opened; readwrite alone does not create", () => {
    const dir = tempDir();
    const cases: [string, () => unknown][] = [
      ["missing folder", () => Database.open(join(dir, "no", "such.db"), constants.SQLITE_OPEN_READWRITE)],
      ["READWRITE flag", () => Database.open(join(dir, "a.db"), constants.SQLITE_OPEN_READWRITE)],
      ["readonly", () => Database.open(join(dir, "b.db"), { readonly: true })],
      ["readwrite", () => Database.open(join(dir, "c.db"), { readwrite: true })],
      ["create: false", () => new Database(join(dir, "d.db"), { create: false })],
    ];
    for (const [what, open] of cases) {
      const e = errorOf(open) as SQLiteError;
      expect(e.message, what).toBe("unable to open database file");
      expect(e.code, what).toBe("SQLITE_CANTOPEN");
    }
    for (const f of ["a.db", "b.db", "c.db", "d.db"]) expect(existsSync(join(dir, f))).toBe(false);
    Database.open(join(dir, "e.db"), { create: true }).close();
    Database.open(join(dir, "f.db"), { readwrite: true, create: true }).close();
    expect(existsSync(join(dir, "e.db")) && existsSync(join(dir, "f.db"))).toBe(true);
    new Database().close();
  });

  it("refuses what bun:sqlite refuses: read-only with create, flags with neither read mode, read-only memory", () => {
    const path = join(tempDir(), "x.db");
    expect(() => new Database(path, { readonly: true, create: true })).toThrow(TypeError);
    expect(() => new Database(path, { readwrite: false, create: true })).toThrow(/cannot have "create: true"/);
    const flags = errorOf(() => new Database(path, constants.SQLITE_OPEN_CREATE)) as SQLiteError;
    expect(flags.code).toBe("SQLITE_MISUSE");
    expect(flags.message).toBe("bad parameter or other API misuse");
    expect(() => new Database(":memory:", { readonly: true })).toThrow("Cannot open an anonymous database in read-only mode.");
    expect(existsSync(path)).toBe(false);
  });

  it("new Database(bytes) opens the image in memory, read-only if asked", () => {
    const src = new Database();
    src.exec("CREATE TABLE test (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO test (name) VALUES ('Hello')");
    const input = src.serialize();
    expect(input).toBeInstanceOf(Buffer);
    const db2 = new Database(input);
    expect(db2.filename).toBe(":memory:");
    expect(db2.prepare("SELECT * FROM test").get()).toEqual({ id: 1, name: "Hello" });
    db2.exec("INSERT INTO test (name) VALUES ('foo')");
    const ro = new Database(input, { readonly: true });
    expect(() => ro.exec("INSERT INTO test (name) VALUES ('foo')")).toThrow("attempt to write a readonly database");
    const db3 = Database.deserialize(input, true);
    expect(() => db3.exec("INSERT INTO test (name) VALUES ('foo')")).toThrow("attempt to write a readonly database");
    const fromBuffer = Database.deserialize(input.buffer.slice(input.byteOffset, input.byteOffset + input.byteLength), {
      strict: true,
    });
    expect(fromBuffer.query("SELECT name FROM test WHERE id = $id").get({ id: 1 })).toEqual({ name: "Hello" });
    for (const d of [src, db2, ro, db3, fromBuffer]) d.close();
  });
});

describe("the database", () => {
  it("run() of a script reports the rows each statement changed, summed", () => {
    const db = new Database();
    db.run(
      "CREATE TABLE z(x); CREATE TABLE w(y); " +
        "CREATE TRIGGER tr AFTER INSERT ON z BEGIN INSERT INTO w VALUES (1); INSERT INTO w VALUES (2); END",
    );
    expect(db.run("INSERT INTO w VALUES (1), (2); INSERT INTO w VALUES (3)")).toEqual({ changes: 3, lastInsertRowid: 3 });
    expect(db.run("INSERT INTO z VALUES (1); DELETE FROM w WHERE 0")).toEqual({ changes: 1, lastInsertRowid: 1 });
    expect(db.run("DELETE FROM w").changes).toBe(5);
    expect(db.run("SELECT 1").changes).toBe(0);
    db.close();
  });

  it("exec() of SQL without a statement is an error", () => {
    const db = new Database();
    expect(() => db.exec("")).toThrow("SQL string mustn't be blank");
    expect(() => db.exec("  -- nothing")).toThrow("Query contained no valid SQL statement; likely empty query.");
    db.close();
  });

  it("the query cache's count under bun:sqlite's symbol, and its size", () => {
    const db = new Database();
    const count = (): unknown => (db as unknown as Record<symbol, unknown>)[Symbol.for("Bun.Database.cache.count")];
    expect(count()).toBe(0);
    db.query("SELECT 1");
    db.query("SELECT 1");
    db.query("SELECT 2");
    db.prepare("SELECT 3");
    expect(count()).toBe(2);
    db.clearQueryCache();
    expect(count()).toBe(0);
    expect(Database.MAX_QUERY_CACHE_SIZE).toBeGreaterThan(0);
    db.close();
  });

  it("transaction(): the variants are not enumerable, `database` is", () => {
    const db = new Database();
    const tx = db.transaction(() => 1);
    expect(Object.keys(tx)).toEqual(["database"]);
    expect(tx.database).toBe(db);
    expect([tx.deferred(), tx.immediate(), tx.exclusive(), tx.default()]).toEqual([1, 1, 1, 1]);
    db.close();
  });

  it("fileControl() takes the schema first too; constants has SQLITE_DESERIALIZE_READONLY", () => {
    const db = new Database(join(tempDir(), "fc.db"));
    expect(db.fileControl("main", constants.SQLITE_FCNTL_PERSIST_WAL, 0)).toBe(0);
    expect(db.fileControl(constants.SQLITE_FCNTL_PERSIST_WAL, 0, "main")).toBe(0);
    expect(constants.SQLITE_DESERIALIZE_READONLY).toBe(4);
    db.close();
  });
});

describe("statements", () => {
  it("columnTypes says NULL for each column when there is no row", () => {
    const db = new Database();
    db.run("CREATE TABLE z(a INTEGER, b TEXT)");
    const q = db.query("SELECT * FROM z WHERE a = ?");
    expect(q.columnTypes).toEqual(["NULL", "NULL"]);
    db.run("INSERT INTO z VALUES (1, 'x')");
    q.get(1);
    expect(q.columnTypes).toEqual(["INTEGER", "TEXT"]);
    db.close();
  });

  it("isFinalized, toJSON(), and toString() of a finalized statement is empty", () => {
    const db = new Database();
    const s = db.prepare("SELECT ? AS a");
    expect(s.isFinalized).toBe(false);
    expect(JSON.stringify(s)).toBe('{"sql":"SELECT NULL AS a","isFinalized":false,"paramsCount":1,"columnNames":["a"]}');
    s.get(1);
    expect(s.toJSON().sql).toBe("SELECT 1 AS a");
    s.finalize();
    expect(s.isFinalized).toBe(true);
    expect(s.toString()).toBe("");
    expect(() => s.get()).toThrow("Statement has finalized");
    db.close();
  });
});

describe("double-quoted strings", () => {
  it("the npm entry reads a double-quoted word that names no column as text, in DML and DDL", () => {
    const db = new Database(join(tempDir(), "dqs.db"));
    db.exec('CREATE TABLE t(a TEXT DEFAULT "none", b)');
    db.run('INSERT INTO t(b) VALUES ("Hello")');
    expect(db.query('SELECT a, b, "b" AS c FROM t WHERE b = "Hello"').get()).toEqual({ a: "none", b: "Hello", c: "Hello" });
    db.close();
  });
  it("the JSR entry refuses it, as @db/sqlite does", () => {
    const db = new jsr.Database(":memory:");
    db.exec("CREATE TABLE t(b)");
    expect(() => db.exec('INSERT INTO t VALUES ("Hello")')).toThrow(/no such column: "Hello"/);
    db.close();
  });
});

describe("the JSR entry keeps @db/sqlite's rules", () => {
  it("exact integers, refused names and counts, the SQL of a finalized statement, plain bytes", () => {
    const db = new jsr.Database(":memory:");
    expect(db.prepare("SELECT 9007199254740993 AS v").get()).toEqual({ v: 9007199254740993n });
    expect(() => db.prepare("SELECT $a AS a").get({ $b: 1 })).toThrow(/unknown parameter "\$b"/);
    expect(() => db.prepare("SELECT ? AS a").get()).toThrow(/expected 1 parameter, got 0/);
    expect(() => db.prepare("SELECT ? AS a").get(2n ** 64n)).toThrow(/does not fit in a 64-bit integer/);
    const s = db.prepare("SELECT 1");
    s.finalize();
    expect(s.toString()).toBe("SELECT 1");
    expect(Buffer.isBuffer(db.serialize())).toBe(false);
    expect(db.exec("")).toBe(0);
    db.close();
  });
});
