// bench/ts/demo.ts: the demo behind `npm run demo` (scripts/demo.mjs starts it under Bun).
// Several Workers write one database through the package, first as stock SQLite
// (`multiwriter: false`), then through the engine, about 4 s each; a progress line while
// each runs, a small table, a check of the data after each (every committed row is there,
// integrity_check ok), and the ratio at the end. Exit 1 when a check fails.
// Works in a temporary folder that it removes.
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import { join } from "node:path";
import process from "node:process";
import { Database, mwVersion, sqliteVersion } from "../../lib/mod.ts";

const WRITERS = Number(process.env.DEMO_WRITERS ?? 4);
const SECONDS = Number(process.env.DEMO_SECONDS ?? 4);
const ROWS = 100;
const tty = process.stdout.isTTY === true;

interface Result {
  name: string;
  commits: number;
  retries: number;
  rows: number;
  p50: number;
  p99: number;
  engine: boolean;
  seconds: number;
}

const wall = () => performance.timeOrigin + performance.now();

async function run(dir: string, name: string, multiwriter: boolean): Promise<Result> {
  const path = join(dir, `${multiwriter ? "engine" : "stock"}.db`);
  const setup = new Database(path, { multiwriter: false });
  setup.exec("CREATE TABLE item(id INTEGER PRIMARY KEY, writer INT, body TEXT)");
  setup.close();
  // Is the engine really under this connection? (false while the VFS is a pass-through)
  const probe = new Database(path, { multiwriter });
  const engine = probe.stats().engine;
  probe.close();

  const counters = new SharedArrayBuffer(4 * WRITERS);
  const live = new Int32Array(counters);
  const start = wall();
  const stopAt = start + SECONDS * 1000;
  const workers = Array.from({ length: WRITERS }, () => new Worker(new URL("./demo-worker.ts", import.meta.url).href, { type: "module" }));
  const done = workers.map((wk, w) =>
    new Promise<{ commits: number; retries: number; lat: Float64Array }>((resolve, reject) => {
      wk.onmessage = (e: MessageEvent) => {
        wk.terminate();
        if (e.data.type === "done") resolve(e.data);
        else reject(new Error(`writer ${w}: ${e.data.error}`));
      };
      wk.onerror = (e: Event) => reject(new Error(`writer ${w}: ${(e as ErrorEvent).message}`));
      wk.postMessage({ path, multiwriter, w, counters, stopAt });
    })
  );
  const label = `${name.padEnd(13)} ${WRITERS} writers`;
  const timer = setInterval(() => {
    const n = live.reduce((a, b) => a + b, 0);
    const t = (wall() - start) / 1000;
    const line = `  ${label}  ${t.toFixed(1).padStart(4)} s  ${String(n).padStart(7)} commits  ${(n / t).toFixed(0).padStart(6)} tx/s`;
    if (tty) process.stdout.write(`\r${line}   `);
    else if (Math.round(t * 2) % 2 === 0) console.log(line);
  }, 500);
  let results;
  try {
    results = await Promise.all(done);
  } finally {
    clearInterval(timer);
    if (tty) process.stdout.write("\n");
  }
  const seconds = (wall() - start) / 1000;
  const commits = results.reduce((a, r) => a + r.commits, 0);
  const retries = results.reduce((a, r) => a + r.retries, 0);
  const lat = Float64Array.from(results.flatMap((r) => Array.from(r.lat))).sort();
  const pick = (q: number) => (lat.length ? lat[Math.min(lat.length - 1, Math.ceil(q * lat.length) - 1)] : 0);

  // The check: every committed row is there, none more, and the file is sound.
  const check = new Database(path, { multiwriter: false });
  const rows = Number(check.prepare("SELECT count(*) FROM item").values()[0][0]);
  const ic = String(check.prepare("PRAGMA integrity_check").values()[0][0]);
  check.close();
  if (rows !== commits * ROWS || ic !== "ok") {
    throw new Error(`${name}: check failed: ${rows} rows for ${commits} commits of ${ROWS} rows, integrity_check ${ic}`);
  }
  return { name, commits, retries, rows, p50: pick(0.5), p99: pick(0.99), engine, seconds };
}

async function main(): Promise<number> {
  const dir = mkdtempSync(join(os.tmpdir(), "mw-demo-"));
  console.log(
    `sqlite-multiwriter demo: ${WRITERS} Workers insert ${ROWS}-row transactions into one database, ` +
      `synchronous=FULL, ${SECONDS} s each\nSQLite ${sqliteVersion()}, engine ${mwVersion()}, ${os.cpus().length} cores, ${dir}\n`,
  );
  try {
    const stock = await run(dir, "stock SQLite", false);
    const mw = await run(dir, "multiwriter", true);
    const f = (x: number, d = 0) => x.toFixed(d);
    const rowsOut = [
      ["", "stock SQLite", "multiwriter"],
      ["commits/s", f(stock.commits / stock.seconds), f(mw.commits / mw.seconds)],
      ["rows/s", f((stock.rows) / stock.seconds), f(mw.rows / mw.seconds)],
      ["retries per 100", f((100 * stock.retries) / Math.max(stock.commits, 1), 1), f((100 * mw.retries) / Math.max(mw.commits, 1), 1)],
      ["p50 latency ms", f(stock.p50, 2), f(mw.p50, 2)],
      ["p99 latency ms", f(stock.p99, 2), f(mw.p99, 2)],
      ["rows checked", `${stock.rows} ok`, `${mw.rows} ok`],
    ];
    const widths = rowsOut[0].map((_, c) => Math.max(...rowsOut.map((r) => r[c].length)));
    console.log("");
    for (const r of rowsOut) console.log("  " + r.map((x, c) => (c === 0 ? x.padEnd(widths[c]) : x.padStart(widths[c]))).join("   "));
    const ratio = (mw.commits / mw.seconds) / Math.max(stock.commits / stock.seconds, 1e-9);
    console.log(`\nmultiwriter / stock SQLite: ${ratio.toFixed(2)}x the commits per second, every row checked.`);
    if (!mw.engine) {
      console.log(
        "note: the engine is not active in this build (the multiwriter VFS is a pass-through), " +
          "so both columns are stock SQLite.",
      );
    }
    return 0;
  } catch (e) {
    console.error(`demo failed: ${e instanceof Error ? e.message : String(e)}`);
    return 1;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

process.exit(await main());
