#!/usr/bin/env node
// release/platforms.mjs: runs what this x86_64 Linux machine can run of every release
// target, and prints one table: target / built / C tests / smoke / TS suite.
//   built     the target's folder in zig-out/release passes release/check-artifacts.mjs
//             (Android and iOS: the compile-only check of `zig build mobile-check`)
//   C tests   the 22 programs of native/test, built for the target and run: natively
//             (x64 musl), under qemu-user (arm64); platform_test (platform.h) for the
//             target too; Windows: platform_test.exe under Wine (the C suite is POSIX)
//   smoke     release/test/dll_smoke loads the target's released library and extension
//             at run time and uses them (under qemu-user or Wine where needed)
//   TS suite  vitest under the target's own Bun and Deno binaries (ts-emulated.mjs)
// The host row's C tests and TS suite are `npm test`, which .ci/run runs before this.
// Needs zig-out/release (release/check.mjs or `zig build release`).
//   node release/platforms.mjs [--require-all] [--no-ts]
//   --require-all  a cell that cannot run because a tool is missing fails instead of
//                  being skipped (CI installs every tool: .ci/run)
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { DEFAULT_TARGETS, TARGETS } from "./targets.mjs";
import { runEmulatedSuite } from "./ts-emulated.mjs";

const repo = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const args = process.argv.slice(2);
const requireAll = args.includes("--require-all");
const withTs = !args.includes("--no-ts");
const node = process.execPath;

function onPath(cmd) {
  return (process.env.PATH ?? "").split(":").some((d) => d && existsSync(join(d, cmd)));
}

/**
 * musl's dynamic loader for dynamically linked musl programs (dll_smoke, platform_test),
 * from Debian's `musl` package unpacked into zig-out/emu/musl/<arch>, never installed:
 * an installed /lib/ld-musl-* would tell lib/ffi/resolve.ts that this glibc system is
 * musl. `apt-get download` needs arm64 in dpkg's architectures for musl:arm64 (.ci/run).
 * Returns the loader's path, or null when it cannot be had.
 */
function muslLoader(debArch, name) {
  const root = join(repo, "zig-out", "emu", "musl", debArch);
  const loader = join(root, "lib", name);
  if (existsSync(loader)) return loader;
  const debs = join(repo, "zig-out", "emu", "debs");
  mkdirSync(debs, { recursive: true });
  const got = run(`apt-get download musl:${debArch}`, "apt-get", ["download", `musl:${debArch}`], {}, debs);
  const deb = readdirSync(debs).find((f) => f.startsWith("musl_") && f.endsWith(`_${debArch}.deb`));
  if (!got.ok || !deb) return null;
  mkdirSync(root, { recursive: true });
  const x = run(`unpack ${deb}`, "dpkg-deb", ["-x", join(debs, deb), root]);
  return x.ok && existsSync(loader) ? loader : null;
}

/** How this machine runs programs of a Linux target: the command prefix and env, or why not. */
const AARCH64_GLIBC = "/usr/aarch64-linux-gnu";
const runners = {
  "linux-x64-gnu": { prefix: [], env: {}, how: "native" },
  "linux-x64-musl": { prefix: [], env: {}, how: "native", musl: ["amd64", "ld-musl-x86_64.so.1"] },
  "linux-arm64-gnu": {
    prefix: ["qemu-aarch64"], env: { QEMU_LD_PREFIX: AARCH64_GLIBC }, how: "qemu",
    loader: `${AARCH64_GLIBC}/lib/ld-linux-aarch64.so.1`, loaderPkg: "libc6-arm64-cross",
  },
  "linux-arm64-musl": { prefix: ["qemu-aarch64"], env: {}, how: "qemu", musl: ["arm64", "ld-musl-aarch64.so.1"] },
};
const zigTriple = { "linux-x64-musl": "x86_64-linux-musl", "linux-arm64-gnu": "aarch64-linux-gnu.2.17", "linux-arm64-musl": "aarch64-linux-musl" };

/** Why a runner cannot run here (a missing tool), or null. Fetches musl's loader. */
function missing(target) {
  const r = runners[target];
  if (r.how === "qemu" && !onPath("qemu-aarch64")) return "no qemu-aarch64 (apt-get install qemu-user)";
  if (r.loader && !existsSync(r.loader)) return `no ${r.loader} (apt-get install ${r.loaderPkg})`;
  if (r.musl) {
    const loader = muslLoader(...r.musl);
    if (!loader) return `no musl loader (apt-get download musl:${r.musl[0]} or its unpacking failed${r.musl[0] === "arm64" ? "; dpkg --add-architecture arm64 and apt-get update first" : ""})`;
    r.dynamicPrefix = [...r.prefix, loader]; // the loader runs the dynamically linked program
  }
  return null;
}

const cells = {}; // target -> column -> { state: "ok" | "fail" | "skip" | "n/a", text }
const set = (target, col, state, text) => ((cells[target] ??= {})[col] = { state, text });
const unavailable = (target, col, why) => set(target, col, requireAll ? "fail" : "skip", why);
const timings = [];

