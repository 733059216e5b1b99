#!/usr/bin/env node
// release/check.mjs: the whole release check, each stage timed.
//   1. zig build release    every release target, the artifact checks
//                           (check-artifacts.mjs) and the Android/iOS compile check
//   2. checker self-test    damaged artifacts must fail (check-artifacts.test.mjs)
//   3. npm packages         build-npm.mjs --pack (npm pack of each, offline)
//   4. npm install test     the packed packages load under Bun and Deno (test-npm.mjs)
//   5. manifest             manifest.mjs over zig-out/release
//   6. JSR                  deno publish --dry-run
// Exits non-zero at the first stage that fails.
//   node release/check.mjs [--skip-build]   (--skip-build reuses zig-out/release)
import { spawnSync } from "node:child_process";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const repo = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const node = process.execPath;
const skipBuild = process.argv.includes("--skip-build");

const stages = [
  ["zig build release", [node, "scripts/zig.mjs", "build", "release", "--summary", "none"], skipBuild],
  ["checker self-test", [node, "--test", "--test-reporter=dot", "release/check-artifacts.test.mjs"]],
  ["npm packages", [node, "release/build-npm.mjs", "--pack"]],
  ["npm install test", [node, "release/test-npm.mjs"]],
  ["manifest", [node, "release/manifest.mjs", "--out", "zig-out/npm/manifest.json"]],
  ["deno publish --dry-run", [join(repo, "node_modules", ".bin", process.platform === "win32" ? "deno.cmd" : "deno"), "publish", "--dry-run", "--allow-dirty"]],
];

const times = [];
const t0 = performance.now();
for (const [name, [cmd, ...args], skip] of stages) {
  if (skip) {
    times.push([name, "skipped"]);
    continue;
  }
  console.log(`\n== ${name}: ${[cmd, ...args].map((a) => a.replace(repo + "/", "")).join(" ")}`);
  const start = performance.now();
  const r = spawnSync(cmd, args, { cwd: repo, stdio: "inherit" });
  const secs = ((performance.now() - start) / 1000).toFixed(1);
  times.push([name, `${secs} s`]);
  if (r.status !== 0) {
    console.log(`\nrelease check FAILED at "${name}" (${r.error ? r.error.message : `exit ${r.status ?? r.signal}`}) after ${secs} s`);
    process.exit(1);
  }
}
console.log("\n== release check passed");
for (const [name, t] of times) console.log(`  ${name.padEnd(24)} ${t}`);
console.log(`  ${"total".padEnd(24)} ${((performance.now() - t0) / 1000).toFixed(1)} s`);
