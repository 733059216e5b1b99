#!/usr/bin/env node
// mutate.mjs: mutation testing of the engine. Each mutant of scripts/mutants.mjs breaks
// native/src at one point; for each, in turn, this script rebuilds the engine with the
// mutant and runs the C tests listed for it. A mutant is killed when one of them fails
// (exit status, signal, or time limit); it survives when all pass, and then the run fails.
// The run also fails when a mutant's snippet is not found exactly once in its file, when
// a mutant does not compile, or when a listed test fails without any mutant (baseline).
//
// The working tree is never changed: native/ is copied into zig-out/mutate/tree (and
// tree-1, ... : one copy per mutant run at the same time) and a copy is mutated (and
// restored after each mutant). The build uses `zig cc` directly, with the flags of
// build.zig: the engine sources once each, and per mutant only the mutated file (kept in
// zig-out/mutate/cache between runs by a hash of source and flags); each test is then
// linked. SQLite is not mutated: its object is the one `zig build` put into
// zig-out/lib/libmwsqlite3.a (the same sqlite3.c and flags of build.zig), taken from the
// archive when it is newer than sqlite3.c and build.zig, else sqlite3.c is compiled once.
// Mutants run two at a time (MW_MUTATE_WORKERS): the tests mostly wait (syncs, sleeps,
// child processes), so a second one uses the core the first leaves idle.
//
// Usage: node scripts/mutate.mjs [--only id,id] [--list] [--no-baseline] [--check]
//        --check: only checks that the mutants follow the code (every snippet once, every
//        test there) and exits; `npm test` runs it, so a change that moves a snippet fails
//        early instead of at CI's mutation stage.
// Env:   MW_TEST_SCALE        passed to the tests (default 0.25: smaller loops)
//        MW_MUTATE_TIMEOUT    seconds per test run (default 180; a test that runs past it
//                             counts as failing: a hang kills the mutant)
//        MW_MUTATE_JOBS       parallel compiles (default: number of CPUs)
//        MW_MUTATE_WORKERS    mutants (and baseline tests) run at the same time (default 2;
//                             1 runs them one after the other)
import { spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { cpSync, existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { join } from "node:path";
import { bootstrap, root } from "./bootstrap.mjs";
import { MUTANTS } from "./mutants.mjs";
import { killGroup } from "./process-group.mjs";

const args = process.argv.slice(2);
const opt = (name) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
if (args.includes("--list")) {
  for (const m of MUTANTS) console.log(`${m.id.padEnd(32)} ${m.file.padEnd(11)} ${m.why}`);
  process.exit(0);
}
const only = opt("--only")?.split(",").filter(Boolean);
const baseline = !args.includes("--no-baseline");
const scale = process.env.MW_TEST_SCALE ?? "0.25";
const timeoutS = Number(process.env.MW_MUTATE_TIMEOUT ?? 180);
const jobs = Number(process.env.MW_MUTATE_JOBS ?? availableParallelism());
const workers = Math.max(1, Number(process.env.MW_MUTATE_WORKERS ?? 2));

const mutants = only ? MUTANTS.filter((m) => only.includes(m.id)) : MUTANTS;
if (only) for (const id of only) if (!MUTANTS.some((m) => m.id === id)) fail(`no mutant named ${id}`);

function fail(msg) {
  console.error(`mutate: ${msg}`);
  process.exit(1);
}

// ---- the mutants follow the code: every snippet exactly once, every test exists -----------
const srcDir = join(root, "native", "src");
const testDir = join(root, "native", "test");
const ids = new Set();
for (const m of MUTANTS) {
  if (ids.has(m.id)) fail(`mutant ${m.id} is listed twice`);
  ids.add(m.id);
  const path = join(srcDir, m.file);
  if (!existsSync(path)) fail(`mutant ${m.id}: native/src/${m.file} does not exist`);
  const text = readFileSync(path, "utf8");
  const count = text.split(m.find).length - 1;
  if (count !== 1) {
    fail(`mutant ${m.id}: its snippet occurs ${count} times in native/src/${m.file} (must be once; ` +
      `update scripts/mutants.mjs with the code):\n${m.find}`);
  }
  if (m.find === m.replace) fail(`mutant ${m.id} changes nothing`);
  if (!m.tests?.length) fail(`mutant ${m.id} lists no test`);
  for (const t of m.tests) if (!existsSync(join(testDir, `${t}.c`))) fail(`mutant ${m.id}: no native/test/${t}.c`);
}
if (args.includes("--check")) {
  console.log(`mutate: the ${MUTANTS.length} mutants follow the code`);
  process.exit(0);
}

// ---- the flags of build.zig ---------------------------------------------------------------
const buildZig = readFileSync(join(root, "build.zig"), "utf8");
function zigList(name) {
  const m = new RegExp(`^const ${name} = \\[_\\]\\[\\]const u8\\{\\n([\\s\\S]*?)^\\};`, "m").exec(buildZig);
  if (!m) fail(`cannot read ${name} from build.zig`);
  return [...m[1].matchAll(/"([^"]*)"/g)].map((x) => x[1]);
}
const sqliteFlags = zigList("sqlite_flags");
const posixFlags = zigList("posix_flags");
const engineFlags = zigList("engine_flags");
// The engine's folders (native/src and one per layer), relative to native/src: their .c
// files are the engine; native/src alone is the include path of its headers.
const engineDirs = zigList("engine_dirs").map((d) => d.slice("native/src".length).replace(/^\//, ""));

const { zig } = bootstrap();
const work = join(root, "zig-out", "mutate");
const cache = join(work, "cache");
const bin = join(work, "bin");
mkdirSync(cache, { recursive: true });
mkdirSync(bin, { recursive: true });

// A fresh copy of native/ per worker (sqlite3.c is only read, so it is compiled from the
// checkout). The tests run in the copy; test_processes also loads the extension into
// Debian's sqlite3 shell: zig-out/lib of the checkout (built by `zig build` before),
// unmutated, so only its cases without the shell run the mutated engine.
const extLib = join(root, "zig-out", "lib");
function makeTree(i) {
  const dir = join(work, i === 0 ? "tree" : `tree-${i}`);
  rmSync(dir, { recursive: true, force: true });
  for (const d of ["src", "include", "test"]) cpSync(join(root, "native", d), join(dir, "native", d), { recursive: true });
  if (existsSync(extLib)) cpSync(extLib, join(dir, "zig-out", "lib"), { recursive: true });
  const includes = [
    `-I${join(dir, "native", "include")}`,
    `-I${join(dir, "native", "src")}`,
    `-I${join(root, "native", "sqlite")}`,
    `-I${join(dir, "native", "test")}`,
  ];
  return {
    dir,
    src: join(dir, "native", "src"),
    test: join(dir, "native", "test"),
    include: join(dir, "native", "include"),
    cflags: ["-O2", ...engineFlags, ...includes],
    bin: join(bin, i === 0 ? "mutant" : `mutant-${i}`),
  };
}
for (const old of readdirSync(work)) if (/^tree-\d+$/.test(old)) rmSync(join(work, old), { recursive: true, force: true });
const trees = Array.from({ length: Math.min(workers, Math.max(1, mutants.length)) }, (_, i) => makeTree(i));
const [tree0] = trees;
// The copies differ only in their folder: object keys name it <tree>, so that an object
// compiled in one copy serves them all.
const treeRe = new RegExp(`${work.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}/tree(-\\d+)?`, "g");
const headersOf = (dir) => readdirSync(dir).filter((f) => f.endsWith(".h")).sort()
  .map((f) => readFileSync(join(dir, f), "utf8")).join("\0");
const sha = (...parts) => {
  const h = createHash("sha256");
  for (const p of parts) h.update(String(p)).update("\0");
  return h.digest("hex").slice(0, 24);
};

// Test programs run in their own process group; a stopped run (CI's timeout, ^C) takes the
// one running with it.
const groups = new Set();
for (const sig of ["SIGINT", "SIGTERM"]) {
  process.on(sig, () => {
    for (const pid of groups) killGroup(pid);
    process.exit(1);
  });
}

function run(cmd, argv, options = {}) {
  return new Promise((resolve) => {
    const child = spawn(cmd, argv, { stdio: ["ignore", "pipe", "pipe"], ...options });
    if (options.detached && child.pid) groups.add(child.pid);
    let out = "";
    let timedOut = false;
    const timer = options.timeoutS
      ? setTimeout(() => {
        timedOut = true;
        try { process.kill(-child.pid, "SIGKILL"); } catch { child.kill("SIGKILL"); }
      }, options.timeoutS * 1000)
      : null;
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (out += d));
    child.on("error", (e) => resolve({ code: 127, signal: null, out: String(e), timedOut }));
    child.on("close", (code, signal) => {
      groups.delete(child.pid);
      if (timer) clearTimeout(timer);
      resolve({ code, signal, out, timedOut });
    });
  });
}

// Compiles one C file into the cache (by a hash of everything that goes into it).
async function compile(label, file, flags, extraKey) {
  const key = sha(label, flags.join(" ").replace(treeRe, "<tree>"), readFileSync(file), extraKey);
  const obj = join(cache, `${label}-${key}.o`);
  if (existsSync(obj)) return obj;
  const tmp = `${obj}.tmp${process.pid}`;
  const r = await run(zig, ["cc", "-c", file, "-o", tmp, ...flags], { cwd: root });
  if (r.code !== 0) return { error: r.out };
  renameSync(tmp, obj);
  return obj;
}

async function parallel(items, fn) {
  const results = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await fn(items[i]);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(jobs, items.length)) }, worker));
  return results;
}