function run(label, cmd, cmdArgs, env = {}, cwd = repo) {
  console.log(`\n== ${label}: ${[cmd, ...cmdArgs].map((a) => a.replace(repo + "/", "")).join(" ")}`);
  const t0 = performance.now();
  const r = spawnSync(cmd, cmdArgs, { cwd, env: { ...process.env, ...env }, encoding: "utf8", maxBuffer: 1 << 28 });
  const secs = (performance.now() - t0) / 1000;
  const out = (r.stdout ?? "") + (r.stderr ?? "");
  process.stdout.write(out.length > 20000 ? `…${out.slice(-20000)}` : out);
  timings.push([label, secs]);
  return { ok: r.status === 0, out, secs, why: r.error ? r.error.message : `exit ${r.status ?? r.signal}` };
}
const secs = (s) => `${s.toFixed(0)} s`;
/** Runs a program built for a Linux target through its runner (qemu-user or none). */
function runOn(target, label, program, programArgs) {
  const r = runners[target];
  const argv = [...(r.dynamicPrefix ?? r.prefix), program, ...programArgs];
  return run(label, argv[0], argv.slice(1), r.env);
}
const passedCount = (out) => /(\d+) passed/.exec(out)?.[1] ?? "?";

// ---------------------------------------------------------------- built
const releaseDir = join(repo, "zig-out", "release");
for (const target of DEFAULT_TARGETS) {
  if (!existsSync(join(releaseDir, target))) {
    set(target, "built", "fail", "not in zig-out/release");
    continue;
  }
  const r = run(`artifacts ${target}`, node, ["release/check-artifacts.mjs", releaseDir, target]);
  const n = /all (\d+) artifacts/.exec(r.out)?.[1] ?? "?";
  set(target, "built", r.ok ? "ok" : "fail", r.ok ? `${n} artifacts checked` : `check failed (${r.why})`);
}
const mobile = Object.keys(TARGETS).filter((t) => TARGETS[t].mobile);
{
  const r = run("Android/iOS compile check", node, ["scripts/zig.mjs", "build", "mobile-check", "--summary", "none"]);
  for (const target of mobile) {
    if (existsSync(join(releaseDir, target))) {
      const c = run(`artifacts ${target}`, node, ["release/check-artifacts.mjs", releaseDir, target]);
      set(target, "built", c.ok ? "ok" : "fail", c.ok ? "ok (SDK)" : `check failed (${c.why})`);
    } else set(target, "built", r.ok ? "ok" : "fail", r.ok ? "compiles (no SDK: no link)" : `compile check failed (${r.why})`);
  }
}

// ---------------------------------------------------------------- C tests
const testNames = readdirSync(join(repo, "native", "test")).filter((f) => f.endsWith(".c")).map((f) => f.slice(0, -2));
const programs = testNames.length;
set("linux-x64-gnu", "C tests", "ok", `${programs}/${programs} in npm test`);
set("linux-x64-gnu", "TS suite", "ok", "Bun, Deno in npm test");

const testPrograms = run("test programs for the emulated targets", node, ["scripts/zig.mjs", "build", "emulated-tests", "--summary", "none"]);
for (const target of Object.keys(zigTriple)) {
  const why = missing(target);
  if (why) {
    unavailable(target, "C tests", why);
    unavailable(target, "smoke", why);
    continue;
  }
  const r = runners[target];
  const zigArgs = ["scripts/zig.mjs", "build", "test", `-Dtarget=${zigTriple[target]}`, "--summary", "all"];
  if (r.how === "qemu") zigArgs.push("-fqemu");
  if (TARGETS[target].libc === "glibc") zigArgs.push("--glibc-runtimes", "/usr");
  const t = run(`C tests ${target}`, node, zigArgs);
  const passedSet = new Set([...t.out.matchAll(/run (test_\w+) success/g)].map((m) => m[1]));
  const passed = passedSet.size;
  // The failing programs by name: the table is what survives of a long CI log.
  const failedNames = testNames.filter((n) => !passedSet.has(n));
  // platform.h's contract with the target's C library.
  const scratch = mkdtempSync(join(tmpdir(), "mw-platform-"));
  const exe = (name) => join(repo, "zig-out", "release-test", target, name);
  const p = testPrograms.ok ? runOn(target, `platform_test ${target}`, exe("platform_test"), [scratch]) : { ok: false, out: "" };
  const ok = t.ok && passed === programs && p.ok;
  const notPassed = failedNames.length ? ` (not passed: ${failedNames.join(" ")})` : "";
  set(target, "C tests", ok ? "ok" : "fail", `${passed}/${programs}${notPassed}${p.ok ? ` + platform_test ${passedCount(p.out)}` : " platform_test FAILED"} (${r.how}, ${secs(t.secs)})`);
  // The released library loaded at run time.
  const rel = (role) => join(releaseDir, target, TARGETS[target].files[role]);
  const s = testPrograms.ok ? runOn(target, `library smoke ${target}`, exe("dll_smoke"), [rel("shared"), rel("extension"), scratch]) : { ok: false, out: "", why: "not built" };
  set(target, "smoke", s.ok ? "ok" : "fail", s.ok ? `${passedCount(s.out)} checks (${r.how})` : `FAILED (${s.why})`);
  rmSync(scratch, { recursive: true, force: true });
}

