// Opening: options and their checks, the file: URI (escaping, :memory:, URLs), the
// defaults (WAL, synchronous=FULL, busy timeout), readonly/create, and bad paths.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { Database, SQLiteError } from "../lib/mod.ts";
import * as jsr from "../lib/jsr.ts";
import { resolveOptions, toUri } from "../lib/options.ts";
import { tempDir } from "./helpers.ts";

describe("open", () => {
  it("defaults: WAL, synchronous=FULL, a 5 s busy timeout, the engine's VFS", () => {
    const path = join(tempDir(), "a.db");
    const db = new Database(path);
    expect(db.query("PRAGMA journal_mode").get()).toEqual({ journal_mode: "wal" });
    expect(db.query("PRAGMA synchronous").get()).toEqual({ synchronous: 2 });
    expect(db.query("PRAGMA busy_timeout").get()).toEqual({ timeout: 5000 });
    expect(db.filename).toBe(path);
    expect(db.open).toBe(true);
    db.close();
    expect(db.open).toBe(false);
    expect(existsSync(path)).toBe(true);
  });

  it("busyTimeout, multiwriter: false", () => {
    const db = new Database(join(tempDir(), "b.db"), { busyTimeout: 10, multiwriter: false });
    expect(db.query("PRAGMA busy_timeout").get()).toEqual({ timeout: 10 });
    expect(db.stats().engine).toBe(false);
    db.close();
  });

  it(":memory: and the default path open a private in-memory database", () => {
    const a = new Database();
    const b = new Database(":memory:");
    a.exec("CREATE TABLE x(v)");
    expect(b.query("SELECT count(*) AS n FROM sqlite_schema").get()).toEqual({ n: 0 });
    a.close();
    b.close();
  });

  it("a file: URL is opened as its path", () => {
    const dir = tempDir();
    const db = new Database(pathToFileURL(join(dir, "u.db")));
    db.exec("CREATE TABLE x(v)");
    db.close();
    expect(existsSync(join(dir, "u.db"))).toBe(true);
  });

  it("a path with ?, # and % is escaped into the URI, not cut", () => {
    const dir = tempDir();
    const name = "we?ird#name%20.db";
    const db = new Database(join(dir, name));
    db.exec("CREATE TABLE x(v)");
    db.close();
    expect(readdirSync(dir)).toContain(name);
    expect(toUri("/a/b?c#d%e.db", [["vfs", "multiwriter"]])).toBe("file:///a/b%3Fc%23d%25e.db?vfs=multiwriter");
    expect(toUri("rel/x.db", [])).toBe("file:rel/x.db");
    expect(toUri(":memory:", [])).toBe("file::memory:");
  });

  it("engine options become URI parameters", () => {
    const o = resolveOptions({ logMaxMb: 64, readCheck: false, profile: "small", fullFsync: true, processes: true, rebase: false });
    expect(o.engineParams).toEqual([
      ["mw_log_max_mb", "64"],
      ["mw_readcheck", "0"],
      ["mw_profile", "small"],
      ["mw_fullfsync", "1"],
      ["mw_mp", "1"],
      ["mw_rebase", "0"],
    ]);
    expect(toUri("/d/a.db", [["vfs", "multiwriter"], ...o.engineParams])).toBe(
      "file:///d/a.db?vfs=multiwriter&mw_log_max_mb=64&mw_readcheck=0&mw_profile=small&mw_fullfsync=1&mw_mp=1&mw_rebase=0",
    );
    const db = new Database(join(tempDir(), "e.db"), { logMaxMb: 64, readCheck: true });
    expect(db.query("SELECT 1 AS v").get()).toEqual({ v: 1 });
    db.close();
  });

  it("an unknown option is an error naming it, before anything opens", () => {
    const dir = tempDir();
    const path = join(dir, "never.db");
    expect(() => new Database(path, { logMaxMB: 5 } as never)).toThrow(/unknown option "logMaxMB"/);
    expect(() => new Database(path, { readCheck: "yes" } as never)).toThrow(/option "readCheck" must be a boolean/);
    expect(() => new Database(path, { busyTimeout: "100" } as never)).toThrow(TypeError);
    expect(() => new Database(path, { busyTimeout: "100" } as never)).toThrow(/option "busyTimeout" must be a number, got string "100"/);
    expect(() => new Database(path, { profile: 1 } as never)).toThrow(/option "profile" must be a string, got number 1/);
    // Out of range: 2^31 ms and more used to reach SQLite as a negative int (no wait at all);
    // logMaxMb 0 or 0.5 got as far as the engine's URI check.
    for (const [options, words] of [
      [{ busyTimeout: 2 ** 31 }, /"busyTimeout" must be a whole number of milliseconds from 0 to 2147483647/],
      [{ busyTimeout: -1 }, /"busyTimeout" must be a whole number of milliseconds from 0 to 2147483647, got -1/],
      [{ busyTimeout: Number.NaN }, /"busyTimeout" must be a whole number/],
      [{ maxAttempts: -5 }, /"maxAttempts" must be a whole number of attempts from 1/],
      [{ logMaxMb: -1 }, /"logMaxMb" must be a whole number of MiB from 1/],
      [{ logMaxMb: Number.POSITIVE_INFINITY }, /"logMaxMb" must be a whole number/],
      [{ profile: "big" }, /option "profile" must be one of "small", "default", got "big"/],
      [{ busyTimeout: 1.5 }, /"busyTimeout" must be a whole number/],
      [{ maxAttempts: 0 }, /"maxAttempts" must be a whole number of attempts from 1/],
      [{ maxAttempts: 1.5 }, /"maxAttempts" must be a whole number/],
      [{ logMaxMb: 0 }, /"logMaxMb" must be a whole number of MiB from 1 to 1048576/],
      [{ logMaxMb: 0.5 }, /"logMaxMb" must be a whole number/],
      [{ logMaxMb: 1e12 }, /"logMaxMb" must be a whole number/],
    ] as const) {
      expect(() => new Database(path, options)).toThrow(RangeError);
      expect(() => new Database(path, options)).toThrow(words);
    }
    expect(() => new Database(path, { multiwriter: false, readCheck: false })).toThrow(/"readCheck" is an engine option/);
    expect(existsSync(path)).toBe(false);
  });

  it("a database path in a missing folder is SQLITE_CANTOPEN (SQLiteError's message, as bun:sqlite's)", () => {
    const path = join(tempDir(), "missing", "folder", "x.db");
    let err: unknown;
    try {
      new Database(path);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(SQLiteError);
    expect((err as SQLiteError).code).toBe("SQLITE_CANTOPEN");
    expect((err as Error).message).toBe("unable to open database file");
    // The @db/sqlite face names the path.
    expect(() => new jsr.Database(path)).toThrow(path);
  });

  it("readonly: reads work, writes fail with SQLITE_READONLY", () => {
    const path = join(tempDir(), "r.db");
    const w = new Database(path);
    w.exec("CREATE TABLE x(v); INSERT INTO x VALUES (1)");
    w.close();
    const r = new Database(path, { readonly: true });
    expect(r.query("SELECT v FROM x").get()).toEqual({ v: 1 });
    try {
      r.run("INSERT INTO x VALUES (2)");
      expect.unreachable();
    } catch (e) {
      expect((e as SQLiteError).code).toBe("SQLITE_READONLY");
    }
    r.close();
  });

  it("readonly on a rollback-mode file changes no byte of it (not switched to WAL)", () => {
    const path = join(tempDir(), "rollback.db");
    const w = new Database(path, { multiwriter: false });
    w.exec("PRAGMA journal_mode=DELETE; CREATE TABLE x(v); INSERT INTO x VALUES (1), (2)");
    w.close();
    const before = readFileSync(path);
    const r = new Database(path, { readonly: true });
    expect(r.query("SELECT count(*) AS n FROM x").get()).toEqual({ n: 2 });
    expect(() => r.run("INSERT INTO x VALUES (3)")).toThrow(/readonly/);
    r.close();
    expect(readFileSync(path).equals(before)).toBe(true);
    const s = new Database(path, { multiwriter: false, readonly: true });
    expect(s.query("PRAGMA journal_mode").get()).toEqual({ journal_mode: "delete" });
    s.close();
  });

  it("create: false does not create a missing file", () => {
    const dir = tempDir();
    const path = join(dir, "absent.db");
    expect(() => new Database(path, { create: false })).toThrow(SQLiteError);
    expect(existsSync(path)).toBe(false);
  });
});
