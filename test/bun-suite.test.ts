// The behaviours of bun:sqlite's own test suite that the npm entry missed (issue 30, "The
// drivers' own test suites"), one test each. Every scenario runs on the package; under Bun
// it runs on bun:sqlite too, in the same test, and the two answers must agree (an error
// of the package must carry bun:sqlite's words). The expectations are also written out, so
// that the run under Deno checks them as well.
import { createRequire } from "node:module";
import { describe, expect, it } from "vitest";
import { constants, Database } from "../lib/mod.ts";
import { runtime } from "./helpers.ts";

type AnyDatabase = typeof Database;

// bun:sqlite's Database under Bun (loaded by Bun itself, not through vitest's resolver);
// null under Deno, where only the written expectations are checked.
const BunDatabase: AnyDatabase | null = runtime === "bun"
  ? (createRequire(import.meta.url)("bun:sqlite") as { Database: AnyDatabase }).Database
  : null;

type Outcome = { value: unknown } | { threw: string; type: string };

function outcome(fn: () => unknown): Outcome {
  try {
    return { value: fn() };
  } catch (e) {
    const err = e as Error;
    return { threw: String(err?.message), type: err instanceof TypeError ? "TypeError" : "Error" };
  }
}

/**
 * Runs scenario on the package's Database and, under Bun, on bun:sqlite's; returns the
 * package's outcome after checking that bun:sqlite's is the same (the same value, or an
 * error of the same kind whose message the package's contains).
 */
function same(scenario: (D: AnyDatabase) => unknown): Outcome {
  const ours = outcome(() => scenario(Database));
  if (BunDatabase !== null) {
    const theirs = outcome(() => scenario(BunDatabase));
    if ("threw" in theirs) {
      expect("threw" in ours ? ours.threw : ours, "bun:sqlite threw").toContain(theirs.threw);
      expect((ours as { type: string }).type).toBe(theirs.type);
    } else {
      expect(ours).toEqual(theirs);
    }
  }
  return ours;
}

const value = (o: Outcome): unknown => {
  if ("threw" in o) throw new Error(`expected a value, got the error: ${o.threw}`);
  return o.value;
};

describe("aggregate()", () => {
  const table = (db: Database): void => {
    db.exec("CREATE TABLE t(g, x); INSERT INTO t VALUES (1, 1), (1, 2), (2, 3), (2, 4)");
  };

  it("result turns the accumulator into the group's value", () => {
    const out = same((D) => {
      const db = new D(":memory:");
      table(db);
      db.aggregate("tenfold", { start: 0, step: (acc: number, x) => acc + Number(x), result: (acc: number) => acc * 10 });
      return db.query("SELECT g, tenfold(x) AS v FROM t GROUP BY g").all();
    });
    expect(value(out)).toEqual([{ g: 1, v: 30 }, { g: 2, v: 70 }]);
  });

  it("start as a function makes a fresh accumulator for each group (and for an empty one)", () => {
    const out = same((D) => {
      const db = new D(":memory:");
      table(db);
      db.aggregate("list", {
        start: () => [] as number[],
        step: (acc: number[], x) => {
          acc.push(Number(x));
          return acc;
        },
        result: (acc: number[]) => acc.join(","),
      });
      return [
        db.query("SELECT g, list(x) AS v FROM t GROUP BY g").all(),
        db.query("SELECT list(x) AS v FROM t WHERE 0").get(),
      ];
    });
    expect(value(out)).toEqual([[{ g: 1, v: "1,2" }, { g: 2, v: "3,4" }], { v: "" }]);
  });

  it("a step (or inverse) returning undefined keeps the accumulator", () => {
    const out = same((D) => {
      const db = new D(":memory:");
      table(db);
      type Acc = { sum: number };
      db.aggregate("inplace", {
        start: () => ({ sum: 0 }),
        step: (acc: Acc, x) => {
          acc.sum += Number(x);
        },
        inverse: (acc: Acc, x) => {
          acc.sum -= Number(x);
        },
        result: (acc: Acc) => acc.sum,
      });
      db.aggregate("keep", { start: 5, step: (_acc: number, _x) => undefined });
      return [
        db.query("SELECT g, inplace(x) AS v FROM t GROUP BY g").all(),
        db.query("SELECT x, inplace(x) OVER (ORDER BY x ROWS 1 PRECEDING) AS v FROM t").values(),
        db.query("SELECT keep(x) AS v FROM t").get(),
      ];
    });
    expect(value(out)).toEqual([
      [{ g: 1, v: 3 }, { g: 2, v: 7 }],
      [[1, 1], [2, 3], [3, 5], [4, 7]],
      { v: 5 },
    ]);
  });

  it("safeIntegers: the arguments are bigints, whatever the database's option", () => {
    const out = same((D) => {
      const db = new D(":memory:");
      db.aggregate("bigsum", { safeIntegers: true, start: 0n, step: (acc: bigint, x) => acc + (x as bigint) });
      db.aggregate("kinds", { safeIntegers: true, start: "", step: (acc: string, x) => acc + typeof x });
      return [
        db.query("SELECT bigsum(9007199254740993) AS v").safeIntegers(true).get(),
        db.query("SELECT kinds(x) AS v FROM (SELECT 1 AS x UNION ALL SELECT 2)").get(),
      ];
    });
    expect(value(out)).toEqual([{ v: 9007199254740993n }, { v: "bigintbigint" }]);
  });
});

