// scripts/bun-sqlite-diff.ts: a differential probe of the npm entry against Bun's built-in
// bun:sqlite. Each case runs twice, once on each Database, and the printable results are
// compared; the differences are printed (all results with --all).
//
//   node_modules/.bin/bun scripts/bun-sqlite-diff.ts [--all] [name-filter]
//
// Bun only (bun:sqlite is Bun's). Not part of `npm test`: some differences are intended
// (journal_mode is WAL, extra properties, messages of errors the package words itself).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as bun from "bun:sqlite";
import * as pkg from "../lib/mod.ts";

// deno-lint-ignore no-explicit-any
type Any = any;
interface Impl {
  Database: Any;
  Statement: Any;
  SQLiteError: Any;
  constants: Any;
  dir: string;
}
type Case = (m: Impl) => unknown;

// A value as stable, printable JSON-ish text.
function show(v: unknown, depth = 0): string {
  if (depth > 4) return "...";
  if (v === undefined) return "undefined";
  if (v === null) return "null";
  if (typeof v === "bigint") return `${v}n`;
  if (typeof v === "number") return Object.is(v, -0) ? "-0" : String(v);
  if (typeof v === "string") return JSON.stringify(v);
  if (typeof v === "boolean") return String(v);
  if (typeof v === "function") return `[function ${v.name}]`;
  if (typeof v === "symbol") return v.toString();
  if (v instanceof Error) {
    const e = v as Error & { code?: unknown; errno?: unknown; byteOffset?: unknown };
    // bun:sqlite's SQLiteError instances report Error as their constructor's name.
    const cls = e.name === "SQLiteError" ? "SQLiteError" : e.constructor.name;
    return `THROW ${cls}(name=${e.name}, message=${JSON.stringify(e.message)}, code=${show(e.code)}, errno=${show(e.errno)}, byteOffset=${show(e.byteOffset)})`;
  }
  if (ArrayBuffer.isView(v)) {
    return `${v.constructor.name}[${Array.from(new Uint8Array(v.buffer, v.byteOffset, v.byteLength)).join(",")}]`;
  }
  if (Array.isArray(v)) return `[${v.map((x) => show(x, depth + 1)).join(", ")}]`;
  if (typeof v === "object") {
    const proto = Object.getPrototypeOf(v);
    const name = proto === null ? "null-proto" : proto === Object.prototype ? "" : (proto.constructor?.name ?? "?");
    const keys = Object.keys(v as object);
    return `${name}{${keys.map((k) => `${k}: ${show((v as Record<string, unknown>)[k], depth + 1)}`).join(", ")}}`;
  }
  return String(v);
}

function attempt(fn: () => unknown): unknown {
  try {
    return fn();
  } catch (e) {
    return e;
  }
}

const cases: Record<string, Case> = {};
const c = (name: string, fn: Case) => (cases[name] = fn);
const mem = (m: Impl, opts?: unknown) => (opts === undefined ? new m.Database(":memory:") : new m.Database(":memory:", opts));

// ---- constructor and properties ----
c("ctor default filename", (m) => new m.Database().filename);
c("ctor :memory: filename", (m) => new m.Database(":memory:").filename);
c("ctor empty filename", (m) => new m.Database("").filename);
c("ctor file filename relative to dir", (m) => new m.Database(join(m.dir, "a.db")).filename === join(m.dir, "a.db"));
c("ctor readonly missing file", (m) => attempt(() => new m.Database(join(m.dir, "missing.db"), { readonly: true })));
c("ctor create:false missing file", (m) => attempt(() => new m.Database(join(m.dir, "missing2.db"), { create: false })));
c("ctor readwrite:true create:false missing", (m) => attempt(() => new m.Database(join(m.dir, "missing3.db"), { readwrite: true, create: false })));
c("ctor flags READWRITE missing", (m) => attempt(() => new m.Database(join(m.dir, "missing4.db"), m.constants.SQLITE_OPEN_READWRITE)));
c("ctor readonly write", (m) => {
  const p = join(m.dir, "ro.db");
  new m.Database(p).run("CREATE TABLE t(x)");
  const db = new m.Database(p, { readonly: true });
  return attempt(() => db.run("INSERT INTO t VALUES (1)"));
});
c("ctor unknown option", (m) => attempt(() => new m.Database(":memory:", { foo: 1 })));
c("ctor options null", (m) => attempt(() => new m.Database(":memory:", null)));
c("ctor path number", (m) => attempt(() => new m.Database(123)));
c("ctor path undefined", (m) => attempt(() => new m.Database(undefined).filename));
c("ctor strict:1", (m) => attempt(() => new m.Database(":memory:", { strict: 1 }) && "ok"));
c("Database.open", (m) => m.Database.open(":memory:") instanceof m.Database);
c("Database.open readonly flags", (m) => attempt(() => m.Database.open(join(m.dir, "nope.db"), m.constants.SQLITE_OPEN_READONLY)));
c("inTransaction", (m) => {
  const db = mem(m);
  const a = db.inTransaction;
  db.run("BEGIN");
  const b = db.inTransaction;
  db.run("COMMIT");
  return [a, b, db.inTransaction];
});
c("inTransaction after close", (m) => {
  const db = mem(m);
  db.close();
  return attempt(() => db.inTransaction);
});
c("db own keys", (m) => Object.keys(mem(m)));
c("db toString", (m) => attempt(() => String(mem(m))));
c("db handle", (m) => typeof mem(m).handle);
c("Database static keys", (m) => Object.getOwnPropertyNames(m.Database).sort());
c("db proto names", (m) => Object.getOwnPropertyNames(m.Database.prototype).sort());

