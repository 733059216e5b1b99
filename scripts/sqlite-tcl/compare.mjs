// Compares a run of SQLite's Tcl suite (run.sh) with the committed list of expected
// differences (expected.txt), test by test, prints the counts, and exits 1 on anything
// not expected:
//   - a failing test (of the run-one.sh results line: every failing test of the file,
//     and the pseudo-names "(script)", "(leak)", "(gave-up)") that is not listed for
//     its file; so also a file that is not clean and not listed;
//   - any hang; any crash, except in a file listed with a "harness crash:" reason (the
//     suite's own script crashes the testfixture after a refused step);
//   - with the stock testfixture: a hang, a crash, or a failing test not listed under a
//     reason that says "fails in stock too".
// A listed test that passes in this run is printed ("listed but passed") and does not
// fail the run, so that a fix does not turn CI red; with --strict (or MW_TCL_STRICT=1)
// it fails the run, except for the tests listed as unstable (they may fail or pass).
// Files listed with a reason starting "skip (hang):" are not run at all (run.sh); the
// summary names them.
// Usage: node compare.mjs [--strict] EXPECTED MW_RESULTS STOCK_RESULTS OUTDIR [SKIPPED]
import { existsSync, readFileSync, writeFileSync } from "node:fs";

const args = process.argv.slice(2);
const strict = args.includes("--strict") || process.env.MW_TCL_STRICT === "1";
const [expectedPath, mwPath, stockPath, outDir, skippedPath] = args.filter((a) => a !== "--strict");
const skipped =
  skippedPath && existsSync(skippedPath) ? readFileSync(skippedPath, "utf8").split("\n").filter((l) => l) : [];

/**
 * expected.txt: groups, each a head line "FILE REASON" at the start of a line, then
 * indented lines of the file's tests failing for that reason: "TEST TEST ..." (they fail
 * in every run) or "unstable: TEST ..." (seen failing in some runs only: allowed to fail
 * or pass). A file may have several groups (one per reason); a test is listed once.
 * Returns Map FILE -> { reasons: [..], tests: Map TEST -> { reason, unstable } }.
 */
function readExpected(path) {
  const map = new Map();
  let group = null;
  for (const [i, raw] of readFileSync(path, "utf8").split("\n").entries()) {
    const where = `${path}:${i + 1}`;
    if (raw.trim() === "" || raw.trim().startsWith("#")) continue;
    if (!/^\s/.test(raw)) {
      const m = /^(\S+\.test)\s+(\S.*)$/.exec(raw.trimEnd());
      if (!m) throw new Error(`${where}: want "FILE.test REASON" (or an indented list of tests)`);
      if (!map.has(m[1])) map.set(m[1], { reasons: [], tests: new Map() });
      group = { file: m[1], reason: m[2] };
      map.get(m[1]).reasons.push(m[2]);
      continue;
    }
    if (!group) throw new Error(`${where}: a list of tests before any "FILE REASON" line`);
    let words = raw.trim().split(/\s+/);
    const unstable = words[0] === "unstable:";
    if (unstable) words = words.slice(1);
    const tests = map.get(group.file).tests;
    for (const t of words) {
      if (tests.has(t)) throw new Error(`${where}: ${group.file} ${t} listed twice`);
      tests.set(t, { reason: group.reason, unstable });
    }
  }
  return map;
}

/** run-one.sh results: "FILE STATUS FIRST SECONDS rc=N FAILURES...". */
function readResults(path) {
  const list = [];
  for (const line of readFileSync(path, "utf8").split("\n")) {
    const f = line.trim().split(/\s+/);
    if (f.length < 5) continue;
    list.push({ file: f[0], status: f[1], first: f[2], secs: Number(f[3]), rc: f[4], failures: f.slice(5) });
  }
  return list;
}

