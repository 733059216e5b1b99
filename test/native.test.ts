// The native side seen from the package: the extension in Debian's sqlite3 shell, the
// vendored SQLite's source id and checksums, and loadExtension() into a connection.
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { Database, mwVersion, SQLiteError, sourceId } from "../lib/mod.ts";
import { libDir, root, tempDir } from "./helpers.ts";

const SHELL = "/usr/bin/sqlite3";
const extension = join(libDir, "libmultiwriter"); // the shell adds .so

function shell(input: string, args: string[] = [":memory:"]) {
  if (!existsSync(SHELL)) throw new Error(`${SHELL} is missing: apt-get install sqlite3`);
  const r = spawnSync(SHELL, ["-batch", ...args], { input, encoding: "utf8", timeout: 20_000 });
  return { out: r.stdout.trim(), err: r.stderr.trim(), status: r.status };
}

describe("native", () => {
  it("the extension loads into Debian's sqlite3 shell and answers mw_version()", () => {
    const r = shell(`.load ${extension}\nSELECT mw_version();\nSELECT sqlite_version() < '3.54';\n`);
    expect(r.err).toBe("");
    expect(r.out.split("\n")).toEqual([mwVersion(), "1"]);
  });

  it("the shell writes through vfs=multiwriter and the package reads it", () => {
    const path = join(tempDir(), "shell.db");
    const r = shell(
      `.load ${extension}\n.open file:${path}?vfs=multiwriter\n` +
        "CREATE TABLE t(v); INSERT INTO t VALUES ('from the shell');\n",
    );
    expect(r.err).toBe("");
    const db = new Database(path);
    expect(db.query("SELECT v FROM t").get()).toEqual({ v: "from the shell" });
    db.close();
  });

  it("sqlite3_sourceid() of the loaded library is the one recorded in native/sqlite/SOURCE.md", () => {
    const md = readFileSync(join(root, "native/sqlite/SOURCE.md"), "utf8");
    const recorded = /\| source id \| `([^`]+)` \|/.exec(md)?.[1];
    expect(recorded).toBeDefined();
    expect(sourceId()).toBe(recorded);
  });

  it("native/sqlite/check.sh verifies the vendored files", () => {
    const r = spawnSync("bash", [join(root, "native/sqlite/check.sh")], { encoding: "utf8" });
    expect(r.stderr).toBe("");
    expect(r.status).toBe(0);
    expect(r.stdout).toContain("checksums match");
  });

  it("loadExtension(): a missing file is an SQLiteError naming it", () => {
    const db = new Database();
    const missing = join(tempDir(), "nope");
    expect(() => db.loadExtension(missing)).toThrow(SQLiteError);
    expect(() => db.loadExtension(missing)).toThrow(missing);
    // Loading stays switched off for SQL.
    expect(() => db.query(`SELECT load_extension('${missing}')`).get()).toThrow(/not authorized/);
    db.close();
  });

  it("loadExtension(): loads an extension with an explicit entry point", () => {
    const db = new Database();
    db.loadExtension(extension, "sqlite3_multiwriter_init");
    expect(db.query("SELECT mw_version() AS v").get()).toEqual({ v: mwVersion() });
    expect(() => db.loadExtension(extension, "no_such_entry")).toThrow(/no_such_entry/);
    db.close();
  });
});
