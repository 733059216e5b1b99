// bench/server/common.mjs: what run.mjs and faults.mjs share: the programs they run, the
// child processes they start (every one killed when the driver exits, on failure too), and
// the stock sqlite3 shell that checks the files.
import { spawn, spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { findBun, findDeno, root } from "../runtimes.mjs";

export { root };
export const WRK = "/usr/bin/wrk";
export const SQLITE3 = "/usr/bin/sqlite3";

/** bun and deno as needed, or a message (through `usage`) that says what is missing. */
export function runtimes({ bun, deno }, usage) {
  for (const [bin, what] of [[WRK, "wrk"], [SQLITE3, "the sqlite3 shell"]]) if (!existsSync(bin)) usage(`needs ${what} at ${bin}`);
  const BUN = bun ? findBun() : null;
  // The deno binary itself, not npm's node wrapper (node_modules/.bin/deno), so that the pid
  // we signal and measure is the server's.
  let DENO = deno ? findDeno() : null;
  if (DENO && existsSync(join(root, "node_modules", "deno", "deno"))) DENO = join(root, "node_modules", "deno", "deno");
  if (bun && !BUN) usage("no bun (run node scripts/bootstrap.mjs)");
  if (deno && !DENO) usage("no deno (run node scripts/bootstrap.mjs)");
  if (!existsSync(join(root, "zig-out", "lib")) && !process.env.SQLITE_MULTIWRITER_LIB) {
    usage("no native library in zig-out/lib (node scripts/zig.mjs build)");
  }
  return { BUN, DENO };
}

/** The children still running; killChildren() ends them (SIGKILL). */
export const children = new Set();
export function killChildren() {
  for (const c of children) {
    try {
      process.kill(c.pid, "SIGKILL");
    } catch { /* gone */ }
  }
  children.clear();
}

/** At the driver's exit (normal, a signal, an uncaught error): the children killed, then
 * `also()` (e.g. the work directory removed). Returns that cleanup, for an early call. */
export function cleanupAtExit(also) {
  const cleanup = () => {
    killChildren();
    also();
  };
  process.on("exit", cleanup);
  for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(sig, () => { cleanup(); process.exit(130); });
  process.on("uncaughtException", (e) => { console.error(e); cleanup(); process.exit(1); });
  return cleanup;
}

/** Starts a child with its output kept in `.out`; `.done` resolves to { code, signal } at its exit. */
export function start(cmd, args, env) {
  const child = spawn(cmd, args, { cwd: root, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  const rec = { pid: child.pid, child, out: "", exited: null };
  child.stdout.on("data", (d) => { rec.out += d; });
  child.stderr.on("data", (d) => { rec.out += d; });
  rec.done = new Promise((resolve) => child.on("exit", (code, signal) => {
    rec.exited = { code, signal };
    children.delete(rec);
    resolve(rec.exited);
  }));
  children.add(rec);
  return rec;
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Runs SQL (and dot-commands, one per argument) through /usr/bin/sqlite3 on db: rows of fields. */
export function sql(db, ...commands) {
  const r = spawnSync(SQLITE3, ["-batch", "-noheader", "-separator", "|", db, ...commands], { encoding: "utf8" });
  if (r.status !== 0 || r.stderr.trim()) throw new Error(`sqlite3: ${r.stderr.trim()}`);
  return r.stdout.trim().split("\n").map((l) => l.split("|"));
}
