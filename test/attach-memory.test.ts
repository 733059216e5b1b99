// A connection in memory ATTACHes a plain path: the file opens through the engine, as a
// package connection of that path would, so it works beside the engine connections of the
// file (through stock SQLite the ATTACH was "database is locked" while they had it open).
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { Database } from "../lib/mod.ts";
import { tempDir } from "./helpers.ts";

describe("ATTACH from a :memory: connection", () => {
  it("opens the file through the engine, beside the file's own connections", () => {
    const path = join(tempDir(), "x.db");
    const e = new Database(path);
    e.exec("CREATE TABLE t(n)");
    e.run("INSERT INTO t VALUES (1)");
    const m = new Database(":memory:");
    m.run("ATTACH ? AS a", path);
    m.run("INSERT INTO a.t VALUES (2)");
    e.run("INSERT INTO t VALUES (3)");
    expect(m.query("SELECT n FROM a.t ORDER BY n").values()).toEqual([[1], [2], [3]]);
    expect(e.query("SELECT count(*) FROM t").values()[0][0]).toBe(3);
    m.close();
    e.close();
    const stock = new Database(path, { multiwriter: false, readonly: true });
    expect(stock.query("SELECT count(*) FROM t").values()[0][0]).toBe(3);
    stock.close();
  });

  it("creates a new attached file as an engine database (WAL), and multiwriter: false stays stock", () => {
    const dir = tempDir();
    const m = new Database(":memory:");
    m.run("ATTACH ? AS a", join(dir, "new.db"));
    m.exec("CREATE TABLE a.t(n); INSERT INTO a.t VALUES (1)");
    expect(m.query("PRAGMA a.journal_mode").values()[0][0]).toBe("wal");
    m.close();
    const s = new Database(":memory:", { multiwriter: false });
    s.run("ATTACH ? AS b", join(dir, "plain.db"));
    s.exec("CREATE TABLE b.t(n)");
    expect(s.query("PRAGMA b.journal_mode").values()[0][0]).toBe("delete");
    s.close();
  });
});
