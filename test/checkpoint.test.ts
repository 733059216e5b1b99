// PRAGMA wal_checkpoint as backups by copy and cron jobs use it (the C side, with every mode,
// a crash and processes: native/test/test_engine_checkpoint.c). While connections stay open,
// a checkpoint that answers busy = 0 leaves the .db holding every commit acknowledged before
// it: a byte copy of the file is a database that stock SQLite (the sqlite3 shell, or the
// package with multiwriter: false) reads whole. An open read transaction holds it back: busy.
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { Database } from "../lib/mod.ts";
import { tempDir } from "./helpers.ts";

function checkpoint(db: Database, mode = "TRUNCATE"): number[] {
  return db.query(`PRAGMA wal_checkpoint(${mode})`).values()[0] as number[];
}

// Rows of t in a copy of the file read by stock SQLite (null when it is not a database).
function rowsOfCopy(path: string): number | null {
  const copy = `${path}.copy`;
  copyFileSync(path, copy);
  let stock: Database | undefined;
  try {
    stock = new Database(copy, { multiwriter: false, readonly: true });
    expect(stock.query("PRAGMA integrity_check").values()[0][0]).toBe("ok");
    return stock.query("SELECT count(*) FROM t").values()[0][0] as number;
  } catch (e) {
    if (String(e).includes("not a database")) return null;
    throw e;
  } finally {
    stock?.close();
  }
}

describe("PRAGMA wal_checkpoint", () => {
  it("leaves a .db that a copy can be taken of while connections stay open", () => {
    const path = join(tempDir(), "shop.db");
    const a = new Database(path);
    const b = new Database(path);
    a.exec("CREATE TABLE t(id INTEGER PRIMARY KEY, who TEXT)");
    for (let i = 0; i < 300; i++) {
      a.run("INSERT INTO t(who) VALUES ('a')");
      b.run("INSERT INTO t(who) VALUES ('b')");
    }
    expect(rowsOfCopy(path)).toBeNull(); // before: the engine's mark keeps stock SQLite out
    expect(checkpoint(a)).toEqual([0, 0, 0]);
    expect(rowsOfCopy(path)).toBe(600);
    // The sqlite3 shell, as a cron job would run it on the copy.
    if (existsSync("/usr/bin/sqlite3")) {
      const copy = `${path}.shell`;
      copyFileSync(path, copy);
      const r = spawnSync("/usr/bin/sqlite3", [copy, "SELECT count(*) FROM t; PRAGMA integrity_check;"], { encoding: "utf8" });
      expect(r.stderr).toBe("");
      expect(r.stdout.trim().split("\n")).toEqual(["600", "ok"]);
    }
    b.run("INSERT INTO t(who) VALUES ('b')"); // the next commit marks the file again
    expect(rowsOfCopy(path)).toBeNull();
    expect(checkpoint(b, "PASSIVE")).toEqual([0, 0, 0]);
    expect(rowsOfCopy(path)).toBe(601);
    a.close();
    b.close();
  });

  it("answers busy while another connection's read transaction holds the file back", () => {
    const path = join(tempDir(), "reader.db");
    const a = new Database(path);
    const r = new Database(path);
    a.exec("CREATE TABLE t(id INTEGER PRIMARY KEY)");
    a.run("INSERT INTO t DEFAULT VALUES");
    r.exec("BEGIN");
    expect(r.query("SELECT count(*) FROM t").values()[0][0]).toBe(1);
    a.run("INSERT INTO t DEFAULT VALUES");
    expect(checkpoint(a)).toEqual([1, -1, -1]);
    expect(r.query("SELECT count(*) FROM t").values()[0][0]).toBe(1);
    r.exec("COMMIT");
    expect(checkpoint(a)).toEqual([0, 0, 0]);
    expect(rowsOfCopy(path)).toBe(2);
    a.close();
    r.close();
  });
});