const srcHeaders = (tree) => engineDirs.map((d) => headersOf(join(tree.src, d))).join("\0") +
  headersOf(tree.include);

async function compileEngine(names, tree) {
  const hdr = srcHeaders(tree);
  const objs = await parallel(names, (f) => compile(`src-${f.replaceAll("/", "-")}`, join(tree.src, f), tree.cflags, hdr));
  for (let i = 0; i < objs.length; i++) if (objs[i].error) return { error: `${names[i]}:\n${objs[i].error}` };
  return Object.fromEntries(names.map((f, i) => [f, objs[i]]));
}

const t0 = Date.now();
const secs = () => ((Date.now() - t0) / 1000).toFixed(0);

console.log(`mutate: ${mutants.length} mutants, MW_TEST_SCALE=${scale}, ${timeoutS} s per test, ${trees.length} at a time`);

// SQLite's object from the archive `zig build` wrote (the same sqlite3.c and build.zig
// flags), when the archive is newer than both; null when it is not there or older.
function sqliteFromBuild() {
  const lib = join(root, "zig-out", "lib", "libmwsqlite3.a");
  if (!existsSync(lib)) return null;
  const built = statSync(lib).mtimeMs;
  if (["native/sqlite/sqlite3.c", "build.zig"].some((f) => statSync(join(root, f)).mtimeMs > built)) return null;
  const list = spawnSync(zig, ["ar", "t", lib], { encoding: "utf8" });
  const member = (list.stdout ?? "").split("\n").find((l) => /(^|\/)sqlite3\.o$/.test(l.trim()))?.trim();
  if (list.status !== 0 || !member) return null;
  const r = spawnSync(zig, ["ar", "p", lib, member], { maxBuffer: 1 << 30 });
  if (r.status !== 0 || !r.stdout?.length) return null;
  const obj = join(cache, `sqlite3-zig-build-${sha(r.stdout)}.o`);
  if (!existsSync(obj)) {
    writeFileSync(`${obj}.tmp${process.pid}`, r.stdout);
    renameSync(`${obj}.tmp${process.pid}`, obj);
  }
  return obj;
}
const sqliteCFlags = ["-O2", ...sqliteFlags, ...posixFlags, `-I${join(root, "native", "sqlite")}`];
const fromBuild = sqliteFromBuild();
const srcFiles = engineDirs.flatMap((d) =>
  readdirSync(join(tree0.src, d)).filter((f) => f.endsWith(".c")).map((f) => (d ? `${d}/${f}` : f))).sort();
