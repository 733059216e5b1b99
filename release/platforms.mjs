#!/usr/bin/env node
// release/platforms.mjs: runs what this x86_64 Linux machine can run of every release
// target, and prints one table: target / built / C tests / smoke / TS suite.
//   built     the target's folder in zig-out/release passes release/check-artifacts.mjs
//             (Android and iOS: the compile-only check of `zig build mobile-check`)
//   C tests   the programs of native/test, built for the target and run at
//             MW_TEST_SCALE=0.25: natively (x64 musl), under qemu-user (arm64);
//             platform_test (platform.h) for the target too; Windows: platform_test.exe
//             under Wine (the C suite is POSIX)
//   smoke     release/test/dll_smoke loads the target's released library and extension
//             at run time and uses them (under qemu-user or Wine where needed)
//   TS suite  vitest under the target's own Bun and Deno binaries (ts-emulated.mjs)
// The host row's C tests and TS suite are `npm test`, which .ci/run runs before this.
// Needs zig-out/release (release/check.mjs or `zig build release`).
// After the builds, the runs go in two lanes at once: the C tests of linux-arm64-gnu then
// linux-arm64-musl (each as before: `zig build test`, two programs at a time); and the TS
// suite under qemu (Bun, then Deno), the C tests of linux-x64-musl, the host's smoke and
// Wine. The emulated C tests spend most of their time waiting (syncs, sleeps, child
// processes: about 40% of the 2 cores used when a target runs alone), so the TS suite,
// which runs one file at a time, takes the idle core. Two lanes, not more: some tests
// check latencies (test_engine_turn_cross: no transaction held 250 ms), which a
// machine loaded far beyond its cores breaks. Each run's output is printed whole when it
// ends; a run that outlasts MW_PLATFORMS_RUN_LIMIT_S (900 s) is killed and fails.
// MW_PLATFORMS_SERIAL=1 runs everything one after the other.
//   node release/platforms.mjs [--require-all] [--no-ts]
//   --require-all  a cell that cannot run because a tool is missing fails instead of
//                  being skipped (CI installs every tool: .ci/run)
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { killGroup, stillRunning } from "../scripts/process-group.mjs";
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

const show = (cmd, cmdArgs) => [cmd, ...cmdArgs].map((a) => a.replace(repo + "/", "")).join(" ");
const printOut = (out) => process.stdout.write(out.length > 20000 ? `…${out.slice(-20000)}` : out);
function run(label, cmd, cmdArgs, env = {}, cwd = repo) {
  console.log(`\n== ${label}: ${show(cmd, cmdArgs)}`);
  const t0 = performance.now();
  const r = spawnSync(cmd, cmdArgs, { cwd, env: { ...process.env, ...env }, encoding: "utf8", maxBuffer: 1 << 28 });
  const secs = (performance.now() - t0) / 1000;
  const out = (r.stdout ?? "") + (r.stderr ?? "");
  printOut(out);
  timings.push([label, secs]);
  return { ok: r.status === 0, out, secs, why: r.error ? r.error.message : `exit ${r.status ?? r.signal}` };
}
/** The longest one run of the lanes may take (s): then it is killed and fails, so that a
 * hang (once seen under qemu) ends as a failure with its output, not as CI's timeout. */