// The host's smoke: the released library (not zig-out/lib) loaded by dll_smoke.
{
  const target = "linux-x64-gnu";
  const b = run("host test programs", node, ["scripts/zig.mjs", "build", "release-tests", "--summary", "none"]);
  const scratch = mkdtempSync(join(tmpdir(), "mw-smoke-"));
  const rel = (t, role) => join(releaseDir, t, TARGETS[t].files[role]);
  const s = b.ok ? run("library smoke linux-x64-gnu", join(repo, "zig-out", "release-test", "dll_smoke"), [rel(target, "shared"), rel(target, "extension"), scratch]) : { ok: false, why: "not built", out: "" };
  set(target, "smoke", s.ok ? "ok" : "fail", s.ok ? `${passedCount(s.out)} checks (native)` : `FAILED (${s.why})`);

  // Windows under Wine: platform.h's Windows implementation and the released DLLs.
  const win = "win32-x64";
  if (!onPath("wine")) {
    unavailable(win, "C tests", "no wine (apt-get install wine64)");
    unavailable(win, "smoke", "no wine (apt-get install wine64)");
  } else if (!b.ok) {
    set(win, "C tests", "fail", "test programs not built");
    set(win, "smoke", "fail", "test programs not built");
  } else {
    const env = { WINEDEBUG: process.env.WINEDEBUG ?? "-all" };
    const p = run("platform_test.exe (Wine)", "wine", ["zig-out/release-test/platform_test.exe", scratch], env);
    set(win, "C tests", p.ok ? "ok" : "fail", `${p.ok ? "" : "FAILED "}platform_test ${passedCount(p.out)} (Wine; the ${programs} programs are POSIX)`);
    const w = run("dll_smoke.exe (Wine)", "wine", ["zig-out/release-test/dll_smoke.exe", rel(win, "shared"), rel(win, "extension"), scratch], env);
    set(win, "smoke", w.ok ? "ok" : "fail", w.ok ? `${passedCount(w.out)} checks (Wine)` : `FAILED (${w.why})`);
  }
  rmSync(scratch, { recursive: true, force: true });
}

// ---------------------------------------------------------------- TS suite
if (withTs) {
  for (const [target, result] of Object.entries(runEmulatedSuite({ repo, releaseDir, run, requireAll }))) {
    set(target, "TS suite", result.state, result.text);
  }
}

// ---------------------------------------------------------------- what cannot run here
const cannot = {
  "darwin-x64": "no macOS emulator for Linux",
  "darwin-arm64": "no macOS emulator for Linux",
};
for (const t of ["darwin-x64", "darwin-arm64"]) for (const c of ["C tests", "smoke", "TS suite"]) set(t, c, "n/a", cannot[t]);
for (const t of mobile) for (const c of ["C tests", "smoke", "TS suite"]) set(t, c, "n/a", c === "TS suite" ? "no Bun/Deno there" : "needs the SDK and a device/simulator");

// ---------------------------------------------------------------- the table
const columns = ["built", "C tests", "smoke", "TS suite"];
const mark = { ok: "ok  ", fail: "FAIL", skip: "skip", "n/a": "n/a " };
const rows = Object.keys(TARGETS).map((t) => [t, ...columns.map((c) => (cells[t]?.[c] ? `${mark[cells[t][c].state]} ${cells[t][c].text}` : "n/a  not run"))]);
const widths = [0, 1, 2, 3, 4].map((i) => Math.max(...[["target", ...columns][i], ...rows.map((r) => r[i])].map((s) => s.length)));
const line = (r) => r.map((s, i) => s.padEnd(widths[i])).join(" | ");
console.log(`\n== platforms\n${line(["target", ...columns])}\n${widths.map((w) => "-".repeat(w)).join("-|-")}`);
for (const r of rows) console.log(line(r));
const failed = Object.entries(cells).flatMap(([t, cs]) => Object.entries(cs).filter(([, c]) => c.state === "fail").map(([c]) => `${t} ${c}`));
const total = timings.reduce((a, [, s]) => a + s, 0);
const all = Object.values(cells).flatMap((cs) => Object.values(cs));
const count = (state) => all.filter((c) => c.state === state).length;
console.log(`\n${failed.length ? `FAILED: ${failed.join(", ")}` : "every cell that runs here passed"} (${secs(total)})`);
console.log(`platforms: ${count("ok")} passed, ${count("fail")} failed, ${count("skip")} skipped`);
process.exit(failed.length ? 1 : 0);
