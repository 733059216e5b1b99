// close(): idempotent, finalizes statements, and every use afterwards is an SQLiteError
// (never a crash); Symbol.dispose and `using` on Database and Statement.
import { describe, expect, it } from "vitest";
import { Database, SQLiteError } from "../lib/mod.ts";

function closedError(fn: () => unknown): SQLiteError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(SQLiteError);
    return e as SQLiteError;
  }
  throw new Error("expected an error");
}

describe("close", () => {
  it("close() twice is fine", () => {
    const db = new Database();
    db.close();
    expect(() => db.close()).not.toThrow();
    expect(db.open).toBe(false);
  });

  it("every use of a closed database throws bun:sqlite's 'Database has closed' ('Cannot use a closed database' from query/prepare)", () => {
    const db = new Database();
    db.exec("CREATE TABLE t(v)");
    const tx = db.transaction(() => 1);
    db.close();
    const uses: [string, () => unknown][] = [
      ["query", () => db.query("SELECT 1")],
      ["prepare", () => db.prepare("SELECT 1")],
      ["run", () => db.run("SELECT 1")],
      ["run with params", () => db.run("SELECT ?", 1)],
      ["exec", () => db.exec("SELECT 1")],
      ["transaction", () => tx()],
      ["function", () => db.function("f", () => 1)],
      ["loadExtension", () => db.loadExtension("/nowhere")],
      ["serialize", () => db.serialize()],
      ["deserialize", () => db.deserialize(new Uint8Array(1))],
      ["fileControl", () => db.fileControl(10, 1)],
      ["stats", () => db.stats()],
      ["inTransaction", () => db.inTransaction],
      ["lastInsertRowid", () => db.lastInsertRowid],
      ["changes", () => db.changes],
      ["totalChanges", () => db.totalChanges],
    ];
    for (const [name, use] of uses) {
      const e = closedError(use);
      const words = name === "query" || name === "prepare" ? "Cannot use a closed database" : "Database has closed";
      expect(e.message, name).toBe(words);
      expect(e.code, name).toBe("SQLITE_MISUSE");
    }
  });

  it("close() finalizes statements; using them throws, never crashes", () => {
    const db = new Database();
    db.exec("CREATE TABLE t(v); INSERT INTO t VALUES (1), (2)");
    const q = db.query("SELECT v FROM t");
    const p = db.prepare("SELECT v FROM t WHERE v = ?");
    const it = q.iterate();
    expect(it.next().value).toEqual({ v: 1 });
    db.close();
    expect(q.finalized).toBe(true);
    expect(p.finalized).toBe(true);
    for (const use of [() => q.all(), () => q.get(), () => p.run(1), () => q.values(), () => q.iterate(), () => it.next(), () => q.columnNames, () => q.expandedSql]) {
      expect(closedError(use).message).toBe("Database has closed");
    }
    expect(() => q.finalize()).not.toThrow();
  });

  it("a finalized statement throws 'Statement has finalized' (bun:sqlite's words)", () => {
    const db = new Database();
    const q = db.prepare("SELECT 1");
    q.finalize();
    q.finalize();
    expect(closedError(() => q.get()).message).toBe("Statement has finalized");
    expect(closedError(() => q.paramsCount).message).toBe("Statement has finalized");
    expect(db.query("SELECT 1 AS v").get()).toEqual({ v: 1 });
    db.close();
  });

  it("a custom function cannot close the database or re-enter/finalize the running statement", () => {
    const db = new Database();
    db.exec("CREATE TABLE t(v); INSERT INTO t VALUES (1)");
    let action = "";
    // q is assigned before the function first runs.
    // deno-lint-ignore prefer-const
    let q: ReturnType<typeof db.query>;
    db.function("act", (_v) => {
      if (action === "close") db.close();
      if (action === "reenter") q.get();
      if (action === "finalize") q.finalize();
      if (action === "other") return db.query("SELECT 41 + 1 AS x").get()!.x;
      return 0;
    });
    q = db.query("SELECT act(v) AS r FROM t");
    action = "close";
    expect(() => q.get()).toThrow(/cannot close the database from inside a custom function/);
    action = "reenter";
    expect(() => q.get()).toThrow(/the statement is running/);
    action = "finalize";
    expect(() => q.get()).toThrow(/cannot finalize the statement while it runs/);
    action = "other"; // another statement is fine
    expect(q.get()).toEqual({ r: 42 });
    expect(db.open).toBe(true);
    db.close();
  });

  it("Symbol.dispose closes and finalizes; `using` works on both", () => {
    const db = new Database();
    const q = db.prepare("SELECT 1");
    q[Symbol.dispose]();
    expect(q.finalized).toBe(true);
    db[Symbol.dispose]();
    expect(db.open).toBe(false);

    let outer: Database;
    let stmt: { finalized: boolean };
    {
      using d = new Database();
      outer = d;
      using s = d.prepare("SELECT 2 AS v");
      stmt = s;
      expect(s.get()).toEqual({ v: 2 });
    }
    expect(stmt.finalized).toBe(true);
    expect(outer.open).toBe(false);
  });
});
