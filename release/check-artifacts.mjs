#!/usr/bin/env node
// release/check-artifacts.mjs: checks every artifact of `zig build release`.
//
//   node release/check-artifacts.mjs <release folder> [target ...]
//
// With target names (build.zig passes the ones it built) exactly those folders are
// checked and each must exist; without, every folder present is checked. For each
// target: the shared library, the loadable extension and the static library must
// be of the right format, machine and kind; export what Bun, Deno and the sqlite3
// shell look up (the shared library every function of lib/ffi/functions.json); the
// extension must hold no SQLite of its own; Linux glibc builds must need no symbol
// version newer than GLIBC_2.17; dependencies must be the OS's own libraries.
// Prints a table and exits 1 on any failure. Uses no external tool (binfmt.mjs).
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { FormatError, readBinary } from "./binfmt.mjs";
import { MAX_GLIBC, TARGETS } from "./targets.mjs";

const repo = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/** What the shared library must export: the package's whole binding, when present. */
function requiredLibraryExports() {
  const base = ["sqlite3_open_v2", "sqlite3_sourceid", "mw_version", "mw_stats", "mw_register"];
  const fnFile = join(repo, "lib", "ffi", "functions.json");
  if (!existsSync(fnFile)) return base;
  const fns = Object.keys(JSON.parse(readFileSync(fnFile, "utf8")).functions ?? {});
  return [...new Set([...base, ...fns])];
}

/** The SQLite source id the vendored amalgamation carries: the libraries hold it. */
function sqliteSourceId() {
  const h = readFileSync(join(repo, "native", "sqlite", "sqlite3.h"), "latin1");
  const m = /#define SQLITE_SOURCE_ID\s+"([^"]+)"/.exec(h);
  if (!m) throw new Error("native/sqlite/sqlite3.h has no SQLITE_SOURCE_ID");
  return m[1];
}

function versionTuple(v) {
  return v.split(".").map((x) => Number.parseInt(x, 10) || 0);
}

function versionGreater(a, b) {
  const x = versionTuple(a);
  const y = versionTuple(b);
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    if ((x[i] ?? 0) !== (y[i] ?? 0)) return (x[i] ?? 0) > (y[i] ?? 0);
  }
  return false;
}

/** Libraries a target's files may depend on: the OS and its C library only. */
function dependencyAllowed(spec, dep) {
  const d = dep.toLowerCase();
  if (spec.format === "elf") {
    if (spec.libc === "glibc") return ["libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2"].includes(d) || /^ld-linux-.*\.so\.\d$/.test(d);
    if (spec.libc === "musl") return d === "libc.so";
    return ["libc.so", "libm.so", "libdl.so"].includes(d); // bionic
  }
  if (spec.format === "macho") return d === "/usr/lib/libsystem.b.dylib";
  if (spec.format === "pe") {
    return d === "kernel32.dll" || d === "ntdll.dll" || d === "ucrtbase.dll" || d === "msvcrt.dll" || d.startsWith("api-ms-win-crt-") || d.startsWith("api-ms-win-core-");
  }
  return false;
}

/** Symbols the Mach-O linker defines in every dylib (names after the leading "_"). */
const LINKER_SYMBOLS = new Set(["__dso_handle", "_mh_dylib_header"]);

