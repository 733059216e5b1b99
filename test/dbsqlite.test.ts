// The JSR entry's @db/sqlite face: code written for @db/sqlite runs with one import
// changed. Where bun:sqlite differs, this face behaves as @db/sqlite.
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { Database, SqliteError, Statement } from "../lib/jsr.ts";
import { tempDir } from "./helpers.ts";

describe("@db/sqlite face", () => {
  it("exec() and run() return the changes; Statement.run() too; get() gives undefined", () => {
    const db = new Database(":memory:");
    expect(db.exec("CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT)")).toBe(0);
    expect(db.exec("INSERT INTO t(name) VALUES (?), (?)", "a", "b")).toBe(2);
    expect(db.run("UPDATE t SET name = upper(name)")).toBe(2);
    const stmt = db.prepare("INSERT INTO t(name) VALUES (:name)");
    expect(stmt).toBeInstanceOf(Statement);
    expect(stmt.run({ name: "c" })).toBe(1);
    expect(db.lastInsertRowId).toBe(3);
    expect(db.changes).toBe(1);
    expect(db.totalChanges).toBe(5);
    expect(db.prepare("SELECT * FROM t WHERE id = 99").get()).toBeUndefined();
    expect(db.prepare("SELECT * FROM t WHERE id = 99").value()).toBeUndefined();
    const q = db.prepare("SELECT id, name FROM t ORDER BY id");
    expect(q.columnNames()).toEqual(["id", "name"]);
    expect(q.all<{ id: number; name: string }>().map((r) => r.name)).toEqual(["A", "B", "c"]);
    expect(q.values<[number, string]>()[0]).toEqual([1, "A"]);
    expect(q.value<[number, string]>()).toEqual([1, "A"]);
    expect([...q.iter()].length).toBe(3);
    expect(q.sql).toBe("SELECT id, name FROM t ORDER BY id");
    expect(q.readonly).toBe(true);
    expect(stmt.bindParameterCount).toBe(1);
    db.close();
    expect(db.open).toBe(false);
  });

  it("Date, objects and arrays bind as @db/sqlite binds them; JSON texts are parsed", () => {
    const db = new Database(":memory:");
    db.exec("CREATE TABLE j(d TEXT, doc JSON, list JSON)");
    const when = new Date(Date.UTC(2024, 0, 2, 3, 4, 5));
    db.exec("INSERT INTO j VALUES (?, ?, ?)", when, { a: 1, b: [true, null] }, [1, 2, 3]);
    // Stored text has no JSON subtype: it reads as text, whatever the column's declared type;
    // json() gives it the subtype, and it reads parsed.
    expect(db.prepare("SELECT d, doc, list FROM j").get()).toEqual({
      d: "2024-01-02T03:04:05.000Z",
      doc: '{"a":1,"b":[true,null]}',
      list: "[1,2,3]",
    });
    expect(db.prepare("SELECT json(doc) AS doc FROM j").values()).toEqual([[{ a: 1, b: [true, null] }]]);
    const raw = new Database(":memory:", { parseJson: false });
    raw.exec("CREATE TABLE j(doc JSON); INSERT INTO j VALUES ('{\"x\":1}')");
    expect(raw.prepare("SELECT json(doc) AS doc FROM j").get()).toEqual({ doc: '{"x":1}' });
    raw.close();
    db.close();
  });

  it("bind(), named parameters without prefix, the sql tag, generics", () => {
    const db = new Database(":memory:");
    db.exec("CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT)");
    db.exec("INSERT INTO t(name) VALUES ('x'), ('y')");
    const byId = db.prepare("SELECT name FROM t WHERE id = :id").bind({ id: 2 });
    expect(byId.get<{ name: string }>()?.name).toBe("y");
    expect(byId.get<{ name: string }>({ id: 1 })?.name).toBe("x");
    const id = 1;
    const rows: { name: string }[] = db.sql<{ name: string }>`SELECT name FROM t WHERE id = ${id}`;
    expect(rows).toEqual([{ name: "x" }]);
    db.close();
  });

  it("transactions, functions, aggregates with final, backup, options", () => {
    const dir = tempDir();
    const db = new Database(join(dir, "face.db"));
    db.exec("CREATE TABLE t(v INTEGER)");
    const add = db.transaction((n: number) => {
      for (let i = 1; i <= n; i++) db.exec("INSERT INTO t VALUES (?)", i);
    });
    add.default(4);
    db.function("twice", (x) => Number(x) * 2, { deterministic: true });
    db.aggregate("total", { start: 0, step: (acc: number, v) => acc + Number(v), final: (acc) => `sum=${acc}` });
    expect(db.prepare("SELECT total(twice(v)) AS s FROM t").get()).toEqual({ s: "sum=20" });
    const copy = new Database(":memory:");
    expect(db.backup(copy)).toBeGreaterThan(0);
    expect(copy.prepare("SELECT count(*) AS n FROM t").get()).toEqual({ n: 4 });
    copy.close();
    const mem = new Database(join(dir, "ignored.db"), { memory: true });
    expect(mem.path).toBe(":memory:");
    mem.close();
    let err: unknown;
    try {
      db.exec("INSERT INTO nope VALUES (1)");
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(SqliteError);
    expect(db.core.stats().engine).toBe(true);
    db.close();
  });
});