// ---- query / prepare ----
c("query cache same object", (m) => {
  const db = mem(m);
  return db.query("SELECT 1") === db.query("SELECT 1");
});
c("prepare not cached", (m) => {
  const db = mem(m);
  return db.prepare("SELECT 1") === db.prepare("SELECT 1");
});
c("query after finalize re-prepared", (m) => {
  const db = mem(m);
  const a = db.query("SELECT 1 AS x");
  a.finalize();
  const b = db.query("SELECT 1 AS x");
  return [a === b, attempt(() => b.get())];
});
c("prepare syntax error", (m) => attempt(() => mem(m).prepare("SELEC 1")));
c("prepare two statements", (m) => attempt(() => mem(m).prepare("SELECT 1; SELECT 2").all()));
c("query two statements", (m) => attempt(() => mem(m).query("SELECT 1; SELECT 2").all()));
c("prepare empty", (m) => attempt(() => mem(m).prepare("")));
c("prepare comment only", (m) => attempt(() => mem(m).prepare("-- hi")));
c("prepare with params arg", (m) => attempt(() => mem(m).prepare("SELECT ? AS x", [5]).get()));
c("prepare with params arg obj", (m) => attempt(() => mem(m).prepare("SELECT $a AS x", { $a: 5 }).get()));
c("query no such table", (m) => attempt(() => mem(m).query("SELECT * FROM nope")));
c("prepare non-string", (m) => attempt(() => mem(m).prepare(42)));

// ---- run / exec ----
c("run create", (m) => mem(m).run("CREATE TABLE t(x)"));
c("run insert", (m) => {
  const db = mem(m);
  db.run("CREATE TABLE t(x)");
  return db.run("INSERT INTO t VALUES (1),(2)");
});
c("exec insert", (m) => {
  const db = mem(m);
  db.exec("CREATE TABLE t(x)");
  return db.exec("INSERT INTO t VALUES (1),(2)");
});
c("run with params", (m) => {
  const db = mem(m);
  db.run("CREATE TABLE t(x)");
  return db.run("INSERT INTO t VALUES (?)", [7]);
});
c("run with params spread", (m) => {
  const db = mem(m);
  db.run("CREATE TABLE t(x, y)");
  return attempt(() => db.run("INSERT INTO t VALUES (?, ?)", 1, 2));
});
c("run script", (m) => {
  const db = mem(m);
  return [db.run("CREATE TABLE t(x); INSERT INTO t VALUES (1); INSERT INTO t VALUES (2)"), db.query("SELECT count(*) AS n FROM t").get()];
});
c("run script with params", (m) => {
  const db = mem(m);
  return attempt(() => db.run("CREATE TABLE t(x); INSERT INTO t VALUES (?)", [1]));
});
c("run syntax error", (m) => attempt(() => mem(m).run("SELEC 1")));
c("exec empty", (m) => attempt(() => mem(m).exec("")));
c("stmt.run result", (m) => {
  const db = mem(m);
  db.run("CREATE TABLE t(x)");
  return db.query("INSERT INTO t VALUES (?)").run(3);
});
c("stmt.run select", (m) => mem(m).query("SELECT 1").run());
c("run lastInsertRowid big", (m) => {
  const db = mem(m);
  db.run("CREATE TABLE t(id INTEGER PRIMARY KEY)");
  return db.run("INSERT INTO t VALUES (9007199254740993)");
});
c("run lastInsertRowid safeIntegers", (m) => {
  const db = mem(m, { safeIntegers: true });
  db.run("CREATE TABLE t(id INTEGER PRIMARY KEY)");
  return [db.run("INSERT INTO t VALUES (5)"), db.query("INSERT INTO t VALUES (6)").run()];
});

// ---- get / all / values / iterate ----
c("get no row", (m) => mem(m).query("SELECT 1 WHERE 0").get());
c("all no row", (m) => mem(m).query("SELECT 1 WHERE 0").all());
c("values no row", (m) => mem(m).query("SELECT 1 WHERE 0").values());
c("values", (m) => mem(m).query("SELECT 1 AS a, 'x' AS b UNION ALL SELECT 2, 'y'").values());
c("values of insert", (m) => {
  const db = mem(m);
  db.run("CREATE TABLE t(x)");
  return db.query("INSERT INTO t VALUES (1)").values();
});
c("all of insert", (m) => {
  const db = mem(m);
  db.run("CREATE TABLE t(x)");
  return db.query("INSERT INTO t VALUES (1)").all();
});
c("get of insert", (m) => {
  const db = mem(m);
  db.run("CREATE TABLE t(x)");
  return [db.query("INSERT INTO t VALUES (1)").get(), db.query("SELECT count(*) c FROM t").get()];
});
c("get dup column names", (m) => mem(m).query("SELECT 1 AS a, 2 AS a").get());
c("values dup column names", (m) => mem(m).query("SELECT 1 AS a, 2 AS a").values());
c("iterate", (m) => [...mem(m).query("SELECT 1 AS a UNION ALL SELECT 2").iterate()]);
c("iterate type", (m) => {
  const it = mem(m).query("SELECT 1 AS a").iterate();
  return [typeof it.next, typeof it[Symbol.iterator], Object.prototype.toString.call(it)];
});
c("stmt iterable", (m) => [...mem(m).query("SELECT 1 AS a UNION ALL SELECT 2")]);
c("iterate with params", (m) => [...mem(m).query("SELECT ? AS a").iterate(5)]);
c("all column order", (m) => Object.keys(mem(m).query("SELECT 1 AS z, 2 AS a, 3 AS m").get()));
c("numeric column name", (m) => mem(m).query('SELECT 1 AS "1", 2 AS "0"').get());
c("__proto__ column", (m) => {
  const r = mem(m).query('SELECT 1 AS "__proto__"').get();
  return [Object.keys(r), Object.getPrototypeOf(r) === Object.prototype];
});
c("row prototype", (m) => {
  const r = mem(m).query("SELECT 1 AS a").get();
  return Object.getPrototypeOf(r) === Object.prototype;
});

