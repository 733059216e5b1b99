// PRAGMAs that reach an engine file without naming it (the C side, every journal mode:
// native/test/test_engine_bypass.c). SQLite applies an unqualified locking_mode or
// journal_mode to every attached database but tells only main's file, so a connection
// whose main database is not on the engine (":memory:", or multiwriter: false) can put
// an ATTACHed engine file in a mode that bypasses the engine. Its writes were then
// acknowledged and never reached the file; now each fails, and every write that
// succeeded is in the file afterwards.
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { Database, SQLiteError } from "../lib/mod.ts";
import { tempDir } from "./helpers.ts";

type MainKind = "memory" | "stock file";

function openMain(kind: MainKind, dir: string): Database {
  return kind === "memory" ? new Database(":memory:") : new Database(join(dir, "main.db"), { multiwriter: false });
}

// 5 autocommit inserts and 5 in BEGIN...COMMIT through `m`; returns how many succeeded
// and the error codes of those that did not.
function writeTen(m: Database): { acked: number; codes: Set<string> } {
  let acked = 0;
  const codes = new Set<string>();
  const fail = (e: unknown) => codes.add(e instanceof SQLiteError ? e.code : String(e));
  for (let i = 0; i < 5; i++) {
    try {
      m.run("INSERT INTO a.t VALUES ('m', ?)", i);
      acked++;
    } catch (e) {
      fail(e);
    }
  }
  for (let i = 0; i < 5; i++) {
    try {
      m.exec("BEGIN");
      m.run("INSERT INTO a.t VALUES ('m', ?)", 10 + i);
      m.exec("COMMIT");
      acked++;
    } catch (e) {
      fail(e);
      if (m.inTransaction) m.exec("ROLLBACK");
    }
  }
  return { acked, codes };
}

// An engine file x.db with table t, its engine connection, and a connection whose main is
// of `kind` (not yet attached to it).
function setup(kind: MainKind): { path: string; e: Database; m: Database } {
  const dir = tempDir();
  const path = join(dir, "x.db");
  const e = new Database(path);
  e.exec("CREATE TABLE t(src, n)");
  return { path, e, m: openMain(kind, dir) };
}

function countInFile(path: string, src: string): number {
  const db = new Database(path);
  try {
    expect(db.query("PRAGMA integrity_check").values()[0][0]).toBe("ok");
    return db.query("SELECT count(*) AS n FROM t WHERE src = ?").get(src)!.n as number;
  } finally {
    db.close();
  }
}

describe("an unqualified PRAGMA from a connection whose main is not on the engine", () => {
  for (const kind of ["memory", "stock file"] as MainKind[]) {
    it(`locking_mode=EXCLUSIVE (main ${kind}): writes to the attached engine file fail, none is lost`, () => {
      const { path, e, m } = setup(kind);
      m.exec(`ATTACH 'file:${path}?vfs=multiwriter' AS a`);
      m.exec("PRAGMA locking_mode=EXCLUSIVE");
      const { acked, codes } = writeTen(m);
      expect(acked).toBe(0);
      expect([...codes]).toEqual(["SQLITE_IOERR_LOCK"]);
      // Back to normal locking, the attached file takes writes again.
      m.exec("PRAGMA locking_mode=NORMAL");
      m.run("INSERT INTO a.t VALUES ('m', 99)");
      for (let i = 0; i < 5; i++) e.run("INSERT INTO t VALUES ('e', ?)", i);
      expect(e.query("SELECT count(*) AS n FROM t WHERE src = 'm'").get()!.n).toBe(1);
      m.close();
      e.close();
      expect(countInFile(path, "m")).toBe(1);
      expect(countInFile(path, "e")).toBe(5);
    });

    it(`locking_mode=EXCLUSIVE before the ATTACH (main ${kind}): the ATTACH fails`, () => {
      const { path, e, m } = setup(kind);
      m.exec("PRAGMA locking_mode=EXCLUSIVE");
      expect(() => m.exec(`ATTACH 'file:${path}?vfs=multiwriter' AS a`)).toThrow(SQLiteError);
      m.close();
      e.run("INSERT INTO t VALUES ('e', 1)");
      e.close();
      expect(countInFile(path, "e")).toBe(1);
    });

    it(`journal_mode=DELETE (main ${kind}): refused for the attached engine file, writes stay in WAL`, () => {
      const { path, e, m } = setup(kind);
      m.exec(`ATTACH 'file:${path}?vfs=multiwriter' AS a`);
      m.query("SELECT count(*) FROM a.t").get(); // the attached file's WAL is open
      let code = "";
      try {
        m.exec("PRAGMA journal_mode=DELETE");
      } catch (err) {
        code = (err as SQLiteError).code;
      }
      expect(code).toBe("SQLITE_IOERR_LOCK");
      const { acked } = writeTen(m);
      expect(acked).toBe(10);
      expect(m.query("PRAGMA a.journal_mode").values()[0][0]).toBe("wal");
      m.close();
      e.close();
      expect(countInFile(path, "m")).toBe(10);
    });
  }
});
