// Hostile and mistaken input at the FFI boundary: file control buffers, lengths that lie,
// callbacks that free what is being bound, NUL characters, values of 2 GiB and more,
// thrown values that cannot be printed, a transaction that cannot succeed, and misuse in
// general. Every case must end in a clear error and a usable connection, never a crash.
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { Database, SQLiteError } from "../lib/mod.ts";
import { tempDir } from "./helpers.ts";

const errorOf = (fn: () => unknown): unknown => {
  try {
    fn();
  } catch (e) {
    return e;
  }
  throw new Error("expected an error");
};

describe("fileControl buffers are size-checked", () => {
  it("a buffer smaller than what the op writes is refused, nothing is written", () => {
    const db = new Database(join(tempDir(), "fc.db"));
    const backing = new Uint8Array(16).fill(0xaa);
    // SQLITE_FCNTL_MMAP_SIZE (18) reads and writes a 64-bit int.
    expect(() => db.fileControl(18, backing.subarray(0, 4))).toThrow(/TypedArray must be at least 8 bytes/);
    expect([...backing]).toEqual(new Array(16).fill(0xaa));
    // VFSNAME (12) returns memory JS cannot free: refused whatever the buffer.
    expect(() => db.fileControl(12, backing.subarray(0, 4))).toThrow(/not supported.*VFSNAME/);
    // The engine's statistics control writes 256 bytes.
    expect(() => db.fileControl(0x4d570001, new BigInt64Array(8))).toThrow(/needs 256 bytes/);
    const stats = new BigInt64Array(32);
    expect(db.fileControl(0x4d570001, stats)).toBe(0);
    expect(stats[0]).toBe(1n); // the engine flag
    // An op of unknown size, and a missing argument where one is written, are refused.
    expect(() => db.fileControl(99, new Uint8Array(1024))).toThrow(/argument size is not known/);
    expect(() => db.fileControl(10, null)).toThrow(/needs an argument of 4 bytes/);
    expect(() => db.fileControl(7, 1)).toThrow(/not a number/);
    expect(() => db.fileControl("x" as never, 1)).toThrow(TypeError);
    // A number becomes a 64-bit int where the op takes one.
    const mmap = new BigInt64Array([-1n]);
    expect(db.fileControl(18, mmap)).toBe(0);
    expect(db.fileControl(18, 0)).toBe(0);
    // A length that lies does not make a small buffer big enough.
    const liar = new Uint8Array(4);
    Object.defineProperty(liar, "byteLength", { value: 4096 });
    Object.defineProperty(liar, "length", { value: 4096 });
    expect(() => db.fileControl(18, liar)).toThrow(/must be at least 8 bytes .*got 4\)/);
    db.close();
  });
});

class LongUint8Array extends Uint8Array {
  override get length(): number {
    return 1 << 20;
  }
  override get byteLength(): number {
    return 1 << 20;
  }
}

describe("lengths come from the bytes, not from properties", () => {
  it("binding a view whose length lies binds its real bytes", () => {
    const db = new Database();
    const own = new Uint8Array([1, 2, 3]);
    Object.defineProperty(own, "length", { value: 1 << 24 });
    Object.defineProperty(own, "byteLength", { value: 1 << 24 });
    const sub = new LongUint8Array([4, 5]);
    const rows = db.query("SELECT length(?) AS a, length(?) AS b, ? AS c").get(own, sub, sub);
    expect(rows).toEqual({ a: 3, b: 2, c: new Uint8Array([4, 5]) });
    // Other views and buffers bind their bytes too.
    const dv = new DataView(new Uint8Array([9, 8, 7, 6]).buffer, 1, 2);
    expect(db.query("SELECT hex(?) AS a, hex(?) AS b").get(dv, new Uint16Array([0x0102]).buffer))
      .toEqual({ a: "0807", b: "0201" });
    db.close();
  });

  it("a custom function returning such a view returns its real bytes", () => {
    const db = new Database();
    db.function("liar", () => new LongUint8Array([1, 2, 3]));
    expect(db.query("SELECT length(liar()) AS n").get()).toEqual({ n: 3 });
    db.close();
  });

  it("deserialize() reads the length once: a length that changes cannot overflow", () => {
    const src = new Database();
    src.exec("CREATE TABLE t(x); INSERT INTO t VALUES (42)");
    const image = src.serialize();
    src.close();
    let reads = 0;
    class Shifty extends Uint8Array {
      override get length(): number {
        return reads++ === 0 ? 1 : 1 << 26;
      }
    }
    const data = new Shifty(image);
    const db = new Database();
    db.deserialize(data);
    expect(db.query("SELECT x FROM t").get()).toEqual({ x: 42 });
    db.close();
  });
});

