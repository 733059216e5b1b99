// Rebase through the package (rebase: true, db.declareReads()): a transaction that lost
// only because another connection changed other rows of the table leaf page it wrote
// commits, merged, when it declared the rows it read and wrote; it is refused as before
// when the same row changed, a declared row changed, or it declared nothing. The engine's own tests
// (native/test/test_engine_rebase.c, the checker) cover the merge itself.
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { Database, SQLiteError } from "../lib/mod.ts";
import { tempDir } from "./helpers.ts";

function setup(): string {
  const path = join(tempDir(), "r.db");
  const db = new Database(path);
  db.exec("CREATE TABLE t(id INTEGER PRIMARY KEY, a INTEGER)");
  const ins = db.prepare("INSERT INTO t VALUES(?, 0)");
  for (let i = 1; i <= 20; i++) ins.run(i);
  db.close();
  return path;
}

/** a and b open transactions at one snapshot; b commits an update of row bRow first. */
function race(a: Database, b: Database, aSql: string, bRow: number, declare: number[] | null): void {
  a.exec("BEGIN");
  b.exec("BEGIN");
  a.query("SELECT a FROM t WHERE id = 20").get();
  b.query("SELECT a FROM t WHERE id = 20").get();
  a.run(aSql);
  b.run("UPDATE t SET a = a + 10 WHERE id = ?", [bRow]);
  if (declare) a.declareReads([...declare, 20]);
  b.exec("COMMIT");
  a.exec("COMMIT");
}

describe("rebase", () => {
  it("merges a commit that lost only on other rows of the page, when it declared its reads", () => {
    const path = setup();
    const a = new Database(path, { rebase: true });
    const b = new Database(path, { rebase: true });
    try {
      race(a, b, "UPDATE t SET a = a + 1 WHERE id = 3", 4, [3]);
      race(a, b, "INSERT INTO t VALUES(100, 5)", 6, [5n, 100n]);
      expect(a.stats().rebases).toBe(2);
      expect(a.stats().conflictWrite).toBe(0);
      expect(b.query("SELECT sum(a) AS s, count(*) AS n FROM t").get()).toEqual({ s: 26, n: 21 });
      expect(a.query("PRAGMA integrity_check").get()).toEqual({ integrity_check: "ok" });
    } finally {
      a.close();
      b.close();
    }
  });

  it("refuses as before: the same row, a declared row changed, nothing declared", () => {
    const path = setup();
    const a = new Database(path, { rebase: true });
    const b = new Database(path, { rebase: true });
    try {
      const cases: [string, number, number[] | null][] = [
        ["UPDATE t SET a = 1 WHERE id = 3", 3, [3]],
        ["UPDATE t SET a = 1 WHERE id = 3", 4, [3, 4]],
        ["UPDATE t SET a = 1 WHERE id = 5", 6, null],
      ];
      for (const [sql, row, declare] of cases) {
        let err: unknown;
        try {
          race(a, b, sql, row, declare);
        } catch (e) {
          err = e;
        }
        expect(err).toBeInstanceOf(SQLiteError);
        expect((err as SQLiteError).errno).toBe(517); // SQLITE_BUSY_SNAPSHOT
        expect(a.inTransaction).toBe(false);
      }
      expect(a.stats().rebases).toBe(0);
      expect(a.stats().rebaseRefused).toBe(2);
      expect(a.query("SELECT sum(a) AS s FROM t").get()).toEqual({ s: 30 });
    } finally {
      a.close();
      b.close();
    }
  });

  it("transaction() with a declaration: counters on one page add up", () => {
    const path = setup();
    const conns = [0, 1, 2].map(() => new Database(path, { rebase: true }));
    try {
      // Interleaved by hand: each transaction reads, the others commit, then it writes.
      let committed = 0;
      for (let round = 0; round < 20; round++) {
        const [x, y, z] = conns;
        x.exec("BEGIN");
        x.query("SELECT a FROM t WHERE id = ?").get(1 + (round % 20));
        y.transaction(() => {
          const row = 1 + ((round + 7) % 20);
          y.run("UPDATE t SET a = a + 1 WHERE id = ?", [row]);
          y.declareReads([row]);
        })();
        z.transaction(() => {
          const row = 1 + ((round + 13) % 20);
          z.run("UPDATE t SET a = a + 1 WHERE id = ?", [row]);
          z.declareReads([row]);
        })();
        x.run("UPDATE t SET a = a + 1 WHERE id = ?", [1 + (round % 20)]);
        x.declareReads([1 + (round % 20)]);
        x.exec("COMMIT");
        committed += 3;
      }
      expect(conns[0].query("SELECT sum(a) AS s FROM t").get()).toEqual({ s: committed });
      expect(conns[0].stats().rebases).toBe(20);
    } finally {
      for (const c of conns) c.close();
    }
  });

  it("declareReads: only inside a transaction; bad input; a database without the engine", () => {
    const path = setup();
    const a = new Database(path, { rebase: true });
    try {
      expect(() => a.declareReads([1])).toThrow(/declareReads\(\) belongs inside a transaction/);
      a.exec("BEGIN");
      expect(() => a.declareReads([1])).toThrow(/after its first write/);
      a.query("SELECT a FROM t WHERE id = 1").get();
      expect(() => a.declareReads([1])).toThrow(/after its first write/);
      a.run("UPDATE t SET a = 3 WHERE id = 1");
      a.declareReads([1]);
      // A transaction that declared and rolled back covers nothing after it.
      a.exec("ROLLBACK");
      const b = new Database(path, { rebase: true });
      try {
        a.exec("BEGIN");
        a.query("SELECT a FROM t WHERE id = 20").get();
        b.run("UPDATE t SET a = 9 WHERE id = 2");
        a.run("UPDATE t SET a = 1 WHERE id = 1");
        expect(() => a.exec("COMMIT")).toThrow(SQLiteError);
        expect(a.stats().rebases).toBe(0);
      } finally {
        b.close();
      }
      expect(() => a.declareReads([1.5])).toThrow(/declareReads\(\) takes integer rowids, got/);
      expect(() => a.declareReads(["1" as unknown as number])).toThrow(TypeError);
      expect(() => a.declareReads([2n ** 64n])).toThrow(TypeError);
    } finally {
      a.close();
    }
    expect(() => a.declareReads([])).toThrow();
    const stock = new Database(join(tempDir(), "s.db"), { multiwriter: false });
    try {
      stock.exec("CREATE TABLE x(y); BEGIN; INSERT INTO x VALUES(1)");
      expect(() => stock.declareReads([])).toThrow(/does not run on the engine/);
    } finally {
      stock.close();
    }
  });
});
