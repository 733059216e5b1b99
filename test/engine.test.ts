// The engine seen from the package: it is on by default, refuses what it cannot do with a
// message naming it, counts commits and conflicts, and the last close leaves a plain .db.
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { Database, SQLiteError } from "../lib/mod.ts";
import { tempDir } from "./helpers.ts";

function openError(path: string, options: object): SQLiteError {
  try {
    new Database(path, options).close();
  } catch (e) {
    expect(e).toBeInstanceOf(SQLiteError);
    return e as SQLiteError;
  }
  throw new Error("the open succeeded");
}

describe("the engine", () => {
  it("refuses a bad engine option value, naming the URI parameter, and creates nothing", () => {
    const dir = tempDir();
    const path = join(dir, "bad.db");
    // The package checks profile's values itself; the engine refuses a second way of
    // opening a database this process has open, which it names.
    expect(() => new Database(path, { profile: "bogus" })).toThrow(/option "profile" must be one of/);
    expect(readdirSync(dir)).toEqual([]);
    const other = join(tempDir(), "other.db");
    const first = new Database(other);
    try {
      expect(openError(other, { processes: true }).message).toMatch(/is open in this process without mw_mp=1/);
    } finally {
      first.close();
    }
  });

  it("refuses PRAGMAs that would leave WAL mode", () => {
    using db = new Database(join(tempDir(), "p.db"));
    expect(() => db.exec("PRAGMA journal_mode=DELETE")).toThrow(/journal_mode=DELETE is not supported/);
    expect(() => db.exec("PRAGMA locking_mode=EXCLUSIVE")).toThrow(/locking_mode/);
    expect(db.query("PRAGMA journal_mode").get()).toEqual({ journal_mode: "wal" });
  });

  it("the loser of a race gets SQLITE_BUSY_SNAPSHOT and transaction() runs it again", () => {
    const path = join(tempDir(), "race.db");
    using a = new Database(path);
    using b = new Database(path);
    a.exec("CREATE TABLE c(id INTEGER PRIMARY KEY, v INTEGER); INSERT INTO c VALUES (1, 0)");
    // b reads inside its transaction, then a commits the same row before b commits.
    b.exec("BEGIN");
    expect(b.query("SELECT v FROM c WHERE id = 1").get()).toEqual({ v: 0 });
    a.run("UPDATE c SET v = v + 1 WHERE id = 1");
    b.run("UPDATE c SET v = v + 10 WHERE id = 1");
    let error: unknown;
    try {
      b.exec("COMMIT");
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(SQLiteError);
    expect((error as SQLiteError).extendedCode).toBe("SQLITE_BUSY_SNAPSHOT");
    expect(b.inTransaction).toBe(false);
    expect(b.stats().conflictWrite + b.stats().conflictRead).toBe(1);

    let first = true;
    const bump = b.transaction(() => {
      b.query("SELECT v FROM c WHERE id = 1").get();
      if (first) {
        first = false;
        a.run("UPDATE c SET v = v + 1 WHERE id = 1"); // the other writer wins once
      }
      b.run("UPDATE c SET v = v + 10 WHERE id = 1");
    });
    bump();
    expect(b.lastTransactionAttempts).toBe(2);
    expect(a.query("SELECT v FROM c").get()).toEqual({ v: 12 });
  });

  it("the last close compacts the log away; stock sqlite3 reads the file", () => {
    const dir = tempDir();
    const path = join(dir, "plain.db");
    const a = new Database(path);
    const b = new Database(path);
    a.exec("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)");
    for (let i = 0; i < 200; i++) (i % 2 ? a : b).run("INSERT INTO t(v) VALUES (?)", "x".repeat(i));
    expect(readdirSync(dir)).toContain("plain.db-mw");
    a.close();
    expect(readdirSync(dir)).toContain("plain.db-mw"); // b still has it open
    b.close();
    expect(readdirSync(dir)).toEqual(["plain.db"]);
    const r = spawnSync("/usr/bin/sqlite3", [path, "PRAGMA integrity_check; SELECT count(*) FROM t;"], {
      encoding: "utf8",
    });
    expect(r.stdout.trim().split("\n")).toEqual(["ok", "200"]);
  });
});