describe("callbacks that free what is being bound", () => {
  it("a parameter getter that finalizes the statement or closes the database mid-bind frees nothing under the loop", () => {
    // As in bun:sqlite, the call then throws "Statement has finalized" (or, after close(),
    // "Database has closed"); the handle is finalized once the bind loop is done with it.
    for (const method of ["iterate", "all", "get", "run", "values"] as const) {
      const db = new Database();
      const stmt = db.prepare("SELECT $a AS a, $b AS b");
      const finalizing = {
        get $a() {
          stmt.finalize();
          return 1;
        },
        $b: 2,
      };
      expect(() => [...(stmt[method](finalizing) as Iterable<unknown>[] | [])], method)
        .toThrow(/Statement has finalized/);
      expect(stmt.isFinalized).toBe(true);
      expect(db.query("SELECT 1 AS one").get()).toEqual({ one: 1 });
      const other = db.prepare("SELECT $a AS a, $b AS b");
      const closing = {
        get $a() {
          db.close();
          return 1;
        },
        $b: 2,
      };
      expect(() => other[method](closing), method).toThrow(/Database has closed/);
      expect(db.open).toBe(false);
    }
  });
});

describe("NUL characters", () => {
  it("a NUL in a path, an option, a name or SQL is refused before reaching C", () => {
    const dir = tempDir();
    expect(() => new Database(join(dir, "a.db\0x"))).toThrow(/path contains a NUL/);
    expect(() => new Database(new URL(`file://${join(dir, "a.db")}%00x`))).toThrow(/NUL/);
    expect(() => new Database(join(dir, "b.db"), { profile: "small\0" })).toThrow(/option "profile" contains a NUL/);
    expect(() => new Database(":memory:", { libraryPath: "x\0y" })).toThrow(/option "libraryPath" contains a NUL/);
    const db = new Database();
    expect(() => db.function("f\0g", () => 1)).toThrow(/NUL/);
    expect(() => db.exec("SELECT 1;\0DROP TABLE x")).toThrow(/SQL contains a NUL/);
    expect(() => db.prepare("SELECT 1\0")).toThrow(/SQL contains a NUL/);
    expect(() => db.serialize("ma\0in")).toThrow(/NUL/);
    expect(() => db.loadExtension("x\0y")).toThrow(/NUL/);
    // A NUL inside a value is data, not a terminator.
    expect(db.query("SELECT ? AS v").get("a\0b")).toEqual({ v: "a\0b" });
    db.close();
  });
});

describe("values of 2 GiB or more", () => {
  it("are refused with SQLITE_TOOBIG, never truncated", () => {
    const db = new Database();
    const huge = new Uint8Array(2 ** 31 + 64); // zero pages: not touched by the refusal
    const e = errorOf(() => db.query("SELECT length(?) AS n").get(huge)) as SQLiteError;
    expect(e).toBeInstanceOf(SQLiteError);
    expect(e.errcode).toBe(18); // SQLITE_TOOBIG
    db.function("huge", () => huge);
    const r = errorOf(() => db.query("SELECT length(huge()) AS n").get()) as SQLiteError;
    expect(r.errcode).toBe(18);
    expect(db.query("SELECT length(?) AS n").get(huge.subarray(0, 64))).toEqual({ n: 64 });
    db.close();
  });
});

