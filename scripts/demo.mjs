#!/usr/bin/env node
// scripts/demo.mjs: `npm run demo`. Brings the toolchain (scripts/bootstrap.mjs), builds
// the native library when it is missing or older than its sources, then runs the demo
// (bench/ts/demo.ts) under Bun: several Workers writing one database, stock SQLite
// against the engine, about 10 s. Exits with the demo's status.
import { existsSync, readdirSync, statSync } from "node:fs";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { bootstrap, root } from "./bootstrap.mjs";
import { findBun } from "../bench/runtimes.mjs";

function libraryName() {
  if (process.platform === "win32") return join("zig-out", "bin", "mwsqlite3.dll");
  return join("zig-out", "lib", process.platform === "darwin" ? "libmwsqlite3.dylib" : "libmwsqlite3.so");
}

/** Newest modification time of the files under the given paths. */
function newest(paths) {
  let t = 0;
  const walk = (p) => {
    if (!existsSync(p)) return;
    const s = statSync(p);
    if (s.isDirectory()) for (const e of readdirSync(p)) walk(join(p, e));
    else t = Math.max(t, s.mtimeMs);
  };
  for (const p of paths) walk(join(root, p));
  return t;
}

const { zig } = bootstrap();
const lib = join(root, libraryName());
const sources = newest(["native/src", "native/include", "native/sqlite", "build.zig"]);
if (!existsSync(lib) || statSync(lib).mtimeMs < sources) {
  console.log(`[demo] building the native library (${existsSync(lib) ? "sources changed" : "first build"}), a minute or two...`);
  const r = spawnSync(zig, ["build"], { cwd: root, stdio: "inherit" });
  if (r.status !== 0) {
    console.error("[demo] the native build failed");
    process.exit(1);
  }
}
const bun = findBun();
if (!bun) {
  console.error("[demo] no working bun found in node_modules: run node scripts/bootstrap.mjs");
  process.exit(1);
}
const r = spawnSync(bun, [join(root, "bench", "ts", "demo.ts")], { cwd: root, stdio: "inherit" });
process.exit(r.status ?? 1);
