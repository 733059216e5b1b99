#!/usr/bin/env node
// `npm test`: the suite, step by step: the build, every C test, the TypeScript suites under
// Bun and Deno, the checks (a few minutes). `npm run test:full` (`--full`) adds the heavy
// stages: sanitizers, fuzzing, the benchmark smoke, mutation testing, the other platforms
// under emulation and SQLite's Tcl suite (what CI runs). Each step prints what it runs; the
// first failure stops the run with a non-zero exit; the end prints one summary line.
// What a step needs from the system is checked before anything runs, in one message.
// To add a step, add an entry to STEPS: { name, cmd: [program, ...args] } (a function
// returning the array is fine when the program has to be found first), `full: true` for
// the heavy stages, `needs: [...]` for the system programs it runs.
import { spawn, spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { root, zigBinary } from "./bootstrap.mjs";
import { killGroup, stillRunning } from "./process-group.mjs";

const full = process.argv.includes("--full");

const bin = (name) => join(root, "node_modules", ".bin", name);

const STEPS = [
  { name: "bootstrap", cmd: ["node", "scripts/bootstrap.mjs"] },
  { name: "zig build", cmd: ["node", "scripts/zig.mjs", "build"] },
  { name: "C tests (zig build test)", cmd: ["node", "scripts/zig.mjs", "build", "test"], needs: ["sqlite3"] },
  { name: "binding is current", cmd: ["node", "scripts/gen-binding.mjs", "--check"] },
  // The mutants of scripts/mutants.mjs still find their snippets (--full runs them).
  { name: "mutants follow the code", cmd: ["node", "scripts/mutate.mjs", "--check"] },
  // The current tables of docs/bench-results.md are what their committed run folders give
  // (node bench/report.mjs --update-doc rewrites them; reads only committed files).
  { name: "benchmark tables are current", cmd: ["node", "bench/report.mjs", "--check"] },
  // The engine's includes follow its layers (docs/design/engine.md, "Layers").
  { name: "layers of native/src", cmd: ["node", "scripts/layers.mjs"] },
  { name: "type check lib/ (tsc --noEmit)", cmd: () => [bin("tsc"), "-p", "tsconfig.json", "--noEmit"] },
  { name: "type check lib/ (deno check)", cmd: () => [bin("deno"), "check", "lib/mod.ts"] },
  { name: "lint lib/ (deno lint)", cmd: () => [bin("deno"), "lint", "lib"] },
  { name: "vitest under Bun", cmd: () => [bin("bun"), "--bun", bin("vitest"), "run"], vitest: true },
  { name: "vitest under Deno", cmd: () => [bin("deno"), "run", "-A", "npm:vitest", "run"], vitest: true },
  { name: "type check bench/", cmd: () => [bin("tsc"), "-p", "bench"] },
  { name: "lint bench/ts (deno lint)", cmd: () => [bin("deno"), "lint", "bench/ts"] },
  { name: "type check examples/ (tsc, deno check)", cmd: ["bash", "-c", "node_modules/.bin/tsc -p examples && node_modules/.bin/deno check examples/deno/*/*.ts"] },
  // ---- the heavy stages: npm run test:full ----
  // Every C test again under ASan+UBSan and under TSan (Debian's clang; sqlite3.o is kept
  // in zig-out/sanitize between runs).
  { name: "sanitizers (ASan+UBSan, TSan)", cmd: ["bash", "scripts/sanitize.sh"], full: true, needs: ["clang", "libclang-rt"] },
  // libFuzzer targets of native/fuzz, 25 s each from the committed corpus (a longer run:
  // scripts/fuzz.sh 1800); reuses the ASan sqlite3.o of the step above.
  { name: "fuzzing (scripts/fuzz.sh, bounded)", cmd: ["bash", "scripts/fuzz.sh", "25"], full: true, needs: ["clang", "libclang-rt"] },
  { name: "benchmark smoke (bench/smoke.sh)", cmd: ["bash", "bench/smoke.sh"], full: true },
  // The example services behind Bun.serve under wrk, engine and stock, a second each, every
  // file checked with stock sqlite3 (bench/server/run.mjs --smoke; a broken invariant fails).
  { name: "server benchmark smoke (bench/server --smoke)", cmd: ["node", "bench/server/run.mjs", "--smoke"], full: true, needs: ["wrk", "sqlite3"] },
  // The shop under wrk with one of its 2 server processes killed (SIGKILL) and restarted,
  // a slow client and clients that hang up; every acknowledged order id looked up in the
  // file (bench/server/faults.mjs --smoke: Bun and Deno, about 20 s).
  { name: "faults under load smoke (bench/server/faults.mjs --smoke)", cmd: ["node", "bench/server/faults.mjs", "--smoke"], full: true, needs: ["wrk", "sqlite3"] },
  // Every mutant of scripts/mutants.mjs must be killed by its C tests (docs/testing.md,
  // "Mutation testing"): the tests at MW_TEST_SCALE=0.25, 180 s per test run, the stage
  // at 15 minutes (under 6 minutes on 2 busy cores from an empty cache).
  { name: "mutation testing (scripts/mutate.mjs)", cmd: ["timeout", "900", "node", "scripts/mutate.mjs"], full: true },
  // Every release target (what the next two steps and release/check.mjs use).
  { name: "release build (zig build release)", cmd: ["node", "scripts/zig.mjs", "build", "release", "--summary", "none"], full: true },
  // The targets this x86_64 machine can run, emulated: C tests, library smoke, TS suite;
  // ends with the table of what ran on each target (every tool must be there).
  { name: "other platforms (release/platforms.mjs)", cmd: ["node", "release/platforms.mjs", "--require-all"], full: true, needs: ["qemu-aarch64", "wine64"], limit: 2700 },
  // SQLite's own Tcl test suite with the engine as the default VFS, compared with the
  // expected differences (docs/sqlite-tests.md).
  { name: "SQLite's Tcl suite (scripts/sqlite-tcl/run.sh)", cmd: ["bash", "scripts/sqlite-tcl/run.sh"], full: true, needs: ["tcl-dev"] },
].filter((step) => full || !step.full);

// What each system need is, how it is found, and the Debian package that brings it.
const NEEDS = {
  sqlite3: { found: () => existsSync("/usr/bin/sqlite3"), pkg: "sqlite3", why: "the shell tests load the extension into /usr/bin/sqlite3" },
  wrk: { found: () => onPath("wrk"), pkg: "wrk", why: "the server benchmark's smoke run (HTTP load)" },
  clang: { found: () => onPath("clang"), pkg: "clang", why: "the sanitizer and fuzzing builds" },
  "libclang-rt": { found: () => hasClangRuntime(), pkg: "libclang-rt-14-dev (or the one of your clang)", why: "the sanitizers' runtime" },
  "qemu-aarch64": { found: () => onPath("qemu-aarch64"), pkg: "qemu-user", why: "the arm64 targets" },
  wine64: { found: () => onPath("wine64") || onPath("wine"), pkg: "wine64", why: "the Windows targets" },
  "tcl-dev": { found: () => existsSync("/usr/lib/tcl8.6/tclConfig.sh") || process.getuid?.() === 0, pkg: "tcl-dev", why: "SQLite's testfixture (run.sh installs it when run as root)" },
};

function onPath(cmd) {
  return spawnSync("sh", ["-c", `command -v ${cmd}`], { stdio: "ignore" }).status === 0;
}

function hasClangRuntime() {
  if (!onPath("clang")) return false;
  const r = spawnSync("clang", ["-print-resource-dir"], { encoding: "utf8" });
  const dir = (r.stdout ?? "").trim();
  return dir !== "" && (existsSync(join(dir, "lib", "linux")) || existsSync(join(dir, "lib", "x86_64-unknown-linux-gnu")) || existsSync(join(dir, "lib", "aarch64-unknown-linux-gnu")));
}

// Before anything runs: what this machine lacks for the steps chosen, in one message.
function checkPrerequisites() {
  const missing = [];
  if (Number(process.versions.node.split(".")[0]) < 20) missing.push(`Node.js 20 or newer (this is ${process.versions.node})`);
  if (!existsSync(zigBinary) && spawnSync("python3", ["-m", "pip", "--version"], { stdio: "ignore" }).status !== 0) {
    missing.push("python3 with pip (Zig comes from PyPI): Debian packages python3, python3-pip");
  }
  const wanted = new Set(STEPS.flatMap((s) => s.needs ?? []));
  for (const need of wanted) {
    const n = NEEDS[need];
    if (!n.found()) missing.push(`${need}: Debian package ${n.pkg} (${n.why})`);
  }
  if (missing.length === 0) return;
  console.error(`npm ${full ? "run test:full" : "test"}: this machine lacks what the suite needs; install, then run it again:`);
  for (const m of missing) console.error(`  - ${m}`);
  process.exit(2);
}
checkPrerequisites();

const strip = (s) => s.replace(/\x1b\[[0-9;]*m/g, "");

/** The longest a step may take (s) unless it says (`limit`): then it is killed and fails, so
 * that a hang ends as a failure with its output before CI's own limit (90 minutes). */
const STEP_LIMIT_S = 1800;
let current = null; // the running step's process (its own group)
for (const sig of ["SIGINT", "SIGTERM"]) {
  process.on(sig, () => {
    if (current) killGroup(current.pid, "SIGTERM");
    process.exit(130);
  });
}

function run(step) {
  const [program, ...args] = typeof step.cmd === "function" ? step.cmd() : step.cmd;
  const limit = step.limit ?? STEP_LIMIT_S;
  console.log(`\n=== ${step.name}: ${[program, ...args].join(" ")}`);
  return new Promise((resolve) => {
    // A group of its own, so that the limit (or ^C here) stops what the step started too.
    const child = spawn(program, args, { cwd: root, stdio: ["ignore", "pipe", "pipe"], detached: true });
    current = child;
    let output = "", ended = false;
    child.stdout.on("data", (d) => {
      process.stdout.write(d);
      output += d;
    });
    child.stderr.on("data", (d) => {
      process.stderr.write(d);
      output += d;
    });
    const end = (r) => {
      if (ended) return;
      ended = true;
      current = null;
      clearTimeout(timer);
      resolve(r);
    };
    const timer = setTimeout(() => {
      // Name what still ran (its session, as detached made it, with each process's age).
      const note = `\n${step.name}: KILLED after its limit of ${limit} s; still running then (ps):\n` +
        `${stillRunning(child.pid)}\n`;
      process.stderr.write(note);
      output += note;
      killGroup(child.pid, "SIGKILL");
      // A process that left the group may hold the pipes open: end without them.
      setTimeout(() => end({ code: 124, output }), 5000);
    }, limit * 1000);
    child.on("error", (e) => end({ code: 127, output: String(e) }));
    child.on("close", (code, signal) => end({ code: code ?? (signal ? 128 : 1), output }));
  });
}

const started = Date.now();
const done = [];
let failed = null;
for (const step of STEPS) {
  const t0 = Date.now();
  const { code, output } = await run(step);
  const secs = ((Date.now() - t0) / 1000).toFixed(1);
  let detail = "";
  if (step.vitest) {
    const m = /Tests\s+(.*?)\s*\(\d+\)/.exec(strip(output));
    if (m) detail = ` (tests: ${m[1]})`;
  }
  if (code !== 0) {
    failed = { step, code, secs, detail, output };
    console.error(`\n--- FAILED: ${step.name} (exit ${code}, ${secs} s)${detail}`);
    break;
  }
  done.push(`${step.name}${detail} ${secs} s`);
  console.log(`--- ok: ${step.name} (${secs} s)${detail}`);
}

const total = ((Date.now() - started) / 1000).toFixed(1);
console.log("\n=== summary");
for (const d of done) console.log(`  ok    ${d}`);
if (failed) console.log(`  FAIL  ${failed.step.name} (exit ${failed.code})${failed.detail}`);
const notRun = STEPS.length - done.length - (failed ? 1 : 0);
console.log(`${notRun ? `${notRun} steps not run; ` : ""}${total} s in all`);
console.log(`steps: ${done.length} passed, ${failed ? 1 : 0} failed`);
if (failed) {
  // CI shows only the end of a long log: the failing step's error lines come again here.
  const lines = strip(failed.output).split("\n");
  const errors = lines.filter((l) => /CHECK failed|returned -?\d+, wanted|FAIL|REPORT|ERROR|runtime error|Error:|AssertionError|panic/.test(l));
  console.log(`\n=== what failed in ${failed.step.name} (its error lines, at most 20, then its last 10 lines)`);
  for (const l of errors.slice(-20)) console.log(`  ${l.slice(0, 300)}`);
  console.log("  ...");
  for (const l of lines.slice(-10)) console.log(`  ${l.slice(0, 300)}`);
}
process.exit(failed ? 1 : 0);