describe("custom functions that throw", () => {
  it("a thrown value whose toString() throws still fails the statement cleanly", () => {
    const db = new Database();
    const evil = {
      toString(): string {
        throw new Error("toString exploded");
      },
    };
    db.function("evil", () => {
      throw evil;
    });
    db.function("bare", () => {
      throw Object.create(null);
    });
    db.function("lying", () => {
      const e = new Error("x");
      Object.defineProperty(e, "message", {
        get() {
          throw new Error("message exploded");
        },
      });
      throw e;
    });
    const e1 = errorOf(() => db.query("SELECT evil()").get()) as Error;
    expect(e1.message).toMatch(/cannot be printed/);
    expect(e1.cause).toBe(evil);
    expect(errorOf(() => db.query("SELECT bare()").get())).toBeInstanceOf(Error);
    expect(errorOf(() => db.query("SELECT lying()").get())).toBeInstanceOf(Error);
    // The connection and the statements are fine afterwards.
    expect(db.query("SELECT 1 AS one").get()).toEqual({ one: 1 });
    expect(db.inTransaction).toBe(false);
    db.close();
  });
});

describe("transaction() that cannot succeed", () => {
  it("fails at once when this connection's own open iterator pins the old snapshot", () => {
    const path = join(tempDir(), "pin.db");
    const a = new Database(path);
    const b = new Database(path);
    a.exec("CREATE TABLE c(id INTEGER PRIMARY KEY, v INTEGER); INSERT INTO c VALUES (1, 0), (2, 0)");
    const it1 = b.query("SELECT id FROM c").iterate();
    expect(it1.next().value).toEqual({ id: 1 }); // b's read snapshot is now held open
    a.run("UPDATE c SET v = 5 WHERE id = 1"); // another writer commits
    const started = Date.now();
    const e = errorOf(() => b.transaction(() => b.run("UPDATE c SET v = v + 1 WHERE id = 2"))()) as SQLiteError;
    expect(Date.now() - started).toBeLessThan(5000);
    expect(e).toBeInstanceOf(SQLiteError);
    expect(e.message).toMatch(/another statement of this connection is still open.*SELECT id FROM c/);
    expect(b.lastTransactionAttempts).toBe(1);
    // A plain statement says the same at once instead of waiting out the busy timeout.
    const p = errorOf(() => b.run("UPDATE c SET v = v + 1 WHERE id = 2")) as SQLiteError;
    expect(p.message).toMatch(/still open/);
    it1.return!();
    b.transaction(() => b.run("UPDATE c SET v = v + 1 WHERE id = 2"))();
    expect(a.query("SELECT v FROM c ORDER BY id").values()).toEqual([[5], [1]]);
    a.close();
    b.close();
  });
});

describe("transaction() from inside a custom function during a scan", () => {
  it("fails at once: the scanning statement holds the old snapshot", () => {
    const path = join(tempDir(), "scan.db");
    const a = new Database(path);
    const b = new Database(path);
    a.exec("CREATE TABLE c(id INTEGER PRIMARY KEY, v INTEGER); INSERT INTO c VALUES (1, 0), (2, 0)");
    let first = true;
    b.function("bump", (id) => {
      if (first) {
        first = false;
        a.run("UPDATE c SET v = 7 WHERE id = 2"); // another writer commits mid-scan
      }
      b.transaction(() => b.run("UPDATE c SET v = v + 1 WHERE id = ?", id as number))();
      return id;
    });
    const started = Date.now();
    const e = errorOf(() => b.query("SELECT bump(id) FROM c").all()) as Error;
    expect(Date.now() - started).toBeLessThan(5000);
    expect(e.message).toMatch(/still open.*the statement calling this custom function/);
    expect(b.inTransaction).toBe(false);
    a.close();
    b.close();
  });
});