// ---- statement facts ----
c("columnNames", (m) => mem(m).query("SELECT 1 AS a, 2 AS b").columnNames);
c("columnNames of insert", (m) => {
  const db = mem(m);
  db.run("CREATE TABLE t(x)");
  return db.query("INSERT INTO t VALUES (1)").columnNames;
});
c("paramsCount", (m) => mem(m).query("SELECT ?, ?, $a, :b").paramsCount);
c("paramsCount ?1 ?1", (m) => mem(m).query("SELECT ?1, ?1, ?3").paramsCount);
c("columnTypes before run", (m) => {
  const db = mem(m);
  db.run("CREATE TABLE t(a INTEGER, b TEXT, c REAL, d BLOB, e)");
  db.run("INSERT INTO t VALUES (1, 'x', 1.5, x'00', NULL)");
  return attempt(() => db.query("SELECT * FROM t").columnTypes);
});
c("columnTypes after run", (m) => {
  const db = mem(m);
  db.run("CREATE TABLE t(a INTEGER, b TEXT, c REAL, d BLOB, e)");
  db.run("INSERT INTO t VALUES (1, 'x', 1.5, x'00', NULL)");
  const q = db.query("SELECT * FROM t");
  q.all();
  return attempt(() => q.columnTypes);
});
c("columnTypes no rows", (m) => {
  const db = mem(m);
  db.run("CREATE TABLE t(a INTEGER, b TEXT)");
  return attempt(() => db.query("SELECT * FROM t").columnTypes);
});
c("columnTypes expression", (m) => attempt(() => mem(m).query("SELECT 1 AS a, 'x' AS b, 2.5 AS c, NULL AS d, x'01' AS e").columnTypes));
c("columnTypes of insert", (m) => {
  const db = mem(m);
  db.run("CREATE TABLE t(a INTEGER)");
  return attempt(() => db.query("INSERT INTO t VALUES (1)").columnTypes);
});
c("declaredTypes", (m) => {
  const db = mem(m);
  db.run("CREATE TABLE t(a INTEGER, b TEXT, c REAL, d BLOB, e, f VARCHAR(10))");
  return attempt(() => db.query("SELECT a, b, c, d, e, f, 1 AS g FROM t").declaredTypes);
});
c("declaredTypes after run", (m) => {
  const db = mem(m);
  db.run("CREATE TABLE t(a INTEGER, b TEXT)");
  const q = db.query("SELECT a, b, 1 AS g FROM t");
  q.all();
  return attempt(() => q.declaredTypes);
});
c("stmt toString", (m) => String(mem(m).query("SELECT ? AS a, ? AS b")));
c("stmt toString bound", (m) => {
  const q = mem(m).query("SELECT ? AS a, ? AS b");
  q.get(1, "x'y");
  return q.toString();
});
c("stmt toString finalized", (m) => {
  const q = mem(m).query("SELECT 1");
  q.finalize();
  return attempt(() => q.toString());
});
c("stmt native", (m) => typeof mem(m).query("SELECT 1").native);
c("stmt own keys", (m) => Object.keys(mem(m).query("SELECT 1")));
c("stmt instanceof Statement", (m) => mem(m).query("SELECT 1") instanceof m.Statement);
c("stmt proto names", (m) => Object.getOwnPropertyNames(m.Statement.prototype).sort());
c("finalize then get", (m) => {
  const q = mem(m).query("SELECT 1");
  q.finalize();
  return attempt(() => q.get());
});
c("finalize then all", (m) => {
  const q = mem(m).prepare("SELECT 1");
  q.finalize();
  return attempt(() => q.all());
});
c("finalize twice", (m) => {
  const q = mem(m).prepare("SELECT 1");
  q.finalize();
  return attempt(() => q.finalize());
});
c("finalize then columnNames", (m) => {
  const q = mem(m).prepare("SELECT 1 AS a");
  q.finalize();
  return attempt(() => q.columnNames);
});
c("finalize then paramsCount", (m) => {
  const q = mem(m).prepare("SELECT ?");
  q.finalize();
  return attempt(() => q.paramsCount);
});
c("finalize returns", (m) => mem(m).prepare("SELECT 1").finalize());
c("as(Class)", (m) => {
  class P {
    a!: number;
    get twice() {
      return this.a * 2;
    }
  }
  const r = mem(m).query("SELECT 1 AS a").as(P).get();
  return [r instanceof P, r.twice, Object.keys(r)];
});
c("as(Class) all", (m) => {
  class P {}
  return mem(m).query("SELECT 1 AS a").as(P).all().map((r: unknown) => r instanceof P);
});
c("as(non-class)", (m) => attempt(() => mem(m).query("SELECT 1 AS a").as(5)));
c("as returns same stmt", (m) => {
  const q = mem(m).query("SELECT 1 AS a");
  return q.as(class {}) === q;
});