/** The dependency list for the table: the Universal CRT's api sets counted, not listed. */
function shortDeps(needed) {
  const crt = needed.filter((d) => d.toLowerCase().startsWith("api-ms-win-crt-"));
  const rest = needed.filter((d) => !crt.includes(d)).map((d) => d.replace(/^\/usr\/lib\//, ""));
  if (crt.length) rest.push(`ucrt(${crt.length} api sets)`);
  return rest.join(" ") || "none";
}

/** Checks one file; returns { row, failures[] } for the table. */
function checkFile(target, spec, role, path, ctx) {
  const failures = [];
  const fail = (msg) => failures.push(msg);
  const row = { target, role, file: path.split(/[\\/]/).pop(), size: "-", type: "-", exports: "-", deps: "-", versions: "-" };
  if (!existsSync(path)) {
    fail("missing");
    return { row, failures };
  }
  const buf = readFileSync(path);
  row.size = `${(buf.length / 1024).toFixed(0)} KiB`;
  let info;
  try {
    info = readBinary(buf);
  } catch (e) {
    fail(e instanceof FormatError ? `unreadable: ${e.message}` : `reader crashed: ${e.stack}`);
    return { row, failures };
  }

  if (role === "static") {
    row.type = `ar: ${info.members.length} ${[...new Set(info.members.map((m) => `${m.format} ${m.machine}`))].join(", ")}`;
    if (info.members.length === 0) fail("archive has no members");
    const objFormat = spec.format === "pe" ? "coff" : spec.format;
    for (const m of info.members) {
      if (m.format !== objFormat) fail(`member ${m.name}: ${m.format}, expected ${objFormat}`);
      if (m.machine !== spec.machine) fail(`member ${m.name}: machine ${m.machine}, expected ${spec.machine}`);
      if (m.kind !== "relocatable") fail(`member ${m.name}: ${m.kind}, expected relocatable`);
    }
    // Linkers find members through the index; what it lists must come from members.
    if (!info.index || info.index.length === 0) fail("archive has no symbol index (ranlib)");
    const defined = new Set(info.members.flatMap((m) => m.defined));
    const missing = ctx.libraryExports.filter((s) => !defined.has(s));
    if (missing.length) fail(`members define none of: ${missing.join(", ")}`);
    const notIndexed = ["sqlite3_open_v2", "mw_register"].filter((s) => !(info.index ?? []).includes(s));
    if (notIndexed.length) fail(`symbol index lacks: ${notIndexed.join(", ")}`);
    if (defined.has("sqlite3_multiwriter_init")) fail("defines the extension's entry sqlite3_multiwriter_init");
    row.exports = `${defined.size} defined, ${info.index?.length ?? 0} indexed`;
    if (!buf.includes(ctx.sourceId, 0, "latin1")) fail("SQLite source id of native/sqlite not found");
    return { row, failures };
  }

  row.type = `${info.format} ${info.machine} ${info.kind}`;
  if (info.format !== spec.format) fail(`format ${info.format}, expected ${spec.format}`);
  if (info.machine !== spec.machine) fail(`machine ${info.machine}, expected ${spec.machine}`);
  if (info.kind !== "shared object") fail(`${info.kind}, expected a shared library`);

  const exported = new Set(info.defined);
  const undefinedSqlite = info.undefined.filter((s) => s.startsWith("sqlite3_"));
  if (role === "shared") {
    const missing = ctx.libraryExports.filter((s) => !exported.has(s));
    if (missing.length) fail(`does not export: ${missing.join(", ")}`);
    // Everything else stays hidden (-fvisibility=hidden): only the two public prefixes.
    const stray = info.defined.filter((s) => !s.startsWith("sqlite3_") && !s.startsWith("mw_") && !LINKER_SYMBOLS.has(s));
    if (stray.length) fail(`exports internal symbols: ${stray.slice(0, 8).join(", ")}${stray.length > 8 ? ", ..." : ""}`);
    if (exported.has("sqlite3_multiwriter_init")) fail("exports the extension's entry sqlite3_multiwriter_init");
    if (undefinedSqlite.length) fail(`needs SQLite from elsewhere: ${undefinedSqlite.slice(0, 5).join(", ")}`);
    if (!buf.includes(ctx.sourceId, 0, "latin1")) fail("SQLite source id of native/sqlite not found");
    row.exports = `${info.defined.filter((s) => s.startsWith("sqlite3_")).length} sqlite3_*, ${info.defined.filter((s) => s.startsWith("mw_")).length} mw_*`;
  } else {
    if (!exported.has("sqlite3_multiwriter_init")) fail("does not export sqlite3_multiwriter_init");
    // The extension calls SQLite only through the routine table of its host.
    const ownSqlite = info.defined.filter((s) => s.startsWith("sqlite3_") && s !== "sqlite3_multiwriter_init");
    if (ownSqlite.length) fail(`defines SQLite symbols: ${ownSqlite.slice(0, 5).join(", ")}`);
    if (undefinedSqlite.length) fail(`links SQLite symbols directly: ${undefinedSqlite.slice(0, 5).join(", ")}`);
    const stray = info.defined.filter((s) => s !== "sqlite3_multiwriter_init" && !s.startsWith("mw_") && !LINKER_SYMBOLS.has(s));
    if (stray.length) fail(`exports internal symbols: ${stray.slice(0, 8).join(", ")}`);
    if (buf.includes(ctx.sourceId, 0, "latin1")) fail("holds a copy of SQLite (its source id)");
    row.exports = `sqlite3_multiwriter_init + ${info.defined.filter((s) => s.startsWith("mw_")).length} mw_*`;
  }

  const badDeps = (info.needed ?? []).filter((d) => !dependencyAllowed(spec, d));
  if (badDeps.length) fail(`depends on: ${badDeps.join(", ")}`);
  row.deps = shortDeps(info.needed ?? []);

  if (info.format === "elf") {
    if (info.execStack) fail("needs an executable stack (no PT_GNU_STACK or PF_X set)");
    if (info.textrel) fail("has text relocations (not position-independent)");
    const glibc = info.versionNeeds.filter((v) => v.version.startsWith("GLIBC_")).map((v) => v.version.slice(6));
    if (spec.libc === "glibc") {
      const newest = glibc.reduce((a, v) => (versionGreater(v, a) ? v : a), "0");
      const tooNew = [...new Set(glibc.filter((v) => versionGreater(v, MAX_GLIBC)))];
      if (tooNew.length) fail(`needs GLIBC_${tooNew.join(", GLIBC_")} (newer than ${MAX_GLIBC})`);
      row.versions = glibc.length ? `GLIBC <= ${newest}` : "unversioned";
    } else {
      if (glibc.length) fail(`${spec.libc} build needs glibc versions: ${glibc.join(", ")}`);
      row.versions = info.versionNeeds.length ? [...new Set(info.versionNeeds.map((v) => v.version))].join(" ") : "none";
    }
  } else if (info.format === "macho") {
    row.versions = `${info.platform} ${info.minos}`;
    if (info.platform !== spec.platform) fail(`platform ${info.platform}, expected ${spec.platform}`);
    if (info.minos === null || versionGreater(info.minos, spec.minos)) fail(`minimum OS ${info.minos}, expected ${spec.minos}`);
    // Apple silicon refuses to map unsigned code; the linker's ad-hoc signature suffices.
    if (spec.machine === "arm64" && !info.codeSignature) fail("no code signature (arm64 requires one)");
    if (!info.installName) fail("no install name (LC_ID_DYLIB)");
    else if (!info.installName.endsWith(row.file)) fail(`install name ${info.installName} does not name ${row.file}`);
  } else if (info.format === "pe") {
    if (!(info.characteristics & 0x2000)) fail("not marked as a DLL");
    const flags = [];
    if (info.dllCharacteristics & 0x40) flags.push("ASLR");
    if (info.dllCharacteristics & 0x100) flags.push("NX");
    if (info.dllCharacteristics & 0x20) flags.push("HEVA");
    row.versions = flags.join(" ") || "no ASLR/NX";
    if (!(info.dllCharacteristics & 0x40) || !(info.dllCharacteristics & 0x100)) fail("DLL without ASLR (DYNAMIC_BASE) or NX_COMPAT");
  }
  return { row, failures };
}

export function checkRelease(dir, names) {
  const ctx = { libraryExports: requiredLibraryExports(), sourceId: sqliteSourceId() };
  const rows = [];
  const problems = [];
  if (!existsSync(dir)) {
    problems.push(`${dir}: no such folder (run \`node scripts/zig.mjs build release\`)`);
    return { rows, problems };
  }
  const present = readdirSync(dir).filter((n) => statSync(join(dir, n)).isDirectory()).sort();
  const targets = names.length ? names : present;
  if (targets.length === 0) problems.push(`${dir}: no target folders`);
  for (const target of targets) {
    const spec = TARGETS[target];
    if (!spec) {
      problems.push(`${target}: not a known release target (release/targets.mjs)`);
      continue;
    }
    const tdir = join(dir, target);
    if (!existsSync(tdir)) {
      problems.push(`${target}: folder missing`);
      continue;
    }
    for (const role of ["shared", "extension", "static"]) {
      const { row, failures } = checkFile(target, spec, role, join(tdir, spec.files[role]), ctx);
      row.result = failures.length ? "FAIL" : "ok";
      rows.push(row);
      for (const f of failures) problems.push(`${target}/${row.file}: ${f}`);
    }
    const known = new Set(Object.values(spec.files));
    for (const extra of readdirSync(tdir).filter((f) => !known.has(f))) {
      problems.push(`${target}/${extra}: unexpected file (not a release artifact)`);
    }
  }
  return { rows, problems };
}

export function formatTable(rows) {
  const cols = ["target", "file", "size", "type", "exports", "deps", "versions", "result"];
  const width = cols.map((c) => Math.max(c.length, ...rows.map((r) => String(r[c]).length)));
  const line = (vals) => vals.map((v, i) => String(v).padEnd(width[i])).join("  ").trimEnd();
  return [line(cols), line(width.map((w) => "-".repeat(w))), ...rows.map((r) => line(cols.map((c) => r[c])))].join("\n");
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const [dir, ...names] = process.argv.slice(2);
  if (!dir) {
    console.error("usage: node release/check-artifacts.mjs <release folder> [target ...]");
    process.exit(2);
  }
  const { rows, problems } = checkRelease(dir, names);
  console.log(formatTable(rows));
  if (problems.length) {
    console.log(`\n${problems.length} problem(s):`);
    for (const p of problems) console.log(`  - ${p}`);
    process.exit(1);
  }
  console.log(`\nall ${rows.length} artifacts of ${new Set(rows.map((r) => r.target)).size} targets passed`);
}
