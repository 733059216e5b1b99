#!/usr/bin/env node
// release/test-npm.mjs: installs the packed npm packages (release/build-npm.mjs
// --pack) into a fresh project, offline, and opens a database through them under
// Bun and under Deno. Proves the main package's exports work in both runtimes,
// that the library is found in the per-platform package (no checkout and no
// environment variable to fall back on), and that the installed file matches the
// sha256 its package declares. Only the host's platform package can be tried.
// Done twice: installed by `npm install --offline`, and by `bun add` (what a Bun user
// types) with its registry pointed at a closed port, so that nothing is downloaded.
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

let failed = 0;
// Bun resolves the main package's optional dependencies (the other platforms) against
// its registry; a closed port makes that fail at once, and optional ones may fail.
const offlineRegistry = "http://127.0.0.1:9/";
const installers = {
  npm: [["npm", "install", "--offline", "--no-audit", "--no-fund", "--loglevel=error"], {}],
  "bun add": [[join(repo, "node_modules", ".bin", "bun"), "add"], { BUN_CONFIG_REGISTRY: offlineRegistry, NPM_CONFIG_REGISTRY: offlineRegistry }],
};
for (const [installer, [[cmd, ...cmdArgs], installEnv]] of Object.entries(installers)) {
  const dir = mkdtempSync(join(tmpdir(), "mw-npm-"));
  try {
    console.log(`-- installed with ${installer}`);
    writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "npm-smoke", private: true, type: "module" }));
    writeFileSync(join(dir, "deno.json"), JSON.stringify({ nodeModulesDir: "manual" }));
    try {
      execFileSync(cmd, [...cmdArgs, tgz(root.name), tgz(pkgName)], { cwd: dir, stdio: "inherit", env: { ...process.env, ...installEnv } });
    } catch (e) {
      console.log(`FAIL ${installer}: ${e.message}`);
      failed++;
      continue;
    }
    failed += smoke(dir, installer);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Opens a database through the installed packages under Bun and Deno; returns the failures. */
function smoke(dir, installer) {
  let failures = 0;
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
      failures++;
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
      console.log(`FAIL ${installer}, ${name}: ${e.message}`);
      failures++;
      continue;
    }
    const ok = out.lib === join(installed, TARGETS[target].files.shared) && out.version === root.version && out.row.v === root.version && out.row.s === 3;
    console.log(`${ok ? "ok  " : "FAIL"} ${installer}, ${name}: loaded ${out.lib}, mw_version ${out.version}`);
    if (!ok) failures++;
  }
  return failures;
}
console.log(failed ? `${failed} failed` : `npm packages work under Bun and Deno (${target}; npm install and bun add)`);
process.exit(failed ? 1 : 0);