// ---- binding ----
const bind = (sql: string, params: unknown[], opts?: unknown) => (m: Impl) => attempt(() => mem(m, opts).query(sql).get(...params));
c("bind $a with prefix", bind("SELECT $a AS x", [{ $a: 1 }]));
c("bind $a without prefix", bind("SELECT $a AS x", [{ a: 1 }]));
c("bind $a without prefix strict", bind("SELECT $a AS x", [{ a: 1 }], { strict: true }));
c("bind $a with prefix strict", bind("SELECT $a AS x", [{ $a: 1 }], { strict: true }));
c("bind :a with prefix", bind("SELECT :a AS x", [{ ":a": 1 }]));
c("bind :a without prefix", bind("SELECT :a AS x", [{ a: 1 }]));
c("bind :a without prefix strict", bind("SELECT :a AS x", [{ a: 1 }], { strict: true }));
c("bind @a with prefix", bind("SELECT @a AS x", [{ "@a": 1 }]));
c("bind @a without prefix", bind("SELECT @a AS x", [{ a: 1 }]));
c("bind @a without prefix strict", bind("SELECT @a AS x", [{ a: 1 }], { strict: true }));
c("bind missing named", bind("SELECT $a AS x, $b AS y", [{ $a: 1 }]));
c("bind missing named strict", bind("SELECT $a AS x, $b AS y", [{ a: 1 }], { strict: true }));
c("bind extra named", bind("SELECT $a AS x", [{ $a: 1, $b: 2 }]));
c("bind extra named strict", bind("SELECT $a AS x", [{ a: 1, b: 2 }], { strict: true }));
c("bind extra named bare", bind("SELECT $a AS x", [{ a: 1, zz: 2 }]));
c("bind no params to named", bind("SELECT $a AS x", []));
c("bind no params to named strict", bind("SELECT $a AS x", [], { strict: true }));
c("bind missing positional", bind("SELECT ? AS x, ? AS y", [1]));
c("bind missing positional strict", bind("SELECT ? AS x, ? AS y", [1], { strict: true }));
c("bind no positional", bind("SELECT ? AS x", []));
c("bind extra positional", bind("SELECT ? AS x", [1, 2]));
c("bind extra positional strict", bind("SELECT ? AS x", [1, 2], { strict: true }));
c("bind array", bind("SELECT ? AS x, ? AS y", [[1, 2]]));
c("bind array extra", bind("SELECT ? AS x", [[1, 2]]));
c("bind array short", bind("SELECT ? AS x, ? AS y", [[1]]));
c("bind ?1 ?2 positional", bind("SELECT ?2 AS x, ?1 AS y", [1, 2]));
c("bind ?1 ?1", bind("SELECT ?1 AS x, ?1 AS y", [7]));
c("bind ?3 only", bind("SELECT ?3 AS x", [1, 2, 3]));
c("bind ?3 only one", bind("SELECT ?3 AS x", [9]));
c("bind positional to named", bind("SELECT $a AS x", [5]));
c("bind object to positional", bind("SELECT ? AS x", [{ a: 1 }]));
c("bind object to positional index", bind("SELECT ? AS x", [{ "1": 5 }]));
c("bind object to ?1", bind("SELECT ?1 AS x", [{ "1": 5 }]));
c("bind mixed ? and $a", bind("SELECT ? AS x, $a AS y", [{ $a: 2 }]));
c("bind true false", bind("SELECT ? AS t, ? AS f", [true, false]));
c("bind null undefined", bind("SELECT ? AS n, ? AS u", [null, undefined]));
c("bind undefined named", bind("SELECT $a AS x", [{ $a: undefined }]));
c("bind bigint small", bind("SELECT ? AS x, typeof(?) AS t", [5n, 5n]));
c("bind bigint big", bind("SELECT ? AS x", [9223372036854775807n]));
c("bind bigint too big", bind("SELECT ? AS x", [9223372036854775808n]));
c("bind bigint too small", bind("SELECT ? AS x", [-9223372036854775809n]));
c("bind 2^53+2 number", bind("SELECT ? AS x, typeof(?) AS t", [2 ** 53 + 2, 2 ** 53 + 2]));
c("bind 2^63 number", bind("SELECT ? AS x, typeof(?) AS t", [2 ** 63, 2 ** 63]));
c("bind 1e300", bind("SELECT ? AS x, typeof(?) AS t", [1e300, 1e300]));
c("bind -0", bind("SELECT ? AS x, typeof(?) AS t", [-0, -0]));
c("bind 1.0", bind("SELECT typeof(?) AS t", [1.0]));
c("bind 2^31", bind("SELECT ? AS x, typeof(?) AS t", [2 ** 31, 2 ** 31]));
c("bind NaN", bind("SELECT ? AS x, typeof(?) AS t", [NaN, NaN]));
c("bind Infinity", bind("SELECT ? AS x, typeof(?) AS t", [Infinity, -Infinity]));
c("bind string NUL", bind("SELECT ? AS x, length(?) AS n", ["a\0b", "a\0b"]));
c("bind non-BMP", bind("SELECT ? AS x, length(?) AS n", ["😀é", "😀é"]));
c("bind lone surrogate", bind("SELECT ? AS x", ["\ud800"]));
c("bind empty string", bind("SELECT ? AS x, typeof(?) AS t", ["", ""]));
c("bind Uint8Array", bind("SELECT ? AS x, typeof(?) AS t", [new Uint8Array([1, 2]), new Uint8Array([1, 2])]));
c("bind empty Uint8Array", bind("SELECT ? AS x, typeof(?) AS t", [new Uint8Array(0), new Uint8Array(0)]));
c("bind Buffer", bind("SELECT ? AS x", [Buffer.from([1, 2, 3])]));
c("bind ArrayBuffer", bind("SELECT ? AS x, typeof(?) AS t", [new Uint8Array([4, 5]).buffer, new Uint8Array([4, 5]).buffer]));
c("bind DataView", bind("SELECT ? AS x, typeof(?) AS t", [new DataView(new Uint8Array([6, 7]).buffer), new DataView(new Uint8Array([6, 7]).buffer)]));
c("bind Uint16Array", bind("SELECT ? AS x, typeof(?) AS t", [new Uint16Array([1, 258]), new Uint16Array([1, 258])]));
c("bind Float64Array", bind("SELECT length(?) AS n", [new Float64Array([1])]));
c("bind subarray", bind("SELECT ? AS x", [new Uint8Array([1, 2, 3, 4]).subarray(1, 3)]));
c("bind Date", bind("SELECT ? AS x", [new Date(0)]));
c("bind object", bind("SELECT ? AS x", [[{ a: 1 }]]));
c("bind nested array", bind("SELECT ? AS x", [[[1]]]));
c("bind function", bind("SELECT ? AS x", [() => 1]));
c("bind symbol", bind("SELECT ? AS x", [Symbol("s")]));
c("bind named Date", bind("SELECT $a AS x", [{ $a: new Date(0) }]));
c("bind class instance as params", (m) => {
  class P {
    $a = 1;
  }
  return attempt(() => mem(m).query("SELECT $a AS x").get(new P()));
});
c("bind Map", bind("SELECT ? AS x", [new Map()]));
c("bind null-proto object", (m) => {
  const o = Object.create(null);
  o.$a = 3;
  return attempt(() => mem(m).query("SELECT $a AS x").get(o));
});

