// The behaviours of @db/sqlite's own test suite that the JSR entry missed (issue 30, "The
// drivers' own test suites"), one test each. @db/sqlite is on JSR, which these machines
// cannot reach: each expectation is its behaviour as written down in
// ../shared/design/db-sqlite-behaviours.md (from its source and tests).
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { Database, SqliteError } from "../lib/jsr.ts";
import { tempDir } from "./helpers.ts";

describe("the JSR entry as @db/sqlite's suite expects", () => {
  it("a failed open throws a SqliteError whose message starts with the code (14:)", () => {
    const missing = join(tempDir(), "no-such-dir", "x.db");
    let error: unknown;
    try {
      new Database(missing, { create: false });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(SqliteError);
    expect((error as Error).message).toMatch(/^14: unable to open database file/);
    expect(() => new Database(join(tempDir(), "absent.db"), { create: false })).toThrow("14:");
  });

  it("JSON texts (SQLite's JSON subtype) are parsed by default, plain text never; disableParseJson() and db.parseJson", () => {
    const db = new Database(":memory:");
    const sql = `SELECT json('[1,2,3]') AS a, json_object('name','alex') AS b, '{"no_subtype": true}' AS c`;
    const parsed = [[1, 2, 3], { name: "alex" }, '{"no_subtype": true}'];
    const texts = ["[1,2,3]", '{"name":"alex"}', '{"no_subtype": true}'];
    const stmt = db.prepare(sql);
    expect(stmt.value()).toEqual(parsed);
    expect(stmt.get()).toEqual({ a: parsed[0], b: parsed[1], c: parsed[2] });
    expect(stmt.all()).toEqual([{ a: parsed[0], b: parsed[1], c: parsed[2] }]);
    expect([...stmt.iter()]).toEqual([{ a: parsed[0], b: parsed[1], c: parsed[2] }]);
    // Each returns the statement.
    expect(stmt.disableParseJson()).toBe(stmt);
    expect(stmt.value()).toEqual(texts);
    expect(stmt.values()).toEqual([texts]);
    expect(stmt.enableParseJson()).toBe(stmt);
    expect(stmt.value()).toEqual(parsed);
    // The database's setting, followed by statements that have none of their own.
    db.parseJson = false;
    expect(stmt.value()).toEqual(parsed); // enabled on the statement
    expect(stmt.defaultParseJson()).toBe(stmt);
    expect(stmt.value()).toEqual(texts);
    expect(db.prepare(sql).value()).toEqual(texts);
    db.parseJson = true;
    expect(stmt.value()).toEqual(parsed);
    expect(new Database(":memory:", { parseJson: false }).prepare(sql).value()).toEqual(texts);
    // A stored JSON text has no subtype any more: text.
    db.exec(`CREATE TABLE t(doc JSON); INSERT INTO t VALUES (json('{"x":1}'))`);
    expect(db.prepare("SELECT doc, json(doc) AS parsed FROM t").get()).toEqual({ doc: '{"x":1}', parsed: { x: 1 } });
    db.close();
  });

  it("disableInt64() reads INTEGER columns as a 32-bit int; enableInt64() and defaultInt64() as 64 bits", () => {
    const db = new Database(":memory:");
    const stmt = db.prepare("SELECT 0x7fffffffffffffff AS max, 9007199254740991 AS safe, 2147483648 AS over, -5 AS neg, 1.5 AS real");
    expect(stmt.get()).toEqual({ max: 0x7fffffffffffffffn, safe: 9007199254740991, over: 2147483648, neg: -5, real: 1.5 });
    expect(stmt.disableInt64()).toBe(stmt);
    expect(stmt.get()).toEqual({ max: -1, safe: -1, over: -2147483648, neg: -5, real: 1.5 });
    expect(stmt.value()).toEqual([-1, -1, -2147483648, -5, 1.5]);
    expect(stmt.enableInt64()).toBe(stmt);
    expect(stmt.value()).toEqual([0x7fffffffffffffffn, 9007199254740991, 2147483648, -5, 1.5]);
    stmt.disableInt64();
    expect(stmt.defaultInt64()).toBe(stmt);
    expect(stmt.value()).toEqual([0x7fffffffffffffffn, 9007199254740991, 2147483648, -5, 1.5]);
    db.close();
  });

  it("the sql tagged template joins its strings with ? and returns all()", () => {
    const db = new Database(":memory:");
    expect(db.sql`select 1, 2, 3`).toEqual([{ "1": 1, "2": 2, "3": 3 }]);
    expect(db.sql`select ${1} as a, ${Math.PI} as b, ${new Uint8Array([1, 2])} as c`).toEqual([
      { a: 1, b: 3.141592653589793, c: new Uint8Array([1, 2]) },
    ]);
    expect(db.sql`select ${"1; DROP TABLE"}`).toEqual([{ "?": "1; DROP TABLE" }]);
    const wide = new Database(":memory:", { int64: true });
    expect(wide.sql`select 1, 2, 3`).toEqual([{ "1": 1, "2": 2, "3": 3 }]);
    wide.close();
    db.close();
  });

  it("a blob reads as an iterator and as a stream, in chunks of 16 KiB", async () => {
    const db = new Database(":memory:");
    db.exec("CREATE TABLE b(id INTEGER PRIMARY KEY, data BLOB)");
    const bytes = new Uint8Array(32 * 1024 + 100);
    for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 7) & 0xff;
    db.exec("INSERT INTO b VALUES (1, ?)", bytes);
    const blob = db.openBlob({ table: "b", column: "data", row: 1, readonly: true });
    const chunks = [...blob];
    expect(chunks.map((c) => c.length)).toEqual([16384, 16384, 100]);
    expect(new Uint8Array(chunks.flatMap((c) => [...c]))).toEqual(bytes);
    const streamed: Uint8Array[] = [];
    for await (const chunk of blob.readable) streamed.push(chunk);
    expect(streamed.map((c) => c.length)).toEqual([16384, 16384, 100]);
    expect(new Uint8Array(streamed.flatMap((c) => [...c]))).toEqual(bytes);
    blob.close();
    db.exec("UPDATE b SET data = zeroblob(32768)");
    const exact = db.openBlob({ table: "b", column: "data", row: 1, readonly: true });
    expect([...exact].map((c) => c.length)).toEqual([16384, 16384]);
    exact.close();
    db.close();
  });

  it("backup() onto the same database throws SQLite's own words", () => {
    const db = new Database(":memory:");
    db.exec("CREATE TABLE t(x)");
    expect(() => db.backup(db)).toThrow(Error);
    expect(() => db.backup(db)).toThrow("source and destination must be distinct");
    const copy = new Database(":memory:");
    expect(db.backup(copy, "main", 1)).toBeGreaterThan(0);
    expect(copy.prepare("SELECT name FROM sqlite_master").values()).toEqual([["t"]]);
    copy.close();
    db.close();
  });
});
