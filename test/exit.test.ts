// A process that ends normally with engine databases still open: the package closes them
// at exit (as bun:sqlite does), so only the .db file is left and it holds the writes.
import { execFileSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { Database } from "../lib/mod.ts";
import { runtime, tempDir } from "./helpers.ts";

const child = fileURLToPath(new URL("./fixtures/exit-child.ts", import.meta.url));

function runChild(path: string, how: string[]): string {
  const args = runtime === "bun" ? [child, path, ...how] : ["run", "-A", child, path, ...how];
  return execFileSync(process.execPath, args, { stdio: "pipe", timeout: 60_000, encoding: "utf8" });
}

const workerMain = fileURLToPath(new URL("./fixtures/exit-worker-main.ts", import.meta.url));

describe("databases left open at exit", () => {
  // Deno.exit() fires no node:process "exit" event: the package listens for "unload" too.
  const ends = [[], ["exit"], ["exit", "tx"], ["exit", "iter"]];
  if (runtime === "deno") ends.push(["deno-exit"], ["deno-exit", "tx"], ["deno-exit", "iter"]);
  for (const how of ends) {
    const through = how[0] === "exit" ? "process.exit()" : how[0] === "deno-exit" ? "Deno.exit()" : "";
    const left = how[1] === "tx" ? ", a transaction open" : how[1] === "iter" ? ", an iterate() unfinished" : "";
    it(`are closed when the process ends ${through ? `through ${through}` : "normally"}${left}`, () => {
      const dir = tempDir();
      const path = join(dir, "left.db");
      expect(runChild(path, how)).toContain("open at exit: false false");
      expect(readdirSync(dir)).toEqual(["left.db"]);
      const db = new Database(path);
      expect(db.query("SELECT count(*) AS n FROM t").get()).toEqual({ n: 1 }); // not the open transaction's row
      db.close();
    });
  }

  // A Worker's database is not closed by the package's exit listener (it runs on the main
  // thread only, and Bun runs none in a Worker that is still running, terminated or
  // unref'd): the engine closes it at exit (exit() under Deno, quick_exit() under Bun).
  // With processes: true the last process finishes it too (and removes the shared file).
  const workerEnds = runtime === "bun" ? ["running", "terminated", "unref"] : ["running", "terminated"];
  const cases = [...workerEnds.map((how) => [how, ""]), ["running", "processes"]];
  for (const [how, mode] of cases) {
    it(`are closed when the process ends with a Worker ${how} that left one open${mode ? ` (${mode}: true)` : ""}`, () => {
      const dir = tempDir();
      const path = join(dir, "worker.db");
      const own = [workerMain, path, how, ...(mode ? [mode] : [])];
      const args = runtime === "bun" ? own : ["run", "-A", ...own];
      execFileSync(process.execPath, args, { stdio: "pipe", timeout: 60_000, encoding: "utf8" });
      expect(readdirSync(dir)).toEqual(["worker.db"]);
      const db = new Database(path);
      expect(db.query("SELECT count(*) AS n FROM t").get()).toEqual({ n: 50 });
      db.close();
    });
  }
});