// ---- reading values ----
c("read int", (m) => mem(m).query("SELECT 1 AS a, -5 AS b, 2147483648 AS c").get());
c("read big int", (m) => mem(m).query("SELECT 9007199254740993 AS a, -9007199254740993 AS b, 9223372036854775807 AS c").get());
c("read 2^53", (m) => mem(m).query("SELECT 9007199254740992 AS a, 9007199254740991 AS b").get());
c("read safeIntegers", (m) => mem(m, { safeIntegers: true }).query("SELECT 1 AS a, 1.5 AS b, 9007199254740993 AS c").get());
c("read stmt.safeIntegers()", (m) => attempt(() => mem(m).query("SELECT 1 AS a").safeIntegers(true).get()));
c("read stmt.safeIntegers() returns", (m) => {
  const q = mem(m).query("SELECT 1 AS a");
  return attempt(() => q.safeIntegers(true) === q);
});
c("read stmt.safeIntegers(false) on safe db", (m) => attempt(() => mem(m, { safeIntegers: true }).query("SELECT 1 AS a").safeIntegers(false).get()));
c("read real", (m) => mem(m).query("SELECT 1.5 AS a, 1e300 AS b, 2.0 AS c").get());
c("read blob", (m) => mem(m).query("SELECT x'0102' AS a, x'' AS b, zeroblob(2) AS c").get());
c("read blob values", (m) => mem(m).query("SELECT x'0102' AS a").values());
c("read text", (m) => mem(m).query("SELECT 'héllo😀' AS a, '' AS b").get());
c("read text NUL", (m) => mem(m).query("SELECT 'a' || char(0) || 'b' AS a").get());
c("read null", (m) => mem(m).query("SELECT NULL AS a").get());
c("read int from real column", (m) => {
  const db = mem(m);
  db.run("CREATE TABLE t(r REAL)");
  db.run("INSERT INTO t VALUES (3)");
  return db.query("SELECT r, typeof(r) t FROM t").get();
});
c("read sum bigint safe", (m) => mem(m, { safeIntegers: true }).query("SELECT sum(x) s FROM (SELECT 1 x)").values());