const testNames = [...new Set(mutants.flatMap((m) => m.tests))].sort();
const testHdr = headersOf(tree0.test) + srcHeaders(tree0);
// sqlite3.c (when compiled) beside the engine and the tests: the compiles share the cores.
const [sqliteObj, baseObjs, tres] = await Promise.all([
  fromBuild ?? compile("sqlite3", join(root, "native", "sqlite", "sqlite3.c"), sqliteCFlags, ""),
  compileEngine(srcFiles, tree0),
  parallel(testNames, (t) => compile(`test-${t}`, join(tree0.test, `${t}.c`), tree0.cflags, testHdr)),
]);
if (sqliteObj.error) fail(`sqlite3.c does not compile:\n${sqliteObj.error}`);
if (baseObjs.error) fail(`the engine does not compile:\n${baseObjs.error}`);
const testObjs = {};
for (let i = 0; i < testNames.length; i++) {
  if (tres[i].error) fail(`${testNames[i]} does not compile:\n${tres[i].error}`);
  testObjs[testNames[i]] = tres[i];
}
console.log(`mutate: built ${srcFiles.length} engine sources, ${testNames.length} tests, sqlite3 ${fromBuild ? "taken from zig-out/lib/libmwsqlite3.a" : "compiled"} (${secs()} s)`);