describe("function() with safeIntegers", () => {
  it("the option decides the type of INTEGER arguments, over the database's safeIntegers", () => {
    const out = same((D) => {
      const plain = new D(":memory:");
      plain.function("kind", { safeIntegers: true }, (v) => `${typeof v}:${v}`);
      const safe = new D(":memory:", { safeIntegers: true });
      safe.function("kind", { safeIntegers: false }, (v) => `${typeof v}:${v}`);
      safe.function("kind2", (v) => typeof v);
      return [
        plain.query("SELECT kind(9007199254740993) AS v").get(),
        safe.query("SELECT kind(5) AS v, kind2(5) AS w").get(),
      ];
    });
    expect(value(out)).toEqual([{ v: "bigint:9007199254740993" }, { v: "number:5", w: "bigint" }]);
  });

  it("a bigint result beyond 64 bits: a RangeError with safeIntegers, wrapped without", () => {
    const thrown = same((D) => {
      const db = new D(":memory:");
      db.function("huge", { safeIntegers: true }, () => 2n ** 64n);
      return db.query("SELECT huge() AS v").get();
    });
    expect(thrown).toMatchObject({ threw: "BigInt value '18446744073709551616' is out of range" });
    const wrapped = same((D) => {
      const db = new D(":memory:");
      db.function("huge", () => 2n ** 64n + 5n);
      db.function("twice", { safeIntegers: true }, (x) => (x as bigint) * 2n);
      return [db.query("SELECT huge() AS v").get(), db.query("SELECT twice(4611686018427387903) AS v").safeIntegers(true).get()];
    });
    expect(value(wrapped)).toEqual([{ v: 5 }, { v: 9223372036854775806n }]);
  });
});