// ---- transactions ----
c("transaction commit", (m) => {
  const db = mem(m);
  db.run("CREATE TABLE t(x)");
  const tx = db.transaction((a: number) => {
    db.run("INSERT INTO t VALUES (?)", [a]);
    return db.inTransaction;
  });
  return [tx(1), db.query("SELECT x FROM t").values(), db.inTransaction];
});
c("transaction rollback", (m) => {
  const db = mem(m);
  db.run("CREATE TABLE t(x)");
  const tx = db.transaction(() => {
    db.run("INSERT INTO t VALUES (1)");
    throw new Error("boom");
  });
  return [attempt(() => tx()), db.query("SELECT x FROM t").values(), db.inTransaction];
});
c("transaction variants", (m) => {
  const tx = mem(m).transaction(() => 1);
  return [typeof tx.deferred, typeof tx.immediate, typeof tx.exclusive, tx.deferred(), tx.immediate(), tx.exclusive(), Object.keys(tx).sort()];
});
c("transaction nested savepoint", (m) => {
  const db = mem(m);
  db.run("CREATE TABLE t(x)");
  const inner = db.transaction(() => {
    db.run("INSERT INTO t VALUES (2)");
    throw new Error("inner");
  });
  const outer = db.transaction(() => {
    db.run("INSERT INTO t VALUES (1)");
    try {
      inner();
    } catch { /* */ }
    db.run("INSERT INTO t VALUES (3)");
  });
  outer();
  return db.query("SELECT x FROM t").values();
});
c("transaction this/args", (m) => {
  const db = mem(m);
  const tx = db.transaction(function (this: unknown, ...a: unknown[]) {
    return [a, this === undefined ? "undef" : typeof this];
  });
  return tx(1, 2);
});
c("transaction non-function", (m) => attempt(() => mem(m).transaction(5)));
c("transaction inside BEGIN", (m) => {
  const db = mem(m);
  db.run("CREATE TABLE t(x)");
  db.run("BEGIN");
  const tx = db.transaction(() => {
    db.run("INSERT INTO t VALUES (1)");
  });
  tx();
  const a = db.inTransaction;
  db.run("ROLLBACK");
  return [a, db.query("SELECT count(*) n FROM t").get()];
});
c("transaction async fn", (m) => {
  const db = mem(m);
  return attempt(() => {
    const r = db.transaction(async () => 1)();
    return [typeof r, db.inTransaction];
  });
});
c("transaction name", (m) => mem(m).transaction(function foo() {}).name);
c("transaction length", (m) => mem(m).transaction((a: number, b: number) => a + b).length);

// ---- serialize / deserialize ----
c("serialize type", (m) => {
  const db = mem(m);
  db.run("CREATE TABLE t(x)");
  const s = db.serialize();
  return [s.constructor.name, s.length > 0];
});
c("deserialize roundtrip", (m) => {
  const db = mem(m);
  db.run("CREATE TABLE t(x); INSERT INTO t VALUES (42)");
  const d = m.Database.deserialize(db.serialize());
  return [d.query("SELECT x FROM t").get(), d.filename];
});
c("deserialize readonly bool", (m) => {
  const db = mem(m);
  db.run("CREATE TABLE t(x)");
  const d = m.Database.deserialize(db.serialize(), true);
  return attempt(() => d.run("INSERT INTO t VALUES (1)"));
});
c("deserialize readonly opts", (m) => {
  const db = mem(m);
  db.run("CREATE TABLE t(x)");
  const d = attempt(() => m.Database.deserialize(db.serialize(), { readonly: true }));
  return d instanceof Error ? d : attempt(() => d.run("INSERT INTO t VALUES (1)"));
});
c("deserialize writable", (m) => {
  const db = mem(m);
  db.run("CREATE TABLE t(x)");
  const d = m.Database.deserialize(db.serialize());
  return attempt(() => d.run("INSERT INTO t VALUES (1)"));
});
c("deserialize Buffer", (m) => {
  const db = mem(m);
  db.run("CREATE TABLE t(x); INSERT INTO t VALUES (1)");
  return attempt(() => m.Database.deserialize(Buffer.from(db.serialize())).query("SELECT x FROM t").get());
});
c("deserialize ArrayBuffer", (m) => {
  const db = mem(m);
  db.run("CREATE TABLE t(x); INSERT INTO t VALUES (1)");
  const s = db.serialize();
  return attempt(() => m.Database.deserialize(s.buffer.slice(s.byteOffset, s.byteOffset + s.byteLength)).query("SELECT x FROM t").get());
});
c("deserialize garbage", (m) => {
  const d = attempt(() => m.Database.deserialize(new Uint8Array([1, 2, 3])));
  return d instanceof Error ? d : attempt(() => d.query("SELECT * FROM sqlite_master").all());
});
c("deserialize empty", (m) => {
  const d = attempt(() => m.Database.deserialize(new Uint8Array(0)));
  return d instanceof Error ? d : attempt(() => d.query("SELECT 1 AS x").get());
});
c("serialize file db", (m) => {
  const db = new m.Database(join(m.dir, "ser.db"));
  db.run("CREATE TABLE t(x); INSERT INTO t VALUES (1)");
  const d = m.Database.deserialize(db.serialize());
  return attempt(() => d.query("SELECT x FROM t").get());
});
c("serialize bad schema", (m) => attempt(() => mem(m).serialize("nope")));

