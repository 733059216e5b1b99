#!/usr/bin/env node
// `npm test`: the whole suite, step by step. Each step prints what it runs; the first
// failure stops the run with a non-zero exit; the end prints one summary line.
// To add a step, add an entry to STEPS: { name, cmd: [program, ...args] } (a function
// returning the array is fine when the program has to be found first).
import { spawn } from "node:child_process";
import { join } from "node:path";
import { root } from "./bootstrap.mjs";

const bin = (name) => join(root, "node_modules", ".bin", name);

const STEPS = [
  { name: "bootstrap", cmd: ["node", "scripts/bootstrap.mjs"] },
  { name: "zig build", cmd: ["node", "scripts/zig.mjs", "build"] },
  { name: "C tests (zig build test)", cmd: ["node", "scripts/zig.mjs", "build", "test"] },
  // Every C test again under ASan+UBSan and under TSan (Debian's clang; sqlite3.o is kept
  // in zig-out/sanitize between runs).
  { name: "sanitizers (ASan+UBSan, TSan)", cmd: ["bash", "scripts/sanitize.sh"] },
  // libFuzzer targets of native/fuzz, 25 s each from the committed corpus (a longer run:
  // scripts/fuzz.sh 1800); reuses the ASan sqlite3.o of the step above.
  { name: "fuzzing (scripts/fuzz.sh, bounded)", cmd: ["bash", "scripts/fuzz.sh", "25"] },
  { name: "binding is current", cmd: ["node", "scripts/gen-binding.mjs", "--check"] },
  // The mutants of scripts/mutants.mjs still find their snippets (CI runs them after npm test).
  { name: "mutants follow the code", cmd: ["node", "scripts/mutate.mjs", "--check"] },
  // The engine's includes follow its layers (docs/design.md, "Files").
  { name: "layers of native/src", cmd: ["node", "scripts/layers.mjs"] },
  { name: "type check lib/ (tsc --noEmit)", cmd: () => [bin("tsc"), "-p", "tsconfig.json", "--noEmit"] },
  { name: "type check lib/ (deno check)", cmd: () => [bin("deno"), "check", "lib/mod.ts"] },
  { name: "lint lib/ (deno lint)", cmd: () => [bin("deno"), "lint", "lib"] },
  { name: "vitest under Bun", cmd: () => [bin("bun"), "--bun", bin("vitest"), "run"], vitest: true },
  { name: "vitest under Deno", cmd: () => [bin("deno"), "run", "-A", "npm:vitest", "run"], vitest: true },
  { name: "type check bench/", cmd: () => [bin("tsc"), "-p", "bench"] },
  { name: "lint bench/ts (deno lint)", cmd: () => [bin("deno"), "lint", "bench/ts"] },
  { name: "benchmark smoke (bench/smoke.sh)", cmd: ["bash", "bench/smoke.sh"] },
];

const strip = (s) => s.replace(/\x1b\[[0-9;]*m/g, "");

function run(step) {
  const [program, ...args] = typeof step.cmd === "function" ? step.cmd() : step.cmd;
  console.log(`\n=== ${step.name}: ${[program, ...args].join(" ")}`);
  return new Promise((resolve) => {
    const child = spawn(program, args, { cwd: root, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (d) => {
      process.stdout.write(d);
      output += d;
    });
    child.stderr.on("data", (d) => {
      process.stderr.write(d);
      output += d;
    });
    child.on("error", (e) => resolve({ code: 127, output: String(e) }));
    child.on("close", (code, signal) => resolve({ code: code ?? (signal ? 128 : 1), output }));
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
