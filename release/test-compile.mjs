#!/usr/bin/env node
// release/test-compile.mjs: single-file executables of an application that uses the
// package, made with `bun build --compile` and `deno compile`, run from a fresh folder
// with no checkout, no package, no environment variable and no download to fall back on
// (SQLITE_MULTIWRITER_NO_CHECKOUT=1, SQLITE_MULTIWRITER_NO_DOWNLOAD=1). Two ways to ship
// the host's released library with the executable:
//   beside     the library is copied next to the executable; the application passes
//              libraryPath = <folder of process.execPath>/<library file>
//   embedded   Bun: the library is imported `with { type: "file" }`, so it is inside the
//              executable, and that path is the libraryPath; Deno: `deno compile
//              --include` puts it inside, and the application finds it next to its
//              main module
// `deno compile` builds on denort, which Deno downloads from its own server, not from a
// package registry: where that is unreachable (here) the Deno cases are skipped and say
// so, unless DENORT_BIN names a denort binary.
// Each executable writes rows, reads them back and prints mw_version(); the test
// checks the output and that the library was loaded from where it should be.
//   node release/test-compile.mjs [release folder]
import { execFileSync, spawnSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { TARGETS } from "./targets.mjs";

const repo = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const releaseDir = resolve(process.argv[2] ?? join(repo, "zig-out", "release"));
const version = JSON.parse(readFileSync(join(repo, "package.json"), "utf8")).version;
const hostTarget = { "linux-x64": "linux-x64-gnu", "linux-arm64": "linux-arm64-gnu", "darwin-x64": "darwin-x64", "darwin-arm64": "darwin-arm64", "win32-x64": "win32-x64" }[`${process.platform}-${process.arch}`];
if (!hostTarget) throw new Error(`no release target for ${process.platform}-${process.arch}`);
const libFile = TARGETS[hostTarget].files.shared;
const bin = (name) => join(repo, "node_modules", ".bin", name);
const exeName = (name) => (process.platform === "win32" ? `${name}.exe` : name);

// The application: the same for both runtimes and both ways; how it finds the library
// is the only difference, given by the import of ./where.ts.
const app = (where) => `import { Database, libraryPath, mwVersion } from ${JSON.stringify(join(repo, "lib", "mod.ts"))};
${where}
const db = new Database(":memory:", { libraryPath: library });
db.exec("CREATE TABLE t(x INTEGER); INSERT INTO t VALUES (20), (22)");
const row = db.query("SELECT sum(x) AS s, mw_version() AS v FROM t").get() as { s: number; v: string };
db.close();
console.log(JSON.stringify({ lib: libraryPath(), version: mwVersion(), row }));
`;
const beside = `import { dirname, join } from "node:path";
import process from "node:process";
const library = join(dirname(process.execPath), ${JSON.stringify(libFile)});`;
const bunEmbedded = `// @ts-ignore: a file import (Bun) gives the path of the embedded file.
import library from "./${libFile}" with { type: "file" };`;
const denoEmbedded = `import { fileURLToPath } from "node:url";
const library = fileURLToPath(new URL("./${libFile}", import.meta.url));`;

const cases = [
  { name: "bun beside", where: beside, compile: (src, out) => [bin("bun"), ["build", "--compile", src, "--outfile", out]], besideLib: true },
  { name: "bun embedded", where: bunEmbedded, compile: (src, out) => [bin("bun"), ["build", "--compile", src, "--outfile", out]], besideLib: false },
  { name: "deno beside", where: beside, compile: (src, out) => [bin("deno"), ["compile", "--quiet", "--allow-ffi", "--allow-read", "--allow-env", "--allow-sys", "--output", out, src]], besideLib: true },
  {
    name: "deno embedded", where: denoEmbedded, besideLib: false,
    compile: (src, out) => [bin("deno"), ["compile", "--quiet", "--allow-ffi", "--allow-read", "--allow-env", "--allow-sys", "--include", join(dirname(src), libFile), "--output", out, src]],
  },
];

let failed = 0;
let skipped = 0;
const work = mkdtempSync(join(tmpdir(), "mw-compile-"));
try {
  for (const c of cases) {
    const slug = c.name.replace(" ", "-");
    const src = join(work, slug, "src");
    const run = join(work, slug, "run"); // where the executable is shipped to
    mkdirSync(src, { recursive: true });
    mkdirSync(run, { recursive: true });
    copyFileSync(join(releaseDir, hostTarget, libFile), join(src, libFile));
    writeFileSync(join(src, "app.ts"), app(c.where));
    const exe = join(run, exeName("app"));
    const [cmd, args] = c.compile(join(src, "app.ts"), exe);
    const made = spawnSync(cmd, args, { cwd: src, encoding: "utf8" });
    if (made.status !== 0) {
      const why = `${made.stdout}${made.stderr}`;
      if (/Setting up base binary|denort/.test(why) && !process.env.DENORT_BIN) {
        console.log(`skip ${c.name}: deno compile needs denort, which it downloads from Deno's own server (not reachable here); set DENORT_BIN to a denort binary`);
        skipped++;
      } else {
        console.log(`FAIL ${c.name}: compile: ${made.error?.message ?? `exit ${made.status}`}\n${why}`);
        failed++;
      }
      continue;
    }
    if (c.besideLib) copyFileSync(join(src, libFile), join(run, libFile));
    // The source folder goes away: the executable has only what it was shipped with.
    rmSync(src, { recursive: true, force: true });
    const env = { ...process.env, SQLITE_MULTIWRITER_NO_CHECKOUT: "1", SQLITE_MULTIWRITER_NO_DOWNLOAD: "1" };
    delete env.SQLITE_MULTIWRITER_LIB;
    let out;
    try {
      out = JSON.parse(execFileSync(exe, [], { cwd: run, env, encoding: "utf8" }).trim().split("\n").pop());
    } catch (e) {
      console.log(`FAIL ${c.name}: run: ${e.message}`);
      failed++;
      continue;
    }
    const where = c.besideLib ? out.lib === join(run, libFile) : !out.lib.startsWith(run);
    const ok = where && out.version === version && out.row.v === version && out.row.s === 42;
    console.log(`${ok ? "ok  " : "FAIL"} ${c.name}: ${exe.replace(work, "<tmp>")} loaded ${out.lib}, mw_version ${out.version}`);
    if (!ok) failed++;
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}
console.log(`${cases.length - failed - skipped} passed, ${failed} failed, ${skipped} skipped`);
process.exit(failed ? 1 : 0);
