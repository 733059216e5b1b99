#!/usr/bin/env node
// bench/runtimes.mjs: finds the JS runtimes the benchmark and the demo run under, from the
// project's own node_modules first (node_modules/.bin/bun, which is npm's placeholder until
// Bun's postinstall ran: then the real binary of the per-platform package
// @oven/bun-<os>-<arch>[-musl][-baseline]), then from PATH.
//   node bench/runtimes.mjs bun|deno   prints the path, exit 1 when none runs
// Reads only; never installs anything.
import { existsSync, readdirSync } from "node:fs";
import { spawnSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const root = join(dirname(fileURLToPath(import.meta.url)), "..");

function runs(bin) {
  const r = spawnSync(bin, ["--version"], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  return r.status === 0;
}

/** The path of a working bun, or null. */
export function findBun() {
  const exe = process.platform === "win32" ? "bun.exe" : "bun";
  const oven = join(root, "node_modules", "@oven");
  // node_modules/.bin/bun works once Bun's postinstall ran (the bootstrap runs it).
  const candidates = [join(root, "node_modules", ".bin", exe)];
  if (existsSync(oven)) {
    const prefix = `bun-${process.platform === "win32" ? "windows" : process.platform}-${process.arch}`;
    // Prefer the plain build, then -baseline, then musl variants.
    const dirs = readdirSync(oven).filter((d) => d.startsWith(prefix)).sort((a, b) => a.length - b.length);
    for (const d of dirs) candidates.push(join(oven, d, "bin", exe));
  }
  candidates.push(exe);
  for (const c of candidates) if ((c === exe || existsSync(c)) && runs(c)) return c;
  return null;
}

/** The path of a working deno, or null. */
export function findDeno() {
  const exe = process.platform === "win32" ? "deno.exe" : "deno";
  for (const c of [join(root, "node_modules", ".bin", exe), exe]) if ((c === exe || existsSync(c)) && runs(c)) return c;
  return null;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const which = process.argv[2];
  const path = which === "bun" ? findBun() : which === "deno" ? findDeno() : undefined;
  if (path === undefined) {
    process.stderr.write("usage: node bench/runtimes.mjs bun|deno\n");
    process.exit(2);
  }
  if (!path) {
    process.stderr.write(`no working ${which} found (run node scripts/bootstrap.mjs)\n`);
    process.exit(1);
  }
  process.stdout.write(path + "\n");
}