describe("misuse never crashes", () => {
  it("wrong argument types are TypeErrors or SQLiteErrors", () => {
    const db = new Database();
    db.exec("CREATE TABLE t(x)");
    const bad: [string, () => unknown][] = [
      ["new Database(123)", () => new Database(123 as never)],
      ["new Database(path, 'x')", () => new Database(":memory:", "x" as never)],
      ["query(123)", () => db.query(123 as never)],
      ["prepare(null)", () => db.prepare(null as never)],
      ["exec({})", () => db.exec({} as never)],
      ["function(5, fn)", () => db.function(5 as never, () => 1)],
      ["function(name, 5)", () => db.function("f", 5 as never)],
      ["transaction('x')", () => db.transaction("x" as never)],
      ["loadExtension(5)", () => db.loadExtension(5 as never)],
      ["serialize(5)", () => db.serialize(5 as never)],
      ["deserialize('x')", () => db.deserialize("x" as never)],
      ["bind a symbol", () => db.query("SELECT ?").get(Symbol("s") as never)],
      ["bind an object", () => db.query("SELECT ?").get([{}] as never)],
      ["bind a function", () => db.query("SELECT ?").get((() => 1) as never)],
      ["bind a Statement", () => db.query("SELECT ?").get(db.query("SELECT 1") as never)],
      ["bind a Database", () => db.query("SELECT ?").get(db as never)],
      // Without safeIntegers bun:sqlite wraps a BigInt out of range; with it, a RangeError.
      ["bind a huge BigInt", () => db.query("SELECT ?").safeIntegers(true).get(2n ** 64n)],
      ["too many parameters", () => db.query("SELECT ?").get(1, 2)],
      ["a bad fileControl op", () => db.fileControl(-1, null)],
    ];
    for (const [what, fn] of bad) {
      const e = errorOf(fn);
      expect(e instanceof TypeError || e instanceof RangeError || e instanceof SQLiteError, what).toBe(true);
    }
    expect(db.query("SELECT count(*) AS n FROM t").get()).toEqual({ n: 0 });
    db.close();
  });

  it("closed databases and finalized statements throw on every method", () => {
    const db = new Database();
    const stmt = db.prepare("SELECT 1");
    const other = db.prepare("SELECT 2");
    other.finalize();
    db.close();
    for (const fn of [
      () => stmt.run(), () => stmt.all(), () => stmt.get(), () => stmt.values(), () => stmt.iterate(),
      () => stmt.columnNames, () => stmt.paramsCount, () => stmt.expandedSql, () => other.all(),
      () => db.exec("SELECT 1"), () => db.query("SELECT 1"), () => db.prepare("SELECT 1"),
      () => db.transaction(() => 1)(), () => db.function("f", () => 1), () => db.serialize(),
      () => db.deserialize(new Uint8Array(0)), () => db.fileControl(10, 1), () => db.stats(),
      () => db.inTransaction, () => db.changes, () => db.lastInsertRowid,
    ]) {
      expect(errorOf(fn)).toBeInstanceOf(SQLiteError);
    }
    stmt.finalize(); // idempotent after close
    db.close();
  });

  it("re-entrant calls from inside a custom function are refused or work, never crash", () => {
    const db = new Database();
    db.exec("CREATE TABLE t(x); INSERT INTO t VALUES (1), (2); CREATE TABLE log(x)");
    let action: () => unknown = () => 0;
    db.function("f", (x) => {
      action();
      return x;
    });
    const outer = db.prepare("SELECT f(x) AS y FROM t");
    const refused: [string, () => unknown, RegExp][] = [
      ["close", () => db.close(), /inside a custom function/],
      ["finalize the running statement", () => outer.finalize(), /while it runs/],
      ["run the running statement", () => outer.all(), /statement is running/],
      ["iterate the running statement", () => outer.iterate(), /statement is running/],
      ["deserialize", () => db.deserialize(new Uint8Array(0)), /inside a custom function/],
    ];
    for (const [what, fn, message] of refused) {
      action = fn;
      expect(() => outer.all(), what).toThrow(message);
    }
    // The progress handler is inside a statement too.
    action = () => 0;
    db.onProgress(() => {
      db.close();
      return false;
    }, 1);
    expect(() => outer.all()).toThrow(/inside a custom function/);
    db.onProgress(null);
    // Other statements of the same connection may run from inside it.
    action = () => db.query("SELECT count(*) FROM t").get();
    expect(outer.all()).toEqual([{ y: 1 }, { y: 2 }]);
    action = () => db.run("INSERT INTO log VALUES (3)");
    expect(outer.all()).toEqual([{ y: 1 }, { y: 2 }]);
    expect(db.query("SELECT count(*) AS n FROM log").get()).toEqual({ n: 2 });
    action = () => 0;
    expect(db.open).toBe(true);
    db.close();
  });
});
