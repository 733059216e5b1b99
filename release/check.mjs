#!/usr/bin/env node
// release/check.mjs: the whole release check, each stage timed.
//   1. zig build release    every release target, the artifact checks
//                           (check-artifacts.mjs) and the Android/iOS compile check
//   2. checker self-test    damaged artifacts must fail (check-artifacts.test.mjs)
//   3. npm packages         build-npm.mjs --pack (npm pack of each, offline)
//   4. npm install test     the packed packages, installed by npm and by bun add, load
//                           under Bun and Deno (test-npm.mjs)
//   5. manifest             manifest.mjs over zig-out/release
//   5b. manifest in lib/    lib/ffi/manifest.generated.ts (what the Deno download checks
//                           against) must be what manifest.mjs --ts writes for this build
//   5c. publication         npm publish --dry-run of every package, the release assets
//                           checked with sha256sum -c SHA256SUMS, deno doc --lint
//                           (release/publish-dry-run.mjs)
//   5d. compiled executables bun build --compile and deno compile of an application, the
//                           library beside the executable or inside it (test-compile.mjs)
//   6. JSR                  deno publish --dry-run
//   7. test programs        release/test/platform_test.c on the host (platform_posix.c);
//                           release/test/dll_smoke.c loads the host's released library and
//                           extension at run time and uses them
//   8. Wine                 where Wine is installed: platform_test.exe (platform_win.c) and
//                           dll_smoke.exe with the released Windows DLLs
//   9. extension in sqlite3 the host's released extension in the system's sqlite3 shell
// Runs every stage and exits non-zero when any failed; a stage whose tool is absent
// is skipped and says so.
//   node release/check.mjs [--skip-build]   (--skip-build reuses zig-out/release)
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { TARGETS } from "./targets.mjs";

const repo = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const node = process.execPath;
const skipBuild = process.argv.includes("--skip-build");

function onPath(cmd) {
  return (process.env.PATH ?? "").split(process.platform === "win32" ? ";" : ":").some((d) => d && existsSync(join(d, cmd)));
}

// The host's own release target, for the programs that load released files here.
const hostTarget = { "linux-x64": "linux-x64-gnu", "linux-arm64": "linux-arm64-gnu", "darwin-x64": "darwin-x64", "darwin-arm64": "darwin-arm64", "win32-x64": "win32-x64" }[`${process.platform}-${process.arch}`];
const files = hostTarget ? TARGETS[hostTarget].files : null;
const wine = onPath("wine") ? false : "no wine";
const scratch = mkdtempSync(join(tmpdir(), "mw-release-check-"));
const rel = (target, role) => `zig-out/release/${target}/${TARGETS[target].files[role]}`;
const wineEnv = { WINEDEBUG: process.env.WINEDEBUG ?? "-all" };

const stages = [
  ["zig build release", [node, "scripts/zig.mjs", "build", "release", "--summary", "none"], skipBuild && "--skip-build"],
  ["checker self-test", [node, "--test", "--test-reporter=dot", "release/check-artifacts.test.mjs"]],
  ["npm packages", [node, "release/build-npm.mjs", "--pack"]],
  ["npm install test", [node, "release/test-npm.mjs"]],
  ["manifest", [node, "release/manifest.mjs", "--out", "zig-out/npm/manifest.json"]],
  ["manifest in lib/ is current", [node, "release/manifest.mjs", "--check-ts", "lib/ffi/manifest.generated.ts"]],
  ["npm publish --dry-run, assets, JSR docs", [node, "release/publish-dry-run.mjs"]],
  ["compiled executables", [node, "release/test-compile.mjs"], !hostTarget && "no release target for this host"],
  ["deno publish --dry-run", [join(repo, "node_modules", ".bin", process.platform === "win32" ? "deno.cmd" : "deno"), "publish", "--dry-run", "--allow-dirty"]],
  ["test programs, platform.h", [node, "scripts/zig.mjs", "build", "release-tests", "platform-test", "--summary", "none"]],
  ["library smoke (host)", [join(repo, "zig-out", "release-test", "dll_smoke"), hostTarget && rel(hostTarget, "shared"), hostTarget && rel(hostTarget, "extension"), scratch], !hostTarget && "no release target for this host"],
  ["platform.h (Wine)", ["wine", "zig-out/release-test/platform_test.exe", scratch], wine, wineEnv],
  ["library smoke (Wine)", ["wine", "zig-out/release-test/dll_smoke.exe", rel("win32-x64", "shared"), rel("win32-x64", "extension"), scratch], wine, wineEnv],
  ["extension in sqlite3", ["sqlite3", ":memory:", `.load ${files ? rel(hostTarget, "extension").replace(/\.[^./]+$/, "") : ""}`, "select 'mw_version=' || mw_version();"],
    (!onPath("sqlite3") && "no sqlite3 shell") || (!files && "no release target for this host")],
];

const times = [];
const failed = [];
const t0 = performance.now();
function printTimes() {
  for (const [name, t] of times) console.log(`  ${name.padEnd(30)} ${t}`);
  console.log(`  ${"total".padEnd(30)} ${((performance.now() - t0) / 1000).toFixed(1)} s`);
}
for (const [name, [cmd, ...args], skip, env] of stages) {
  if (skip) {
    times.push([name, `skipped (${skip})`]);
    continue;
  }
  console.log(`\n== ${name}: ${[cmd, ...args].map((a) => a.replace(repo + "/", "")).join(" ")}`);
  const start = performance.now();
  const r = spawnSync(cmd, args, { cwd: repo, stdio: "inherit", env: { ...process.env, ...env } });
  const secs = ((performance.now() - start) / 1000).toFixed(1);
  times.push([name, `${secs} s`]);
  if (r.status !== 0) {
    times[times.length - 1][1] += `  FAILED (${r.error ? r.error.message : `exit ${r.status ?? r.signal}`})`;
    failed.push(name);
  }
}
rmSync(scratch, { recursive: true, force: true });
console.log(failed.length ? `\n== release check FAILED: ${failed.join(", ")}` : "\n== release check passed");
printTimes();
process.exit(failed.length ? 1 : 0);