const libs = process.platform === "linux" ? ["-lpthread", "-lm", "-ldl"] : [];
async function link(test, objs, dir) {
  mkdirSync(dir, { recursive: true });
  const exe = join(dir, test);
  const r = await run(zig, ["cc", "-o", exe, testObjs[test], ...Object.values(objs), sqliteObj, ...libs], { cwd: root });
  return r.code === 0 ? exe : { error: r.out };
}

async function runTest(exe, tree, env = {}) {
  const t = Date.now();
  const r = await run(exe, [], {
    cwd: tree.dir,
    detached: true,
    timeoutS,
    env: { ...process.env, MW_TEST_SCALE: scale, ...env },
  });
  const ms = Date.now() - t;
  const ok = r.code === 0 && !r.timedOut;
  const why = r.timedOut ? `timeout after ${timeoutS} s` : r.signal ? `signal ${r.signal}` : `exit ${r.code}`;
  return { ok, why, ms, out: r.out };
}

const lastLines = (s, n = 6) => s.trim().split("\n").slice(-n).map((l) => `      ${l}`).join("\n");

// ---- baseline: every test passes without a mutant ------------------------------------------
if (baseline) {
  const exes = await parallel(testNames, (t) => link(t, baseObjs, join(bin, "base")));
  for (let i = 0; i < testNames.length; i++) if (exes[i].error) fail(`${testNames[i]} does not link:\n${exes[i].error}`);
  // As many at a time as mutants will run; the first failure stops the run.
  let next = 0;
  await Promise.all(trees.map(async () => {
    while (next < testNames.length) {
      const i = next++;
      const r = await runTest(exes[i], tree0);
      console.log(`  baseline ${testNames[i].padEnd(30)} ${r.ok ? "ok" : "FAILED"} (${(r.ms / 1000).toFixed(1)} s)`);
      if (!r.ok) fail(`${testNames[i]} fails without any mutant (${r.why}):\n${lastLines(r.out, 20)}`);
    }
  }));
}

// ---- the mutants -----------------------------------------------------------------------------
// Each worker mutates its own copy of the tree; the results keep the order of the list.
async function tryMutant(m, tree) {
  const path = join(tree.src, m.file);
  const original = readFileSync(path, "utf8");
  writeFileSync(path, original.replace(m.find, () => m.replace));
  let result;
  try {
    const objs = await compileEngine([m.file], tree);
    if (objs.error) {
      result = { id: m.id, status: "INVALID", detail: `does not compile:\n${lastLines(objs.error, 10)}` };
    } else {
      const all = { ...baseObjs, ...objs };
      result = { id: m.id, status: "SURVIVED", detail: `passed ${m.tests.join(", ")}` };
      for (const t of m.tests) {
        const exe = await link(t, all, tree.bin);
        if (exe.error) {
          result = { id: m.id, status: "INVALID", detail: `${t} does not link:\n${lastLines(exe.error, 10)}` };
          break;
        }
        const r = await runTest(exe, tree, m.env);
        if (!r.ok) {
          result = { id: m.id, status: "killed", by: t, detail: `${t}: ${r.why}`, out: r.out };
          break;
        }
      }
    }
  } finally {
    writeFileSync(path, original);
  }
  console.log(`  ${result.status.padEnd(8)} ${m.id.padEnd(32)} ${result.detail.split("\n")[0]} (${secs()} s)`);
  if (result.status === "killed") console.log(lastLines(result.out ?? "", 2));
  else if (result.detail.includes("\n")) console.log(result.detail.split("\n").slice(1).join("\n"));
  return { ...result, file: m.file, why: m.why };
}

const results = new Array(mutants.length);
{
  let next = 0;
  await Promise.all(trees.map(async (tree) => {
    while (next < mutants.length) {
      const i = next++;
      results[i] = await tryMutant(mutants[i], tree);
    }
  }));
}

// ---- summary ---------------------------------------------------------------------------------
const bad = results.filter((r) => r.status !== "killed");
console.log(`\nmutant | file | killed by | what it breaks`);
for (const r of results) console.log(`${r.id} | ${r.file} | ${r.status === "killed" ? r.by : r.status} | ${r.why}`);
console.log(`\nmutate: ${results.length - bad.length} of ${results.length} mutants killed in ${secs()} s`);
if (bad.length) {
  console.error(`mutate: ${bad.map((r) => `${r.id} ${r.status}`).join(", ")}`);
  process.exit(1);
}