describe("columnTypes", () => {
  it("gives the types of expressions and functions, before any execution", () => {
    const out = same((D) => {
      const db = new D(":memory:");
      db.function("half", (x) => Number(x) / 2);
      db.exec("CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, w REAL, b BLOB); INSERT INTO t VALUES (1, 'a', 1.5, x'00')");
      const expr = db.prepare(
        "SELECT length('bun') AS l, 1.5 AS f, 'x' AS s, x'01' AS b, NULL AS n, abs(-3) AS a, upper('x') AS u, " +
          "half(3) AS h, json_array(1) AS j, typeof(1) AS t",
      );
      const table = db.prepare("SELECT id, name, w * 2, b FROM t");
      return [expr.columnTypes, expr.declaredTypes, table.columnTypes, table.declaredTypes, table.all().length];
    });
    expect(value(out)).toEqual([
      ["INTEGER", "FLOAT", "TEXT", "BLOB", "NULL", "INTEGER", "TEXT", "FLOAT", "TEXT", "TEXT"],
      [null, null, null, null, null, null, null, null, null, null],
      ["INTEGER", "TEXT", "FLOAT", "BLOB"],
      ["INTEGER", "TEXT", null, "BLOB"],
      1,
    ]);
  });

  it("refuses statements that are not read-only, in bun:sqlite's words; the statements still run", () => {
    for (const sql of ["INSERT INTO t VALUES (1)", "INSERT INTO t VALUES (2) RETURNING x", "CREATE TABLE u(y)", "DELETE FROM t"]) {
      const out = same((D) => {
        const db = new D(":memory:");
        db.exec("CREATE TABLE t(x)");
        return db.prepare(sql).columnTypes;
      });
      expect(out, sql).toMatchObject({
        threw: expect.stringContaining("columnTypes is not available for non-read-only statements (INSERT, UPDATE, DELETE, etc.)"),
      });
    }
    const rows = same((D) => {
      const db = new D(":memory:");
      db.exec("CREATE TABLE t(x)");
      const insert = db.prepare("INSERT INTO t VALUES (1)");
      try {
        void insert.columnTypes;
      } catch { /* refused, as checked above */ }
      insert.run();
      return [insert.declaredTypes, db.query("SELECT count(*) AS n FROM t").get()];
    });
    expect(value(rows)).toEqual([[], { n: 1 }]);
  });

  it("reports the error of the first step and of a finalized statement", () => {
    const step = same((D) => new D(":memory:").prepare("SELECT abs(-9223372036854775808) AS a").columnTypes);
    expect(step).toMatchObject({ threw: "integer overflow" });
    const finalized = same((D) => {
      const s = new D(":memory:").prepare("SELECT 1");
      s.finalize();
      return s.columnTypes;
    });
    expect(finalized).toMatchObject({ threw: "Statement has finalized" });
  });
});

describe("as()", () => {
  it("takes a constructor whose prototype is an object, or undefined; anything else is a TypeError", () => {
    function NoProto(): void {}
    NoProto.prototype = null;
    class Row {
      a = 0;
      get twice(): number {
        return this.a * 2;
      }
    }
    const cases: [unknown, string | null][] = [
      [{}, "Expected a constructor"],
      [() => 1, "Expected a constructor"],
      [null, "Expected class to be a constructor or undefined"],
      [1, "Expected class to be a constructor or undefined"],
      ["Row", "Expected class to be a constructor or undefined"],
      [NoProto, "Expected a constructor prototype to be an object"],
      [Row.bind(null), "Expected constructor to have a prototype"],
    ];
    for (const [arg, message] of cases) {
      const out = same((D) => new D(":memory:").prepare("SELECT 1 AS a").as(arg as never));
      expect(out, String(message)).toMatchObject({ threw: message, type: "TypeError" });
    }
    const ok = same((D) => {
      const q = new D(":memory:").prepare("SELECT 21 AS a").as(Row);
      const row = q.get() as Row;
      const isRow = row instanceof Row;
      const twice = row.twice;
      q.as(undefined as never);
      const plain = q.get() as object;
      return [isRow, twice, Object.getPrototypeOf(plain) === Object.prototype];
    });
    expect(value(ok)).toEqual([true, 42, true]);
  });
});

