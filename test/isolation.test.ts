// The isolation and atomicity holes of issue 8, through the TypeScript API (the C side of
// each is native/test/test_engine_isolation.c): several commits inside one snapshot held by
// an open iterator, readCheck: false and the structure of the b-tree, a relocated commit
// that read user_version, a key range read through a merged interior page, a transaction
// over an attached engine database, a lost RELEASE, and PRAGMA data_version.
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { Database, SQLiteError } from "../lib/mod.ts";
import { tempDir } from "./helpers.ts";

const pad = (n: number, c: string) => c.repeat(n);
const integrity = (db: Database) => db.query("PRAGMA integrity_check").values()[0][0];

describe("isolation through the API", () => {
  it("commits inside a snapshot held by iterate() are validated: the b-tree stays whole", () => {
    const path = join(tempDir(), "held.db");
    const a = new Database(path);
    const b = new Database(path);
    a.exec("CREATE TABLE r(k); INSERT INTO r VALUES (1), (2); CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)");
    const fill = a.prepare("INSERT INTO t VALUES (?, ?)");
    for (let i = 1; i <= 40; i++) fill.run(i, pad(900, "x"));
    const ins = a.prepare("INSERT INTO t VALUES (?, ?)");
    let lost = 0;
    for (const _row of a.prepare("SELECT k FROM r").iterate()) {
      // Each run() commits inside the iterator's snapshot: a new right-most leaf, filled.
      for (let k = 1000; k < 1004; k++) ins.run(k, pad(900, "a"));
      b.run("INSERT INTO t VALUES (1004, 'small')"); // into the leaf a created
      try {
        ins.run(1005, pad(900, "a")); // overflows a's stale copy of that leaf
      } catch (e) {
        expect((e as SQLiteError).code).toBe("SQLITE_BUSY_SNAPSHOT");
        lost++;
      }
      break;
    }
    expect(integrity(b)).toBe("ok");
    expect(b.query("SELECT count(*) AS n FROM t WHERE id >= 1000").get()!.n).toBe(5 + (lost ? 0 : 1));
    a.close();
    b.close();
  });

  it("readCheck: false still validates the leaf a split takes its divider from", () => {
    const path = join(tempDir(), "rc0.db");
    const a = new Database(path, { readCheck: false });
    const b = new Database(path, { readCheck: false });
    a.exec("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)");
    const fill = a.prepare("INSERT INTO t VALUES (?, ?)");
    for (let i = 1; i <= 44; i++) fill.run(i, pad(900, "x")); // the right-most leaf is full
    a.exec("BEGIN");
    expect(a.query("SELECT count(*) AS n FROM t").get()!.n).toBe(44);
    b.run("INSERT INTO t VALUES (100, 'small')"); // still fits in that leaf
    a.run("INSERT INTO t VALUES (101, ?)", pad(900, "a")); // overflows a's stale copy
    let committed = true;
    try {
      a.exec("COMMIT");
    } catch (e) {
      expect((e as SQLiteError).code).toBe("SQLITE_BUSY_SNAPSHOT");
      committed = false;
    }
    expect(integrity(b)).toBe("ok");
    expect(b.query("SELECT count(*) AS n FROM t").get()!.n).toBe(committed ? 46 : 45);
    a.close();
    b.close();
  });

  it("a commit that grew the file after reading user_version is refused when it changed", () => {
    const path = join(tempDir(), "uv.db");
    const t = new Database(path);
    const u = new Database(path);
    t.exec("CREATE TABLE r(k); CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)");
    t.exec("BEGIN");
    expect(t.query("PRAGMA user_version").values()[0][0]).toBe(0);
    const ins = t.prepare("INSERT INTO t VALUES (?, ?)");
    for (let i = 1; i <= 20; i++) ins.run(i, pad(3000, "x"));
    u.exec("BEGIN; PRAGMA user_version = 7; INSERT INTO r VALUES (zeroblob(3000)), (zeroblob(3000)); COMMIT");
    expect(() => t.exec("COMMIT")).toThrow(SQLiteError);
    expect(u.query("SELECT count(*) AS n FROM t").get()!.n).toBe(0);
    t.close();
    u.close();
  });

  it("max(id) read through the root is not kept stale by a merge of the root", () => {
    const path = join(tempDir(), "merge.db");
    const t = new Database(path);
    const u = new Database(path);
    t.exec("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)");
    const fill = t.prepare("INSERT INTO t VALUES (?, ?)");
    for (let i = 1; i <= 40; i++) fill.run(i * 10, pad(900, "x"));
    t.exec("BEGIN");
    expect(t.query("SELECT max(id) AS m FROM t").get()!.m).toBe(400);
    for (let i = 1; i <= 4; i++) t.run("INSERT INTO t VALUES (?, ?)", 100 + i, pad(900, "m"));
    const more = u.prepare("INSERT INTO t VALUES (?, ?)");
    u.transaction(() => {
      for (let i = 1; i <= 8; i++) more.run(400 + i, pad(900, "u"));
    })();
    // T read the old max(id): committing after U's rows would not be serializable.
    expect(() => t.exec("COMMIT")).toThrow(SQLiteError);
    expect(integrity(u)).toBe("ok");
    t.close();
    u.close();
  });

  it("a transaction over main and an attached database commits both halves or neither", () => {
    const dir = tempDir();
    const a = new Database(join(dir, "main.db"));
    const other = new Database(join(dir, "b.db"));
    other.exec("CREATE TABLE acct(id INTEGER PRIMARY KEY, n INTEGER); INSERT INTO acct VALUES (1, 100)");
    a.exec("CREATE TABLE acct(id INTEGER PRIMARY KEY, n INTEGER); INSERT INTO acct VALUES (1, 100)");
    a.exec(`ATTACH 'file:${join(dir, "b.db")}?vfs=multiwriter' AS b`);
    const move = () => {
      a.exec("BEGIN");
      a.run("UPDATE main.acct SET n = n - 10");
      a.run("UPDATE b.acct SET n = n + 10");
    };
    move();
    other.run("UPDATE acct SET n = n + 1"); // b changes first
    expect(() => a.exec("COMMIT")).toThrow(SQLiteError);
    expect(a.inTransaction).toBe(false);
    expect(a.query("SELECT n FROM main.acct").get()!.n).toBe(100); // not half committed
    expect(a.query("SELECT n FROM b.acct").get()!.n).toBe(101);
    // transaction() runs the whole function again and commits both halves once.
    const tx = a.transaction(() => {
      a.run("UPDATE main.acct SET n = n - 10");
      a.run("UPDATE b.acct SET n = n + 10");
    });
    tx();
    expect(a.query("SELECT n FROM main.acct").get()!.n).toBe(90);
    expect(other.query("SELECT n FROM acct").get()!.n).toBe(111);
    a.close();
    other.close();
  });

  it("a lost RELEASE returns the connection to autocommit", () => {
    const path = join(tempDir(), "release.db");
    const a = new Database(path);
    const b = new Database(path);
    a.exec("CREATE TABLE c(id INTEGER PRIMARY KEY, n INTEGER); INSERT INTO c VALUES (1, 0)");
    a.exec("SAVEPOINT s1");
    a.run("UPDATE c SET n = n + 1");
    b.run("UPDATE c SET n = n + 10");
    expect(() => a.exec("RELEASE s1")).toThrow(SQLiteError);
    expect(a.inTransaction).toBe(false);
    // The next statement commits on its own and is visible to others at once.
    a.run("INSERT INTO c VALUES (2, 5)");
    expect(b.query("SELECT count(*) AS n FROM c").get()!.n).toBe(2);
    expect(b.query("SELECT n FROM c WHERE id = 1").get()!.n).toBe(10);
    a.close();
    b.close();
  });

  it("PRAGMA data_version stays put across reads and its own commits, and moves when another connection commits", () => {
    const path = join(tempDir(), "dv.db");
    const a = new Database(path);
    const b = new Database(path);
    a.exec("CREATE TABLE r(k)");
    const dv = a.prepare("PRAGMA data_version");
    const read = () => dv.values()[0][0];
    const v0 = read();
    expect(read()).toBe(v0);
    a.query("SELECT count(*) FROM r").get();
    expect(read()).toBe(v0);
    b.run("INSERT INTO r VALUES (1)");
    const v1 = read();
    expect(v1).not.toBe(v0);
    expect(read()).toBe(v1);
    a.run("INSERT INTO r VALUES (2)");
    expect(read()).toBe(v1);
    a.transaction(() => {
      a.run("INSERT INTO r VALUES (3)");
      a.run("UPDATE r SET k = k + 10 WHERE k = 1");
    })();
    expect(read()).toBe(v1);
    expect(a.query("SELECT count(*) AS n FROM r").get()!.n).toBe(3);
    b.run("DELETE FROM r WHERE k = 2");
    expect(read()).not.toBe(v1);
    expect(a.query("SELECT count(*) AS n FROM r").get()!.n).toBe(2);
    a.close();
    b.close();
  });
});