// ---- close ----
c("close returns", (m) => mem(m).close());
c("close twice", (m) => {
  const db = mem(m);
  db.close();
  return attempt(() => db.close());
});
c("close(true)", (m) => attempt(() => mem(m).close(true)));
c("close(false) with open stmt", (m) => {
  const db = mem(m);
  const q = db.prepare("SELECT 1 AS a");
  return [attempt(() => db.close(false)), attempt(() => q.get())];
});
c("close with iterating stmt", (m) => {
  const db = mem(m);
  const it = db.query("SELECT 1 AS a UNION ALL SELECT 2").iterate();
  it.next();
  return [attempt(() => db.close()), attempt(() => it.next())];
});
c("close(true) then stmt", (m) => {
  const db = mem(m);
  const q = db.prepare("SELECT 1 AS a");
  db.close(true);
  return attempt(() => q.get());
});
c("use after close run", (m) => {
  const db = mem(m);
  db.close();
  return attempt(() => db.run("SELECT 1"));
});
c("use after close query", (m) => {
  const db = mem(m);
  db.close();
  return attempt(() => db.query("SELECT 1"));
});
c("use after close prepare", (m) => {
  const db = mem(m);
  db.close();
  return attempt(() => db.prepare("SELECT 1"));
});
c("use after close cached query", (m) => {
  const db = mem(m);
  db.query("SELECT 1");
  db.close();
  return attempt(() => db.query("SELECT 1").get());
});
c("use after close serialize", (m) => {
  const db = mem(m);
  db.close();
  return attempt(() => db.serialize());
});
c("use after close transaction", (m) => {
  const db = mem(m);
  db.close();
  return attempt(() => db.transaction(() => 1)());
});
c("Symbol.dispose", (m) => {
  const db = mem(m);
  db[Symbol.dispose]();
  return attempt(() => db.run("SELECT 1"));
});
c("stmt Symbol.dispose", (m) => {
  const q = mem(m).prepare("SELECT 1");
  return [typeof q[Symbol.dispose], attempt(() => q[Symbol.dispose]()), attempt(() => q.get())];
});

// ---- extensions, file control, constants ----
c("loadExtension missing", (m) => attempt(() => mem(m).loadExtension(join(m.dir, "nope.so"))));
c("loadExtension no arg", (m) => attempt(() => mem(m).loadExtension()));
c("fileControl memory", (m) => attempt(() => mem(m).fileControl(m.constants.SQLITE_FCNTL_PERSIST_WAL, 0)));
c("fileControl file", (m) => {
  const db = new m.Database(join(m.dir, "fc.db"));
  db.run("CREATE TABLE t(x)");
  return attempt(() => db.fileControl(m.constants.SQLITE_FCNTL_PERSIST_WAL, 0));
});
c("fileControl schema first", (m) => {
  const db = new m.Database(join(m.dir, "fc2.db"));
  return attempt(() => db.fileControl("main", m.constants.SQLITE_FCNTL_PERSIST_WAL, 0));
});
c("constants keys missing in pkg", (m) => Object.keys(m.constants).filter((k) => !(k in pkg.constants)).sort());
c("constants keys missing in bun", (m) => Object.keys(m.constants).filter((k) => !(k in bun.constants)).sort());
c("constants values", (m) => {
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(bun.constants).sort()) out[k] = m.constants[k];
  return out;
});

// ---- errors ----
c("SQLiteError syntax", (m) => attempt(() => mem(m).run("SELECT * FORM t")));
c("SQLiteError instance", (m) => {
  const e = attempt(() => mem(m).run("SELEC 1"));
  return [e instanceof m.SQLiteError, e instanceof Error, Object.keys(e as object).sort()];
});
c("SQLiteError unique", (m) => {
  const db = mem(m);
  db.run("CREATE TABLE t(x UNIQUE)");
  db.run("INSERT INTO t VALUES (1)");
  return attempt(() => db.run("INSERT INTO t VALUES (1)"));
});
c("SQLiteError pk", (m) => {
  const db = mem(m);
  db.run("CREATE TABLE t(x INTEGER PRIMARY KEY)");
  db.run("INSERT INTO t VALUES (1)");
  return attempt(() => db.query("INSERT INTO t VALUES (?)").run(1));
});
c("SQLiteError notnull", (m) => {
  const db = mem(m);
  db.run("CREATE TABLE t(x NOT NULL)");
  return attempt(() => db.query("INSERT INTO t VALUES (?)").run(null));
});
c("SQLiteError check", (m) => {
  const db = mem(m);
  db.run("CREATE TABLE t(x CHECK (x > 0))");
  return attempt(() => db.run("INSERT INTO t VALUES (0)"));
});
c("SQLiteError fk", (m) => {
  const db = mem(m);
  db.run("PRAGMA foreign_keys = ON");
  db.run("CREATE TABLE p(id INTEGER PRIMARY KEY); CREATE TABLE c(p REFERENCES p(id))");
  return attempt(() => db.run("INSERT INTO c VALUES (5)"));
});
c("SQLiteError no such table", (m) => attempt(() => mem(m).query("SELECT * FROM nope")));
c("SQLiteError raise", (m) => attempt(() => mem(m).query("SELECT raise(ABORT, 'custom msg')").get()));
c("SQLiteError toString", (m) => String(attempt(() => mem(m).run("SELEC 1"))));
c("SQLiteError name prop", (m) => m.SQLiteError.name);
c("SQLiteError construct", (m) => attempt(() => {
  const e = new m.SQLiteError("hi");
  return [e.message, e.name, e.code, e.errno, e instanceof Error];
}));
c("error in iterate", (m) => {
  const db = mem(m);
  db.run("CREATE TABLE t(x CHECK (x < 3))");
  return attempt(() => [...db.query("INSERT INTO t VALUES (5) RETURNING x").iterate()]);
});