describe("binding", () => {
  it("a blob is copied when bound: changing or detaching its buffer later changes nothing", () => {
    const out = same((D) => {
      const db = new D(":memory:");
      db.exec("CREATE TABLE b(v BLOB)");
      const bytes = new Uint8Array([1, 2, 3]);
      const insert = db.prepare("INSERT INTO b VALUES (?)");
      insert.run(bytes);
      bytes.fill(7);
      insert.run(); // the values bound last: the copy
      const buffer = new ArrayBuffer(3);
      new Uint8Array(buffer).set([4, 5, 6]);
      const kept = db.prepare("SELECT ? AS v", [new Uint8Array(buffer)]);
      structuredClone(buffer, { transfer: [buffer] }); // detached
      return [db.query("SELECT v FROM b").values(), kept.get(), buffer.byteLength];
    });
    const blob = new Uint8Array([1, 2, 3]);
    expect(value(out)).toEqual([[[blob], [blob]], { v: new Uint8Array([4, 5, 6]) }, 0]);
  });

  it("a statement finalized by a parameter's getter while binding throws \"Statement has finalized\"", () => {
    for (const method of ["get", "all", "run", "values", "iterate"] as const) {
      const named = same((D) => {
        const db = new D(":memory:");
        const stmt = db.prepare("SELECT $a AS a, $b AS b");
        const params = {
          get $a() {
            stmt.finalize();
            return 1;
          },
          $b: 2,
        };
        return [...(stmt[method](params as never) as Iterable<unknown>)];
      });
      expect(named, method).toMatchObject({ threw: "Statement has finalized" });
      const positional = same((D) => {
        const db = new D(":memory:");
        const stmt = db.prepare("SELECT ? AS a");
        const params: unknown[] = [];
        Object.defineProperty(params, 0, {
          get() {
            stmt.finalize();
            return 1;
          },
          enumerable: true,
        });
        return [...(stmt[method](params as never) as Iterable<unknown>)];
      });
      expect(positional, method).toMatchObject({ threw: "Statement has finalized" });
    }
    // The package: the statement is finalized and the connection goes on.
    const db = new Database();
    const stmt = db.prepare("SELECT $a AS a");
    expect(() =>
      stmt.get({
        get $a() {
          stmt.finalize();
          return 1;
        },
      })
    ).toThrow("Statement has finalized");
    expect(stmt.isFinalized).toBe(true);
    expect(db.query("SELECT 2 AS b").get()).toEqual({ b: 2 });
    // close() from a getter finalizes the statement too (the package's close() finalizes
    // every statement, where bun:sqlite's keeps them usable): the call says the database closed.
    const closing = db.prepare("SELECT $a AS a");
    expect(() =>
      closing.get({
        get $a() {
          db.close();
          return 1;
        },
      })
    ).toThrow("Database has closed");
    expect(db.open).toBe(false);
  });
});

describe("fileControl()", () => {
  it("refuses a typed array under 8 bytes, whatever the op", () => {
    for (const [op, arg] of [
      [constants.SQLITE_FCNTL_PERSIST_WAL, new Int32Array(1)],
      [constants.SQLITE_FCNTL_SIZE_HINT, new Uint8Array(4)],
      [constants.SQLITE_FCNTL_LOCKSTATE, new Uint8Array(7)],
    ] as const) {
      const out = same((D) => new D(":memory:").fileControl(op, arg));
      expect(out, String(op)).toMatchObject({ threw: expect.stringContaining("TypedArray must be at least 8 bytes") });
    }
    const ok = same((D) => new D(":memory:").fileControl(constants.SQLITE_FCNTL_LOCKSTATE, new Uint8Array(8)));
    expect(value(ok)).toBe(12); // SQLITE_NOTFOUND: a memory database has no file
  });
});

describe("strict mode", () => {
  it("numeric keys bind by position: { 0: a, 1: b } fills ?1 and ?2", () => {
    const out = same((D) => {
      const db = new D(":memory:", { strict: true });
      const loose = new D(":memory:");
      return [
        db.prepare("SELECT ?1 AS a, ?2 AS b").get({ 0: "x", 1: "y" } as never),
        db.prepare("SELECT ? AS a, ? AS b").get({ 0: "x", 1: "y" } as never),
        db.prepare("SELECT $x AS a, ? AS b").get({ x: "x", 1: "y" } as never),
        db.prepare("SELECT ?1 AS a").get({ 0: "x", 5: "z" } as never),
        loose.prepare("SELECT ?1 AS a, ?2 AS b").get({ 1: "y" } as never),
      ];
    });
    expect(value(out)).toEqual([
      { a: "x", b: "y" },
      { a: "x", b: "y" },
      { a: "x", b: "y" },
      { a: "x" },
      { a: null, b: "y" },
    ]);
    const missing = same((D) => new D(":memory:", { strict: true }).prepare("SELECT ?1 AS a, ?2 AS b").get({ 1: "y" } as never));
    expect(missing).toMatchObject({ threw: 'Missing parameter "?1"' });
    const bare = same((D) => new D(":memory:", { strict: true }).prepare("SELECT ? AS a, ? AS b").get({ 0: "x" } as never));
    expect(bare).toMatchObject({ threw: 'Missing parameter "?2"' });
  });
});
