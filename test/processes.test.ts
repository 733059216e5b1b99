// Another process of this runtime on the same database: refused while this one has it open,
// with the message naming the cause and mw_mp; nothing of this one's is lost; it opens once
// this one closed. With { processes: true } (mw_mp=1) several processes write at once and
// every row each one acknowledged is there.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { Database } from "../lib/mod.ts";
import { root, runtime, tempDir } from "./helpers.ts";

interface Outcome {
  ok: boolean;
  rows?: number;
  message?: string;
}

// A fresh process: opens the database, inserts one row, reports the row count.
function otherProcess(path: string): Outcome {
  const dir = tempDir();
  const script = join(dir, "other.ts");
  const mod = pathToFileURL(join(root, "lib", "mod.ts")).href;
  writeFileSync(
    script,
    `const m = await import(${JSON.stringify(mod)});
try {
  const db = new m.Database(${JSON.stringify(path)});
  db.run("INSERT INTO t(v) VALUES ('other')");
  const rows = db.query("SELECT count(*) AS n FROM t").get().n;
  db.close();
  console.log(JSON.stringify({ ok: true, rows }));
} catch (e) {
  console.log(JSON.stringify({ ok: false, message: e.message }));
}
`,
  );
  const args = runtime === "bun" ? [script] : ["run", "-A", "--quiet", script];
  const r = spawnSync(process.execPath, args, { cwd: dir, encoding: "utf8", timeout: 30_000 });
  const line = r.stdout.trim().split("\n").pop() ?? "";
  try {
    return JSON.parse(line) as Outcome;
  } catch {
    throw new Error(`the other process failed (status ${r.status}):\n${r.stdout}\n${r.stderr}`);
  }
}

describe("processes", () => {
  it("a second process is refused while the first has the database open, and opens after", () => {
    const path = join(tempDir(), "shared.db");
    const db = new Database(path);
    db.exec("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)");
    for (let i = 0; i < 100; i++) db.run("INSERT INTO t(v) VALUES ('first')");
    const refused = otherProcess(path);
    expect(refused.ok).toBe(false);
    expect(refused.message).toContain("is open in another process");
    expect(refused.message).toContain("mw_mp=1");
    db.run("INSERT INTO t(v) VALUES ('first')");
    db.close();
    expect(otherProcess(path)).toEqual({ ok: true, rows: 102 });
    const again = new Database(path);
    expect(again.query("SELECT count(*) AS n FROM t WHERE v = 'first'").get()).toEqual({ n: 101 });
    again.close();
  });

  it("with processes: true, 4 processes write at once and every acknowledged row is there", async () => {
    const dir = tempDir();
    const path = join(dir, "mp.db");
    const db = new Database(path, { processes: true });
    db.exec("CREATE TABLE t(id INTEGER PRIMARY KEY, who INTEGER, k INTEGER)");
    db.close();
    const mod = pathToFileURL(join(root, "lib", "mod.ts")).href;
    const script = join(dir, "writer.ts");
    writeFileSync(
      script,
      `const m = await import(${JSON.stringify(mod)});
const who = Number(process.argv[2]);
const db = new m.Database(${JSON.stringify(path)}, { processes: true });
const add = db.transaction((k) => db.query("INSERT INTO t(who, k) VALUES (?, ?)").run(who, k));
let acked = 0;
for (let k = 0; k < 300; k++) { add(k); acked++; }
db.close();
console.log(JSON.stringify({ who, acked }));
`,
    );
    const runOne = (who: number) =>
      new Promise<{ who: number; acked: number }>((resolve, reject) => {
        const args = runtime === "bun" ? [script, String(who)] : ["run", "-A", "--quiet", script, String(who)];
        const child = spawn(process.execPath, args, { cwd: dir });
        let out = "";
        let err = "";
        child.stdout.on("data", (d) => (out += d));
        child.stderr.on("data", (d) => (err += d));
        child.on("close", (code) => {
          const line = out.trim().split("\n").pop() ?? "";
          if (code !== 0) reject(new Error(`writer ${who} exited ${code}:\n${out}\n${err}`));
          else resolve(JSON.parse(line));
        });
      });
    const results = await Promise.all([0, 1, 2, 3].map(runOne));
    expect(results.map((r) => r.acked)).toEqual([300, 300, 300, 300]);
    // The last process to close compacted everything and removed the shared files.
    expect(existsSync(path + "-mw")).toBe(false);
    expect(existsSync(path + "-mwshm")).toBe(false);
    const again = new Database(path, { processes: true });
    const rows = again.query("SELECT who, count(*) AS n, count(DISTINCT k) AS d FROM t GROUP BY who ORDER BY who").all();
    expect(rows).toEqual([0, 1, 2, 3].map((who) => ({ who, n: 300, d: 300 })));
    expect(again.query("PRAGMA integrity_check").get()).toEqual({ integrity_check: "ok" });
    again.close();
  }, 120_000);
});