// ---- misc ----
c("pragma journal_mode memory", (m) => mem(m).query("PRAGMA journal_mode").get());
c("db.function exists", (m) => typeof mem(m).function);
c("changes via query", (m) => {
  const db = mem(m);
  db.run("CREATE TABLE t(x)");
  db.run("INSERT INTO t VALUES (1), (2)");
  return [db.query("DELETE FROM t").run(), db.query("SELECT changes() c").get()];
});
c("run returns frozen?", (m) => {
  const r = mem(m).run("SELECT 1");
  return [Object.isFrozen(r), Object.getPrototypeOf(r) === Object.prototype];
});
c("query trailing semicolon", (m) => mem(m).query("SELECT 1 AS a;").get());
c("query trailing comment", (m) => mem(m).query("SELECT 1 AS a; -- x").get());
c("run DQS", (m) => attempt(() => mem(m).query('SELECT "hello" AS a').get()));
c("exec DQS in create", (m) => attempt(() => mem(m).run('CREATE TABLE t(x DEFAULT "a")')));
c("get with no params on param stmt", (m) => attempt(() => mem(m).query("SELECT ? AS x").get()));
c("all named array mix", (m) => attempt(() => mem(m).query("SELECT $a AS x").all([{ $a: 1 }])));
c("values safeIntegers", (m) => mem(m, { safeIntegers: true }).query("SELECT 1, 2.5").values());
c("iterate early return", (m) => {
  const db = mem(m);
  const q = db.query("SELECT 1 AS a UNION ALL SELECT 2");
  for (const _ of q.iterate()) break;
  return q.all();
});
c("reset/other methods", (m) => {
  const q = mem(m).query("SELECT 1");
  return ["reset", "bind", "clearBindings", "setBindings"].map((k) => typeof q[k]);
});
c("db methods typeof", (m) => {
  const db = mem(m);
  return ["loadExtension", "serialize", "fileControl", "close", "exec", "run", "query", "prepare", "transaction", "function"]
    .map((k) => `${k}:${typeof db[k]}`);
});
c("Database.setCustomSQLite", (m) => typeof m.Database.setCustomSQLite);
c("open :memory: with readonly", (m) => attempt(() => new m.Database(":memory:", { readonly: true }).query("SELECT 1 AS a").get()));
c("file: URL path", (m) => attempt(() => new m.Database(new URL("file://" + join(m.dir, "u.db"))).filename));
c("uri filename string", (m) => attempt(() => {
  const db = new m.Database("file:" + join(m.dir, "uri.db") + "?mode=rwc");
  return db.filename;
}));
c("number option flags create", (m) => attempt(() => {
  const db = new m.Database(join(m.dir, "fl.db"), m.constants.SQLITE_OPEN_CREATE | m.constants.SQLITE_OPEN_READWRITE);
  db.run("CREATE TABLE t(x)");
  return db.run("INSERT INTO t VALUES (1)");
}));

c("new Database(bytes)", (m) => {
  const db = mem(m);
  db.run("CREATE TABLE t(x); INSERT INTO t VALUES (1)");
  const d = new m.Database(db.serialize());
  return [d.filename, d.query("SELECT x FROM t").all()];
});
c("cache count symbol", (m) => {
  const db = mem(m);
  db.query("SELECT 1");
  db.query("SELECT 2");
  db.prepare("SELECT 3");
  return db[Symbol.for("Bun.Database.cache.count")];
});
c("run script with trigger", (m) => {
  const db = mem(m);
  db.run("CREATE TABLE z(x); CREATE TABLE w(y); CREATE TRIGGER tr AFTER INSERT ON z BEGIN INSERT INTO w VALUES (1); END");
  return [db.run("INSERT INTO w VALUES (1), (2); INSERT INTO w VALUES (3)"), db.run("INSERT INTO z VALUES (1); DELETE FROM w WHERE 0")];
});
c("open readwrite alone missing", (m) => attempt(() => new m.Database(join(m.dir, "rw-alone.db"), { readwrite: true })));
c("open readonly create", (m) => attempt(() => new m.Database(join(m.dir, "ro-create.db"), { readonly: true, create: true })));
c("bindings kept without params", (m) => {
  const q = mem(m).query("SELECT ? AS a");
  return [q.get(), q.get(4), q.get()];
});

// ---- run ----
const argv = process.argv.slice(2);
const all = argv.includes("--all");
const filter = argv.find((a) => !a.startsWith("--"));
const impls: Record<"bun" | "pkg", Omit<Impl, "dir">> = { bun, pkg } as Any;
const out: Record<string, Record<string, string>> = { bun: {}, pkg: {} };
for (const side of ["bun", "pkg"] as const) {
  const dir = mkdtempSync(join(tmpdir(), `diff-${side}-`));
  for (const [name, fn] of Object.entries(cases)) {
    if (filter && !name.includes(filter)) continue;
    out[side][name] = show(attempt(() => fn({ ...impls[side], dir })));
  }
  rmSync(dir, { recursive: true, force: true });
}
let n = 0;
for (const name of Object.keys(out.bun)) {
  const a = out.bun[name];
  const b = out.pkg[name];
  if (a === b && !all) continue;
  if (a !== b) n++;
  console.log(`${a === b ? "  " : "!="} ${name}\n     bun: ${a}\n     pkg: ${b}`);
}
console.log(`${n} of ${Object.keys(out.bun).length} cases differ`);