const RUN_LIMIT_S = Number(process.env.MW_PLATFORMS_RUN_LIMIT_S ?? 900);
const active = new Set(); // the lanes' running processes (each the leader of its group)
for (const sig of ["SIGINT", "SIGTERM"]) {
  process.on(sig, () => {
    for (const pid of active) killGroup(pid);
    process.exit(130);
  });
}
/** run() for the lanes: the output is kept and printed in one piece when the run ends. */
function runAsync(label, cmd, cmdArgs, env = {}, cwd = repo) {
  console.log(`\n== started: ${label}`);
  const t0 = performance.now();
  return new Promise((resolve) => {
    // A group of its own, so that the limit kills what the run started too.
    const child = spawn(cmd, cmdArgs, { cwd, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"], detached: true });
    const chunks = [];
    child.stdout.on("data", (d) => chunks.push(d));
    child.stderr.on("data", (d) => chunks.push(d));
    let error = null, timedOut = false, ended = false;
    child.on("error", (e) => (error = e));
    const end = (code, signal) => {
      if (ended) return;
      ended = true;
      clearTimeout(timer);
      active.delete(child.pid);
      const secs = (performance.now() - t0) / 1000;
      const out = Buffer.concat(chunks).toString("utf8");
      console.log(`\n== ${label} (${secs.toFixed(0)} s${timedOut ? `, KILLED after the limit of ${RUN_LIMIT_S} s` : ""}): ${show(cmd, cmdArgs)}`);
      printOut(out);
      timings.push([label, secs]);
      const why = timedOut ? `timed out (${RUN_LIMIT_S} s)` : error ? error.message : `exit ${code ?? signal}`;
      resolve({ ok: code === 0 && !error && !timedOut, out, secs, why });
    };
    if (child.pid) active.add(child.pid);
    const timer = setTimeout(() => {
      timedOut = true;
      // Name what still ran (a zig build prints nothing of a test that never ends): the
      // run's session, as detached made it, with each process's age.
      chunks.push(Buffer.from(`\n== still running when the limit came (ps):\n${stillRunning(child.pid)}`));
      killGroup(child.pid);
      // A process that escaped the group may hold the pipes open: end without them.
      setTimeout(() => end(null, "SIGKILL"), 5000);
    }, RUN_LIMIT_S * 1000);
    child.on("close", end);
  });
}
const secs = (s) => `${s.toFixed(0)} s`;
/** Runs a program built for a Linux target through its runner (qemu-user or none). */
function runOn(target, label, program, programArgs) {
  const r = runners[target];
  const argv = [...(r.dynamicPrefix ?? r.prefix), program, ...programArgs];
  return runAsync(label, argv[0], argv.slice(1), r.env);
}
/** Runs the lanes (async functions) at once, or one after the other with MW_PLATFORMS_SERIAL=1. */
async function lanes(...fns) {
  if (process.env.MW_PLATFORMS_SERIAL === "1") {
    for (const f of fns) await f();
  } else {
    await Promise.all(fns.map((f) => f()));
  }
}
const t0 = performance.now();
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
const hostPrograms = run("host test programs", node, ["scripts/zig.mjs", "build", "release-tests", "--summary", "none"]);
// What each Linux target lacks (this fetches musl's loaders), before the lanes start.
const why = Object.fromEntries(Object.keys(zigTriple).map((target) => [target, missing(target)]));

/** The C tests of one Linux target, its platform_test and the smoke of its released library. */
async function linuxTarget(target) {
  if (why[target]) {
    unavailable(target, "C tests", why[target]);
    unavailable(target, "smoke", why[target]);
    return;
  }
  const r = runners[target];
  const zigArgs = ["scripts/zig.mjs", "build", "test", `-Dtarget=${zigTriple[target]}`, "--summary", "all"];
  if (r.how === "qemu") zigArgs.push("-fqemu");
  if (TARGETS[target].libc === "glibc") zigArgs.push("--glibc-runtimes", "/usr");
  // At a quarter of their loops (MW_TEST_SCALE, as mutation testing runs them): the host runs
  // them whole in `npm test`; here they check the same code built for the target. Whole,
  // test_faults alone took 6 minutes under qemu.
  const t = await runAsync(`C tests ${target}`, node, zigArgs, { MW_TEST_SCALE: process.env.MW_TEST_SCALE ?? "0.25" });
  if (!t.ok) {
    // The failing programs' own lines (the summary tree may push them out of the tail).
    const lines = t.out.split("\n").filter((l) => /CHECK failed|CHECK_RC|FAIL|error:|Assertion|panic|signal/.test(l));
    console.log(`C tests ${target}: the error lines (at most 40)\n${lines.slice(0, 40).join("\n")}`);
  }
  const passedSet = new Set([...t.out.matchAll(/run (test_\w+) success/g)].map((m) => m[1]));
  const passed = passedSet.size;
  // The failing programs by name: the table is what survives of a long CI log.
  const failedNames = testNames.filter((n) => !passedSet.has(n));
  // platform.h's contract with the target's C library.
  const scratch = mkdtempSync(join(tmpdir(), "mw-platform-"));
  const exe = (name) => join(repo, "zig-out", "release-test", target, name);
  const p = testPrograms.ok ? await runOn(target, `platform_test ${target}`, exe("platform_test"), [scratch]) : { ok: false, out: "" };
  const ok = t.ok && passed === programs && p.ok;
  const notPassed = t.why.startsWith("timed out") ? ` (${t.why})` : failedNames.length ? ` (not passed: ${failedNames.join(" ")})` : "";
  set(target, "C tests", ok ? "ok" : "fail", `${passed}/${programs}${notPassed}${p.ok ? ` + platform_test ${passedCount(p.out)}` : " platform_test FAILED"} (${r.how}, ${secs(t.secs)})`);
  // The released library loaded at run time.
  const rel = (role) => join(releaseDir, target, TARGETS[target].files[role]);
  const s = testPrograms.ok ? await runOn(target, `library smoke ${target}`, exe("dll_smoke"), [rel("shared"), rel("extension"), scratch]) : { ok: false, out: "", why: "not built" };
  set(target, "smoke", s.ok ? "ok" : "fail", s.ok ? `${passedCount(s.out)} checks (${r.how})` : `FAILED (${s.why})`);
  rmSync(scratch, { recursive: true, force: true });
}

/** The host's smoke: the released library (not zig-out/lib) loaded by dll_smoke; Windows under Wine. */
async function hostAndWindows() {
  const target = "linux-x64-gnu";
  const b = hostPrograms;
  const scratch = mkdtempSync(join(tmpdir(), "mw-smoke-"));
  const rel = (t, role) => join(releaseDir, t, TARGETS[t].files[role]);
  const s = b.ok ? await runAsync("library smoke linux-x64-gnu", join(repo, "zig-out", "release-test", "dll_smoke"), [rel(target, "shared"), rel(target, "extension"), scratch]) : { ok: false, why: "not built", out: "" };
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
    // A Wine prefix of this run's own (the user's ~/.wine is left alone), made first with
    // wineboot. A prefix that wine made on first use while the emulated lanes loaded the
    // machine once came out broken ("could not load kernel32.dll", every program failed):
    // then it is made again, once.
    const prefix = join(repo, "zig-out", "wine-prefix");
    const env = { WINEDEBUG: process.env.WINEDEBUG ?? "-all", WINEPREFIX: prefix };
    const boot = () => runAsync("Wine prefix (wineboot --init)", "wine", ["wineboot", "--init"], env);
    const broken = (r) => !r.ok && r.out.includes("could not load kernel32.dll");
    if (!existsSync(prefix)) await boot();
    let p = await runAsync("platform_test.exe (Wine)", "wine", ["zig-out/release-test/platform_test.exe", scratch], env);
    if (broken(p)) {
      rmSync(prefix, { recursive: true, force: true });
      await boot();
      p = await runAsync("platform_test.exe (Wine), prefix made again", "wine", ["zig-out/release-test/platform_test.exe", scratch], env);
    }
    set(win, "C tests", p.ok ? "ok" : "fail", `${p.ok ? "" : "FAILED "}platform_test ${passedCount(p.out)} (Wine; the ${programs} programs are POSIX)`);
    const w = await runAsync("dll_smoke.exe (Wine)", "wine", ["zig-out/release-test/dll_smoke.exe", rel(win, "shared"), rel(win, "extension"), scratch], env);
    set(win, "smoke", w.ok ? "ok" : "fail", w.ok ? `${passedCount(w.out)} checks (Wine)` : `FAILED (${w.why})`);
  }
  rmSync(scratch, { recursive: true, force: true });
}

/** vitest under the emulated runtimes (ts-emulated.mjs). */
async function tsSuite() {
  if (!withTs) return;
  for (const [target, result] of Object.entries(await runEmulatedSuite({ repo, releaseDir, run: runAsync, requireAll }))) {
    set(target, "TS suite", result.state, result.text);
  }
}

// ---------------------------------------------------------------- the lanes
await lanes(
  async () => {
    await linuxTarget("linux-arm64-gnu");
    await linuxTarget("linux-arm64-musl");
  },
  async () => {
    await tsSuite();
    await linuxTarget("linux-x64-musl");
    await hostAndWindows();
  },
);

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
const total = (performance.now() - t0) / 1000;
const all = Object.values(cells).flatMap((cs) => Object.values(cs));
const count = (state) => all.filter((c) => c.state === state).length;
console.log(`\n${failed.length ? `FAILED: ${failed.join(", ")}` : "every cell that runs here passed"} (${secs(total)})`);
console.log(`platforms: ${count("ok")} passed, ${count("fail")} failed, ${count("skip")} skipped`);
process.exit(failed.length ? 1 : 0);
