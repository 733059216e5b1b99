#!/usr/bin/env node
// release/test-npm.mjs: installs the packed npm packages (release/build-npm.mjs
// --pack) into a fresh project, offline, and opens a database through them under
// Bun and under Deno. Proves the main package's exports work in both runtimes,
// that the library is found in the per-platform package (no checkout and no
// environment variable to fall back on), and that the installed file matches the
// sha256 its package declares. Only the host's platform package can be tried.
//   node release/test-npm.mjs [tarballs folder]
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { npmPackageName, TARGETS } from "./targets.mjs";

const repo = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const tarballs = resolve(process.argv[2] ?? join(repo, "zig-out", "npm", "tarballs"));
const root = JSON.parse(readFileSync(join(repo, "package.json"), "utf8"));

function hostTarget() {
  const libc = process.platform === "linux" ? (process.report.getReport().header.glibcVersionRuntime ? "glibc" : "musl") : undefined;
  const hit = Object.entries(TARGETS).find(([, t]) => !t.mobile && t.os === process.platform && t.cpu === process.arch && t.libc === libc);
  if (!hit) throw new Error(`no release target for ${process.platform}-${process.arch}`);
  return hit[0];
}

const target = hostTarget();
const pkgName = npmPackageName(target);
const tgz = (name) => join(tarballs, `${name.replace(/^@/, "").replace("/", "-")}-${root.version}.tgz`);
for (const name of [root.name, pkgName]) {
  if (!existsSync(tgz(name))) throw new Error(`${tgz(name)} missing: run node release/build-npm.mjs --pack`);
}

const dir = mkdtempSync(join(tmpdir(), "mw-npm-"));
let failed = 0;
try {
  writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "npm-smoke", private: true, type: "module" }));
  writeFileSync(join(dir, "deno.json"), JSON.stringify({ nodeModulesDir: "manual" }));
  // The other platforms' optional dependencies are not in any cache: npm skips them.
  execFileSync("npm", ["install", "--offline", "--no-audit", "--no-fund", "--loglevel=error", tgz(root.name), tgz(pkgName)], { cwd: dir, stdio: "inherit" });
  writeFileSync(
    join(dir, "smoke.ts"),
    `import { Database, libraryPath, mwVersion } from "${root.name}";
const db = new Database(":memory:");
db.exec("create table t(x); insert into t values (1), (2)");
const row = db.query("select mw_version() as v, sum(x) as s from t").get() as { v: string; s: number };
db.close();
console.log(JSON.stringify({ lib: libraryPath(), version: mwVersion(), row }));
`,
  );
  const installed = join(dir, "node_modules", ...pkgName.split("/"));
  const declared = JSON.parse(readFileSync(join(installed, "package.json"), "utf8")).sha256;
  for (const [file, hash] of Object.entries(declared)) {
    const actual = createHash("sha256").update(readFileSync(join(installed, file))).digest("hex");
    if (actual !== hash) {
      console.log(`FAIL ${pkgName}/${file}: sha256 ${actual}, package.json says ${hash}`);
      failed++;
    }
  }
  const env = { ...process.env };
  delete env.SQLITE_MULTIWRITER_LIB;
  const runtimes = {
    bun: [join(repo, "node_modules", ".bin", "bun"), "smoke.ts"],
    deno: [join(repo, "node_modules", ".bin", "deno"), "run", "--allow-ffi", "--allow-read", "--allow-env", "--allow-sys", "smoke.ts"],
  };
  for (const [name, [bin, ...args]] of Object.entries(runtimes)) {
    let out;
    try {
      out = JSON.parse(execFileSync(bin, args, { cwd: dir, env, encoding: "utf8" }).trim().split("\n").pop());
    } catch (e) {
      console.log(`FAIL ${name}: ${e.message}`);
      failed++;
      continue;
    }
    const ok = out.lib === join(installed, TARGETS[target].files.shared) && out.version === root.version && out.row.v === root.version && out.row.s === 3;
    console.log(`${ok ? "ok  " : "FAIL"} ${name}: loaded ${out.lib}, mw_version ${out.version}`);
    if (!ok) failed++;
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
console.log(failed ? `${failed} failed` : `npm packages work under Bun and Deno (${target})`);
process.exit(failed ? 1 : 0);
