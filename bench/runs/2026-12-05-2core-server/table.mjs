// The table of docs/server.md from results.jsonl (node table.mjs [results.jsonl]): medians of
// every run, engine vs stock per cell. Unlike run.mjs's own table, runs that the driver marked
// FAILED are kept in the medians when the only failure is stock SQLite's "database is locked"
// (a stock server whose BEGIN IMMEDIATE ran out of its 5 s busy timeout for a request whose
// client had already gone, so wrk never saw the 500): that is a stock result, counted in the
// "busy" column. Any other failure is listed under the table.
import { readFileSync } from "node:fs";
const file = process.argv[2] ?? new URL("results.jsonl", import.meta.url).pathname;
const runs = readFileSync(file, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l));
const busyOnly = (r) => r.driver !== "engine" && r.failures.length > 0 && r.failures.every((f) => f.startsWith("server output:"));
const median = (xs) => {
  const v = xs.filter((x) => x != null && Number.isFinite(x)).sort((a, b) => a - b);
  if (!v.length) return null;
  const m = v.length >> 1;
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
};
const key = (r) => [r.service, r.shape, r.mix, r.conns, r.sync].join("|");
const cells = new Map();
for (const r of runs) {
  if (!cells.has(key(r))) cells.set(key(r), { engine: [], stock: [] });
  cells.get(key(r))[r.driver]?.push(r);
}
const f = (x, d = 0) => (x == null ? "-" : x.toLocaleString("en-US", { minimumFractionDigits: d, maximumFractionDigits: d }));
const other = [];
const sum = (rs) => {
  const used = rs.filter((r) => !r.failures.length || busyOnly(r));
  for (const r of rs) if (r.failures.length && !busyOnly(r)) other.push(`${key(r)} ${r.driver}: ${r.failures.join("; ").slice(0, 300)}`);
  const m = (k) => median(used.map((r) => r[k]));
  return { n: used.length, of: rs.length, rps: m("rps"), p50: m("p50_ms"), p99: m("p99_ms"), cpu: m("cpu_us_per_req"),
    non2xx: rs.reduce((n, r) => n + (r.bad_status ?? 0), 0), busy: rs.filter(busyOnly).length };
};
console.log("| service | shape | mix | sync | engine req/s | stock req/s | ratio | engine p50 / p99 ms | stock p50 / p99 ms | engine CPU us/req | stock CPU us/req | non-2xx engine / stock | stock runs with a server error (5 s busy timeout) |");
console.log("|---|---|---|---|---:|---:|---:|---|---|---:|---:|---|---:|");
const order = (k) => {
  const [service, shape, mix, , sync] = k.split("|");
  return [["shop", "counter", "events"].indexOf(service), ["bun-processes", "bun-threads", "deno-serve", "deno-processes"].indexOf(shape),
    ["write", "hot", "read90"].indexOf(mix), sync === "full" ? 0 : 1];
};
const sorted = [...cells].sort(([a], [b]) => { const x = order(a), y = order(b); for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return x[i] - y[i]; return 0; });
for (const [k, c] of sorted) {
  const [service, shape, mix, , sync] = k.split("|");
  const e = sum(c.engine), s = sum(c.stock);
  const ratio = e.rps && s.rps ? `${(e.rps / s.rps).toFixed(2)}x` : "-";
  const runsNote = (x) => (x.n < x.of ? ` (${x.n} of ${x.of} runs)` : "");
  console.log(`| ${service} | ${shape} | ${mix} | ${sync.toUpperCase()} | ${f(e.rps)}${runsNote(e)} | ${f(s.rps)}${runsNote(s)} | ${ratio} | ${f(e.p50, 1)} / ${f(e.p99, 0)} | ${f(s.p50, 1)} / ${f(s.p99, 0)} | ${f(e.cpu)} | ${f(s.cpu)} | ${e.non2xx} / ${s.non2xx} | ${s.busy} of ${s.of} |`);
}
if (other.length) console.log("\nOther failures:\n" + other.map((o) => `- ${o}`).join("\n"));
