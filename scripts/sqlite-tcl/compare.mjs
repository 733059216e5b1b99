// Compares a run of SQLite's Tcl suite (run.sh) with the committed list of expected
// differences, prints the counts, and exits 1 on anything not expected:
//   - an engine file that is neither clean nor listed;
//   - a listed file whose first failing test is not the listed one (a new failure
//     before the known one);
//   - any hang; any crash, except one listed as "harness crash:" (the suite's own
//     script crashes the testfixture after the listed first failure);
//   - a stock failure whose listed reason does not say "fails in stock too".
// Files listed with a reason starting "skip (hang):" are not run at all (run.sh);
// the summary names them.
// Usage: node compare.mjs EXPECTED MW_RESULTS STOCK_RESULTS OUTDIR [SKIPPED]
import { existsSync, readFileSync, writeFileSync } from "node:fs";

const [expectedPath, mwPath, stockPath, outDir, skippedPath] = process.argv.slice(2);
const skipped =
  skippedPath && existsSync(skippedPath) ? readFileSync(skippedPath, "utf8").split("\n").filter((l) => l) : [];

/** expected.txt: "FILE FIRST-FAILING-TEST REASON..." per line; # comments. */
function readExpected(path) {
  const map = new Map();
  for (const [i, raw] of readFileSync(path, "utf8").split("\n").entries()) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    const m = /^(\S+)\s+(\S+)\s+(.+)$/.exec(line);
    if (!m) throw new Error(`${path}:${i + 1}: want "FILE FIRST-FAILING-TEST REASON"`);
    if (map.has(m[1])) throw new Error(`${path}:${i + 1}: ${m[1]} listed twice`);
    map.set(m[1], { first: m[2], reason: m[3] });
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

for (const r of mw) {
  const e = expected.get(r.file);
  if (r.status === "crash" && e && e.reason.startsWith("harness crash:") && e.first === r.first) {
    // The test script itself crashes the testfixture (e.g. steps a statement
    // handle that a refused earlier step never made): allowed only when listed so,
    // after the listed first failing test.
  } else if (r.status === "hang" || r.status === "crash") {
    problems.push(`${r.file}: ${r.status} with the engine (${r.rc}, ${r.secs}s, first failing ${r.first})`);
  } else if (r.status === "errors") {
    if (!e) problems.push(`${r.file}: fails with the engine and is not listed (first failing ${r.first}: ${r.failures.join(" ")})`);
    else if (e.first !== r.first) problems.push(`${r.file}: first failing test is ${r.first}, listed ${e.first} (${r.failures.join(" ")})`);
  } else if (e) {
    notes.push(`${r.file}: listed but clean now (remove it from the list once it stays clean)`);
  }
}
for (const r of stock) {
  const e = expected.get(r.file);
  if (r.status === "clean") continue;
  if (e && e.reason.includes("fails in stock too") && r.status === "errors") continue;
  problems.push(`${r.file}: ${r.status} with the STOCK testfixture (first failing ${r.first})`);
}

const c = count(mw);
const s = count(stock);
const slow = [...mw].sort((a, b) => b.secs - a.secs).slice(0, 5).map((r) => `${r.file} ${r.secs}s`);
const lines = [
  `engine: ${mw.length} files: ${c.clean} clean, ${c.errors} with errors, ${c.hang} hangs, ${c.crash} crashes`,
  `stock:  ${stock.length} files run: ${s.clean} clean, ${s.errors} with errors, ${s.hang} hangs, ${s.crash} crashes`,
  `slowest engine files: ${slow.join(", ")}`,
  ...(skipped.length ? [`skipped (known hangs, see expected.txt): ${skipped.join(" ")}`] : []),
  ...notes.map((n) => `note: ${n}`),
  ...problems.map((p) => `FAIL: ${p}`),
  problems.length ? `${problems.length} unexpected results` : "as expected",
];
writeFileSync(`${outDir}/summary.txt`, lines.join("\n") + "\n");
console.log(lines.join("\n"));
process.exit(problems.length ? 1 : 0);