const expected = readExpected(expectedPath);
const mw = readResults(mwPath);
const stock = readResults(stockPath);
const problems = [];
const notes = [];
const count = (list) => {
  const c = { clean: 0, errors: 0, hang: 0, crash: 0 };
  for (const r of list) c[r.status] = (c[r.status] ?? 0) + 1;
  return c;
};
const short = (list) => (list.length > 12 ? `${list.slice(0, 12).join(" ")} ... (${list.length})` : list.join(" "));

let failingTests = 0;
let unstableSeen = 0;
const passedListed = [];
for (const r of mw) {
  const e = expected.get(r.file);
  const failed = new Set(r.status === "clean" ? [] : r.failures);
  failingTests += failed.size;
  if (r.status === "hang" || (r.status === "crash" && !e?.reasons.some((x) => x.startsWith("harness crash:")))) {
    problems.push(`${r.file}: ${r.status} with the engine (${r.rc}, ${r.secs}s, failing: ${short(r.failures)})`);
  }
  if (r.status !== "clean" && !e) {
    problems.push(`${r.file}: not clean with the engine and not listed (${r.status}, failing: ${short(r.failures)})`);
    continue;
  }
  if (!e) continue;
  const unlisted = [...failed].filter((t) => !e.tests.has(t));
  if (unlisted.length) problems.push(`${r.file}: failing, not listed: ${short(unlisted)}`);
  for (const t of failed) if (e.tests.get(t)?.unstable) unstableSeen++;
  if (e.reasons.every((x) => x.startsWith("skip (hang):"))) continue;
  const passed = [...e.tests].filter(([t, x]) => !x.unstable && !failed.has(t)).map(([t]) => t);
  if (passed.length) {
    passedListed.push(...passed.map((t) => `${r.file}:${t}`));
    const msg = `${r.file}: listed but passed in this run: ${short(passed)}${
      r.status === "clean" ? " (the file is clean)" : ""}`;
    (strict ? problems : notes).push(strict ? `${msg} (--strict)` : `${msg} (remove once it stays so)`);
  }
}
for (const r of stock) {
  if (r.status === "clean") continue;
  if (r.status !== "errors") {
    problems.push(`${r.file}: ${r.status} with the STOCK testfixture (${r.rc}, failing: ${short(r.failures)})`);
    continue;
  }
  const e = expected.get(r.file);
  const bad = r.failures.filter((t) => !(e?.tests.get(t)?.reason.includes("fails in stock too")));
  if (bad.length) problems.push(`${r.file}: fails with the STOCK testfixture, not listed as "fails in stock too": ${short(bad)}`);
}

const c = count(mw);
const s = count(stock);
let listedTests = 0;
let listedUnstable = 0;
for (const e of expected.values())
  for (const x of e.tests.values()) x.unstable ? listedUnstable++ : listedTests++;
const slow = [...mw].sort((a, b) => b.secs - a.secs).slice(0, 5).map((r) => `${r.file} ${r.secs}s`);
const lines = [
  `engine: ${mw.length} files: ${c.clean} clean, ${c.errors} with errors, ${c.hang} hangs, ${c.crash} crashes; ` +
    `${failingTests} failing tests (${unstableSeen} of them listed as unstable)`,
  `stock:  ${stock.length} files run: ${s.clean} clean, ${s.errors} with errors, ${s.hang} hangs, ${s.crash} crashes`,
  `listed: ${expected.size} files, ${listedTests} failing tests and ${listedUnstable} unstable ones; ` +
    `${passedListed.length} listed tests passed in this run`,
  `slowest engine files: ${slow.join(", ")}`,
  ...(skipped.length ? [`skipped (known hangs, see expected.txt): ${skipped.join(" ")}`] : []),
  ...notes.map((n) => `note: ${n}`),
  ...problems.map((p) => `FAIL: ${p}`),
  problems.length ? `${problems.length} unexpected results` : "as expected",
];
writeFileSync(`${outDir}/summary.txt`, lines.join("\n") + "\n");
console.log(lines.join("\n"));
process.exit(problems.length ? 1 : 0);
