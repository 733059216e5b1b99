#!/usr/bin/env node
// `npm test`: the whole suite, step by step. Each step prints what it runs; the first
// failure stops the run with a non-zero exit; the end prints one summary line.
// To add a step, add an entry to STEPS: { name, cmd: [program, ...args] } (a function
// returning the array is fine when the program has to be found first).
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { root } from "./bootstrap.mjs";

const bin = (name) => join(root, "node_modules", ".bin", name);

// npm installs Bun's real binary in a per-platform package; node_modules/.bin/bun is a
// placeholder until Bun's postinstall (which --ignore-scripts skips) replaces it.
function bunBinary() {
  const arch = process.arch;
  const os = process.platform === "win32" ? "windows" : process.platform;
  const exe = process.platform === "win32" ? "bun.exe" : "bun";
  for (const variant of ["", "-musl", "-baseline", "-musl-baseline"]) {
    const p = join(root, "node_modules", "@oven", `bun-${os}-${arch}${variant}`, "bin", exe);
    if (existsSync(p)) return p;
  }
  return bin("bun");
}

const STEPS = [
  { name: "bootstrap", cmd: ["node", "scripts/bootstrap.mjs"] },
  { name: "zig build", cmd: ["node", "scripts/zig.mjs", "build"] },
  { name: "C tests (zig build test)", cmd: ["node", "scripts/zig.mjs", "build", "test"] },
  { name: "binding is current", cmd: ["node", "scripts/gen-binding.mjs", "--check"] },
  { name: "type check lib/ (tsc --noEmit)", cmd: () => [bin("tsc"), "-p", "tsconfig.json", "--noEmit"] },
  { name: "type check lib/ (deno check)", cmd: () => [bin("deno"), "check", "lib/mod.ts"] },
  { name: "lint lib/ (deno lint)", cmd: () => [bin("deno"), "lint", "lib"] },
  { name: "vitest under Bun", cmd: () => [bunBinary(), "--bun", bin("vitest"), "run"], vitest: true },
  { name: "vitest under Deno", cmd: () => [bin("deno"), "run", "-A", "npm:vitest", "run"], vitest: true },
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
    failed = { step, code, secs, detail };
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
console.log(
  `${done.length} passed, ${failed ? 1 : 0} failed${notRun ? `, ${notRun} not run` : ""} (steps) in ${total} s`,
);
process.exit(failed ? 1 : 0);
