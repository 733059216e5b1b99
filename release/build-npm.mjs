#!/usr/bin/env node
// release/build-npm.mjs: builds the npm packages from lib/ and zig-out/release.
//
//   node release/build-npm.mjs [--release DIR] [--out DIR] [--targets a,b] [--pack]
//
// Writes into --out (default zig-out/npm):
//   sqlite-multiwriter/            the main package: lib/ as it is (TypeScript, what Bun
//                                  runs), dist/ (the same compiled to JavaScript with
//                                  declarations: Deno refuses TypeScript under
//                                  node_modules), package.json with conditional exports
//                                  and one optional dependency per platform package
//   <os>-<cpu>[-musl]/             one package per platform, named
//                                  @sqlite-multiwriter/<os>-<cpu>[-musl], holding the
//                                  shared library and the extension of that target, with
//                                  os/cpu/libc fields and the sha256 of each file
// With --pack, `npm pack --offline` of each into <out>/tarballs and a check of what
// each tarball holds. No package has install scripts (Bun does not run them).
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { copyFileSync, cpSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { DEFAULT_TARGETS, npmPackageName, TARGETS } from "./targets.mjs";

const repo = resolve(dirname(fileURLToPath(import.meta.url)), "..");

function parseArgs(argv) {
  const opts = { release: join(repo, "zig-out", "release"), out: join(repo, "zig-out", "npm"), targets: DEFAULT_TARGETS, pack: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    if (a === "--release") opts.release = resolve(value());
    else if (a === "--out") opts.out = resolve(value());
    else if (a === "--targets") opts.targets = value().split(",").filter(Boolean);
    else if (a === "--pack") opts.pack = true;
    else throw new Error(`unknown argument ${a}`);
  }
  for (const t of opts.targets) {
    if (!TARGETS[t]) throw new Error(`unknown target ${t} (release/targets.mjs)`);
    if (TARGETS[t].mobile) throw new Error(`${t} has no npm package: neither Bun nor Deno runs there`);
  }
  return opts;
}

export function sha256(file) {
  return createHash("sha256").update(readFileSync(file)).digest("hex");
}

function writeJson(file, value) {
  writeFileSync(file, `${JSON.stringify(value, null, 2)}\n`);
}

const OS_NAMES = { linux: "Linux", darwin: "macOS", win32: "Windows" };

function describeTarget(target) {
  const t = TARGETS[target];
  const libc = t.libc === "glibc" ? " (glibc 2.17 or newer)" : t.libc === "musl" ? " (musl)" : t.os === "darwin" ? ` (${t.minos} or newer)` : "";
  return `${OS_NAMES[t.os]} ${t.cpu}${libc}`;
}

/** One per-platform package; returns its folder and the files with their sha256. */
function buildPlatformPackage(opts, root, target) {
  const t = TARGETS[target];
  const name = npmPackageName(target);
  const dir = join(opts.out, name.split("/")[1]);
  mkdirSync(dir, { recursive: true });
  const files = {};
  for (const role of ["shared", "extension"]) {
    const src = join(opts.release, target, t.files[role]);
    if (!existsSync(src)) throw new Error(`${src} missing: run \`node scripts/zig.mjs build release\` first`);
    copyFileSync(src, join(dir, t.files[role]));
    files[t.files[role]] = sha256(src);
  }
  writeFileSync(join(dir, "SHA256SUMS"), Object.entries(files).map(([f, h]) => `${h}  ${f}\n`).join(""));
  writeFileSync(
    join(dir, "README.md"),
    `# ${name}\n\nThe native library of [${root.name}](https://www.npmjs.com/package/${root.name}) for ${describeTarget(target)}:\n` +
      `\`${t.files.shared}\` (SQLite ${sqliteVersion()} with the multi-writer engine, what Bun and Deno load) and\n` +
      `\`${t.files.extension}\` (the loadable extension for the sqlite3 shell: \`.load ./${t.files.extension.replace(/\.[^.]+$/, "")}\`).\n\n` +
      `Installed by \`${root.name}\` as an optional dependency; you do not install it yourself.\n` +
      `SHA256SUMS and the \`sha256\` field of package.json hold the checksum of each file.\n`,
  );
  const pkg = {
    name,
    version: root.version,
    description: `sqlite-multiwriter native library for ${describeTarget(target)}`,
    license: root.license,
    os: [t.os],
    cpu: [t.cpu],
    ...(t.libc ? { libc: [t.libc] } : {}),
    files: [...Object.keys(files), "SHA256SUMS"],
    // Native files must live on disk, not inside a zip (Yarn Plug'n'Play).
    preferUnplugged: true,
    sha256: files,
  };
  writeJson(join(dir, "package.json"), pkg);
  return { name, dir, files: [...pkg.files, "README.md", "package.json"] };
}

function sqliteVersion() {
  const h = readFileSync(join(repo, "native", "sqlite", "sqlite3.h"), "latin1");
  return /#define SQLITE_VERSION\s+"([^"]+)"/.exec(h)?.[1] ?? "?";
}

/** The main package: lib/ as it is, dist/ compiled by tsc, conditional exports. */
function buildMainPackage(opts, root, platformNames) {
  const dir = join(opts.out, root.name);
  mkdirSync(dir, { recursive: true });
  if (!existsSync(join(repo, "lib", "mod.ts"))) throw new Error("lib/mod.ts missing");
  cpSync(join(repo, "lib"), join(dir, "lib"), { recursive: true });
  // The same sources as JavaScript: tsc rewrites the ".ts" import specifiers to ".js".
  const tsc = join(repo, "node_modules", "typescript", "bin", "tsc");
  execFileSync(
    process.execPath,
    [tsc, "-p", join(repo, "tsconfig.json"), "--noEmit", "false", "--allowImportingTsExtensions", "false",
      "--rewriteRelativeImportExtensions", "--declaration", "--rootDir", join(repo, "lib"), "--outDir", join(dir, "dist")],
    { cwd: repo, stdio: "inherit" },
  );
  // functions.json is read by tooling only; the generated table is what runs.
  if (existsSync(join(repo, "README.md"))) copyFileSync(join(repo, "README.md"), join(dir, "README.md"));
  const entry = {
    types: "./dist/mod.d.ts",
    bun: "./lib/mod.ts",
    deno: "./dist/mod.js",
    default: "./dist/mod.js",
  };
  const pkg = {
    name: root.name,
    version: root.version,
    description: root.description,
    license: root.license,
    type: "module",
    exports: { ".": entry, "./package.json": "./package.json" },
    types: "./dist/mod.d.ts",
    files: ["lib/", "dist/", ...(existsSync(join(dir, "README.md")) ? ["README.md"] : [])],
    engines: { bun: ">=1.1", deno: ">=2.0" },
    keywords: ["sqlite", "bun", "deno", "ffi", "concurrency", "mvcc", "wal"],
    optionalDependencies: Object.fromEntries(platformNames.map((n) => [n, root.version])),
  };
  writeJson(join(dir, "package.json"), pkg);
  return { name: root.name, dir, files: ["lib/mod.ts", "lib/ffi/symbols.generated.ts", "dist/mod.js", "dist/mod.d.ts", "dist/ffi/index.js", "package.json"] };
}

/** `npm pack` of one folder, offline; checks the tarball lists every expected file. */
function pack(pkg, dest) {
  const out = execFileSync("npm", ["pack", "--offline", "--json", "--pack-destination", dest], {
    cwd: pkg.dir,
    encoding: "utf8",
    env: { ...process.env, npm_config_update_notifier: "false", npm_config_fund: "false", npm_config_audit: "false" },
  });
  const [info] = JSON.parse(out);
  const inside = new Set(info.files.map((f) => f.path));
  const missing = pkg.files.filter((f) => !inside.has(f));
  if (missing.length) throw new Error(`${pkg.name}: the tarball lacks ${missing.join(", ")}`);
  if (JSON.parse(readFileSync(join(pkg.dir, "package.json"), "utf8")).scripts) throw new Error(`${pkg.name}: has scripts`);
  return { name: pkg.name, file: join(dest, info.filename), size: info.size, entries: info.entryCount };
}

export function buildNpm(opts) {
  const root = JSON.parse(readFileSync(join(repo, "package.json"), "utf8"));
  rmSync(opts.out, { recursive: true, force: true });
  mkdirSync(opts.out, { recursive: true });
  const platforms = opts.targets.map((t) => buildPlatformPackage(opts, root, t));
  const main = buildMainPackage(opts, root, platforms.map((p) => p.name));
  const packages = [main, ...platforms];
  let tarballs = [];
  if (opts.pack) {
    const dest = join(opts.out, "tarballs");
    mkdirSync(dest, { recursive: true });
    tarballs = packages.map((p) => pack(p, dest));
  }
  return { packages, tarballs };
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    const opts = parseArgs(process.argv.slice(2));
    const { packages, tarballs } = buildNpm(opts);
    for (const p of packages) console.log(`built ${p.name.padEnd(40)} ${p.dir}`);
    for (const t of tarballs) console.log(`packed ${t.name.padEnd(39)} ${t.file} (${(t.size / 1024).toFixed(0)} KiB, ${t.entries} files)`);
  } catch (e) {
    console.error(`build-npm: ${e.message}`);
    process.exit(1);
  }
}
