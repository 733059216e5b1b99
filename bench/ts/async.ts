// bench/ts/async.ts: one event loop, many requests in flight, each a transaction that reads
// a row, awaits an outside call (a timer of --await ms), and writes the row it read plus one.
// Variants, all on one file in WAL mode with the same synchronous setting:
//   mw-async          the engine's transactionAsync: every request on its own snapshot
//   mwr-async         the same with rebase: true, each transaction declaring the row it read
//                     and wrote (a commit that lost only to other rows of its page merges)
//   stock-mutex       stock SQLite, one async mutex around each transaction (the only safe
//                     stock pattern when a transaction spans an await)
//   stock-optimistic  stock SQLite, the await outside the transaction, then a short
//                     BEGIN IMMEDIATE that re-reads the row and starts the request over
//                     when it changed
// Stock is bun:sqlite under Bun and the package with multiwriter: false under Deno (the
// same vendored SQLite). Reported per variant (one JSON line): commits/s, retries per 100
// commits, the event loop's lag (how late a 1 ms timer fires: p50/p99) during the run and,
// measured in the same process just before, with the same requests but no database; then
// the check: the rows' sum equals the commits (no lost update) and integrity_check is ok.
//   bun bench/ts/async.ts [--variants a,b] [--concurrency 64] [--rows 256] [--await 5]
//                         [--warmup 1] [--duration 10] [--sync full|normal] [--dir DIR] [--out FILE]
import { appendFileSync, mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import process from "node:process";
import { Database } from "../../lib/mod.ts";
import { bunSqliteAvailable, collectFacts, runtimeName } from "./common.ts";

const VARIANTS = ["mw-async", "mwr-async", "stock-mutex", "stock-optimistic"] as const;
type Variant = (typeof VARIANTS)[number];

interface Args {
  variants: Variant[];
  concurrency: number;
  rows: number;
  awaitMs: number;
  duration: number;
  warmup: number;
  sync: "full" | "normal";
  dir: string;
  out: string | null;
}

function parseArgs(argv: string[]): Args {
  const a: Args = {
    variants: [...VARIANTS], concurrency: 64, rows: 256, awaitMs: 5, duration: 10, warmup: 1, sync: "full",
    dir: join(process.env.TMPDIR ?? "/tmp", `mw-async-bench-${process.pid}`), out: null,
  };
  for (let i = 0; i < argv.length; i++) {
    const [k, v] = [argv[i], argv[i + 1]];
    const num = (): number => {
      const n = Number(v);
      if (!Number.isFinite(n) || n <= 0) usage(`${k} takes a positive number, got ${v}`);
      i++;
      return n;
    };
    if (k === "--variants") {
      a.variants = (v === "all" ? [...VARIANTS] : (v ?? "").split(",")) as Variant[];
      for (const x of a.variants) if (!VARIANTS.includes(x)) usage(`unknown variant ${x}`);
      i++;
    } else if (k === "--concurrency") a.concurrency = Math.floor(num());
    else if (k === "--rows") a.rows = Math.floor(num());
    else if (k === "--await") a.awaitMs = num();
    else if (k === "--duration") a.duration = num();
    else if (k === "--warmup") a.warmup = num();
    else if (k === "--sync") {
      if (v !== "full" && v !== "normal") usage(`--sync is full or normal, got ${v}`);
      a.sync = v as "full" | "normal";
      i++;
    } else if (k === "--dir") a.dir = v, i++;
    else if (k === "--out") a.out = v, i++;
    else usage(`unknown option ${k}`);
  }
  return a;
}

function usage(msg: string): never {
  console.error(`async bench: ${msg}`);
  process.exit(2);
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** The stock connection: bun:sqlite under Bun, else the package without the engine. */
interface Stock {
  get(id: number): number;
  set(id: number, v: number): void;
  exec(sql: string): void;
  close(): void;
}

function openStock(path: string, sync: string): Stock {
  if (bunSqliteAvailable()) {
    const req = (import.meta as unknown as { require(id: string): unknown }).require;
    type S = { get(...a: unknown[]): { v: number } | null; run(...a: unknown[]): unknown };
    const { Database: BunDb } = req("bun:sqlite") as {
      Database: new (p: string) => { query(sql: string): S; exec(sql: string): void; close(): void };
    };
    const db = new BunDb(path);
    db.exec("PRAGMA busy_timeout = 5000");
    db.exec("PRAGMA journal_mode = WAL");
    db.exec(`PRAGMA synchronous = ${sync}`);
    const get = db.query("SELECT v FROM r WHERE id = ?"), set = db.query("UPDATE r SET v = ? WHERE id = ?");
    return { get: (id) => get.get(id)!.v, set: (id, v) => void set.run(v, id), exec: (s) => db.exec(s), close: () => db.close() };
  }
  const db = new Database(path, { multiwriter: false });
  db.exec(`PRAGMA synchronous = ${sync}`);
  const get = db.query("SELECT v FROM r WHERE id = ?"), set = db.query("UPDATE r SET v = ? WHERE id = ?");
  return {
    get: (id) => (get.get(id) as { v: number }).v,
    set: (id, v) => void set.run(v, id),
    exec: (s) => void db.exec(s),
    close: () => db.close(),
  };
}

/** A 1 ms timer's lateness while the run goes on, in ms. */
function lagMeter(): { stop(): number[] } {
  const lags: number[] = [];
  let last = performance.now();
  let on = true;
  const tick = () => {
    const now = performance.now();
    lags.push(Math.max(0, now - last - 1));
    last = now;
    if (on) setTimeout(tick, 1);
  };
  setTimeout(tick, 1);
  return { stop: () => (on = false, lags) };
}

function pct(xs: number[], q: number): number {
  if (xs.length === 0) return 0;
  const s = [...xs].sort((x, y) => x - y);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
}

interface Outcome {
  commits: number;
  retries: number;
}

/** Runs `request` from `concurrency` clients back to back until the deadline. */
async function drive(args: Args, request: () => Promise<number>): Promise<Outcome> {
  const end = performance.now() + args.duration * 1000;
  const out: Outcome = { commits: 0, retries: 0 };
  const client = async () => {
    while (performance.now() < end) {
      out.retries += await request();
      out.commits++;
    }
  };
  await Promise.all(Array.from({ length: args.concurrency }, client));
  return out;
}

async function runVariant(args: Args, v: Variant): Promise<Record<string, unknown>> {
  const path = join(args.dir, `${v}.db`);
  rmSync(path, { force: true });
  for (const ext of ["-wal", "-shm", "-mw"]) rmSync(path + ext, { force: true });
  const setup = new Database(path);
  setup.exec("CREATE TABLE r(id INTEGER PRIMARY KEY, v INTEGER NOT NULL)");
  setup.transaction(() => {
    for (let i = 1; i <= args.rows; i++) setup.run("INSERT INTO r VALUES (?, 0)", i);
  })();
  setup.close();
  const pick = () => 1 + Math.floor(Math.random() * args.rows);

  // The same requests without a database: the loop's own lag, for comparison.
  const idle = lagMeter();
  await drive({ ...args, duration: Math.min(2, args.duration) }, async () => (await sleep(args.awaitMs), 0));
  const baseline = idle.stop();

  let close: () => void;
  let request: () => Promise<number>;
  if (v === "mw-async" || v === "mwr-async") {
    const rebase = v === "mwr-async";
    const db = new Database(path, { rebase });
    db.exec(`PRAGMA synchronous = ${args.sync}`);
    let retries = 0;
    const bump = db.transactionAsync(async (tx, id: number) => {
      if (tx.attempt > 1) retries++;
      const { v } = tx.query("SELECT v FROM r WHERE id = ?").get(id) as { v: number };
      await sleep(args.awaitMs);
      tx.run("UPDATE r SET v = ? WHERE id = ?", v + 1, id);
      if (rebase) tx.declareReads([id]);
    });
    request = async () => {
      const before = retries;
      await bump(pick());
      return retries - before;
    };
    close = () => db.close();
  } else {
    const db = openStock(path, args.sync);
    close = () => db.close();
    if (v === "stock-mutex") {
      let tail: Promise<void> = Promise.resolve();
      request = () => {
        const id = pick();
        const run = tail.then(async () => {
          db.exec("BEGIN IMMEDIATE");
          try {
            const x = db.get(id);
            await sleep(args.awaitMs);
            db.set(id, x + 1);
            db.exec("COMMIT");
          } catch (e) {
            db.exec("ROLLBACK");
            throw e;
          }
        });
        tail = run.catch(() => {});
        return run.then(() => 0);
      };
    } else {
      request = async () => {
        const id = pick();
        for (let retries = 0;; retries++) {
          const seen = db.get(id);
          await sleep(args.awaitMs);
          db.exec("BEGIN IMMEDIATE");
          if (db.get(id) !== seen) {
            db.exec("ROLLBACK");
            continue;
          }
          db.set(id, seen + 1);
          db.exec("COMMIT");
          return retries;
        }
      };
    }
  }
  // Warm-up (the pool grows, the caches fill), then the measured period.
  const warm = await drive({ ...args, duration: args.warmup }, request);
  const meter = lagMeter();
  const t0 = performance.now();
  const o = await drive(args, request);
  const secs = (performance.now() - t0) / 1000;
  const lags = meter.stop();
  close();

  const check = new Database(path);
  const sum = check.query("SELECT sum(v) AS s FROM r").get()!.s as number;
  const integrity = check.query("PRAGMA integrity_check").values()[0][0];
  check.close();
  const lost = warm.commits + o.commits - sum;
  if (lost !== 0 || integrity !== "ok") throw new Error(`${v}: check failed: ${warm.commits + o.commits} commits, rows sum ${sum}, integrity ${integrity}`);
  return {
    variant: v,
    runtime: runtimeName(),
    sync: args.sync,
    concurrency: args.concurrency,
    rows: args.rows,
    await_ms: args.awaitMs,
    seconds: Number(secs.toFixed(2)),
    commits: o.commits,
    tx_per_s: Math.round(o.commits / secs),
    retries_per_100: Number((100 * o.retries / Math.max(1, o.commits)).toFixed(1)),
    lag_p50_ms: Number(pct(lags, 0.5).toFixed(2)),
    lag_p99_ms: Number(pct(lags, 0.99).toFixed(2)),
    baseline_lag_p99_ms: Number(pct(baseline, 0.99).toFixed(2)),
    lost_updates: lost,
    validated: true,
  };
}

const args = parseArgs(process.argv.slice(2));
mkdirSync(args.dir, { recursive: true });
const facts = collectFacts(args.dir);
try {
  for (const v of args.variants) {
    const row = { ...await runVariant(args, v), ...facts };
    const line = JSON.stringify(row);
    if (args.out) appendFileSync(args.out, line + "\n");
    else console.log(line);
    const r = row as Record<string, unknown>;
    console.error(`${String(r.variant).padEnd(17)} ${String(r.tx_per_s).padStart(7)} tx/s  retries/100 ${r.retries_per_100}  ` +
      `loop lag p99 ${r.lag_p99_ms} ms (no db ${r.baseline_lag_p99_ms} ms)  lost ${r.lost_updates}`);
  }
} finally {
  rmSync(args.dir, { recursive: true, force: true });
}
