// bench/ts/common.ts: what the TypeScript harness shares between the parent and its
// writers (Workers or processes): the options, the workloads through the package
// (schema, one transaction, the check after a run), the writer loop with its retries,
// the machine facts and the percentiles. Mirrors bench/native (same workloads, keys,
// checks and retry rules) so that the gap between the two is the cost of the binding.
// Owns only the files named bench.db* and lat.* in the run directory.
import { Database, mwVersion, sqliteVersion, SQLiteError, type Statement } from "../../lib/mod.ts";
import { closeSync, fdatasyncSync, openSync, readFileSync, realpathSync, unlinkSync, writeSync } from "node:fs";
import os from "node:os";
import process from "node:process";
import { execSync } from "node:child_process";

export const WORKLOADS = ["bulk", "samepage", "hot", "transfer", "slow", "read"] as const;
export const VARIANTS = ["sqlite", "sqlite-wait", "mw", "mwr", "bun:sqlite"] as const;
export const MODES = ["threads", "processes"] as const;
export type Workload = (typeof WORKLOADS)[number];
export type Variant = (typeof VARIANTS)[number];
export type Mode = (typeof MODES)[number];

export const BULK_ROWS = 100;
export const NACCT = 1000;
export const INIT_BALANCE = 1000;
export const HOT_ROWS = 4;
export const SLOW_WORK_MS = 2;
export const MAX_RETRIES = 1000;

/** One run: what every writer needs to know. Plain data (sent to Workers and processes). */
export interface RunConfig {
  workload: Workload;
  variant: Variant;
  mode: Mode;
  writers: number;
  db: string;
  dir: string;
}

export interface WriterResult {
  committed: number;
  retries: number;
  gaveUp: number;
  abandoned: number;
  total: number;
  engine: boolean;
  /** Age in us of the transaction in flight when the measured period ended: its wait is in
   * no percentile, so a writer starved by a busy handler shows here. */
  openAtStopUs: number;
  error?: string;
}

export const ctRows = (writers: number): number => Math.max(writers + 1, 1100);

/** A wall clock in ms with sub-ms resolution, comparable across processes. */
export const wall = (): number => performance.timeOrigin + performance.now();

const sleepCell = new Int32Array(new SharedArrayBuffer(4));
export function sleepMs(ms: number): void {
  Atomics.wait(sleepCell, 0, 0, ms);
}

/** 5 us doubling to 2 ms, a random point between half and all of it (as in mwbench). */
function backoffMs(attempt: number): number {
  const d = Math.min(0.005 * 2 ** Math.min(attempt - 1, 20), 2);
  return d / 2 + Math.random() * (d / 2);
}

export function isBusy(e: unknown): boolean {
  if (e instanceof SQLiteError) return e.errcode === 5;
  // bun:sqlite's own error: code "SQLITE_BUSY", "SQLITE_BUSY_SNAPSHOT", ...
  const b = e as { name?: unknown; code?: unknown } | null;
  return b !== null && typeof b === "object" && b.name === "SQLiteError" && typeof b.code === "string" &&
    b.code.startsWith("SQLITE_BUSY");
}

/** The options of the package for a variant (stock SQLite is `multiwriter: false`). */
export function openOptions(v: Variant, mode: Mode) {
  const common = { maxAttempts: MAX_RETRIES + 1 };
  switch (v) {
    case "sqlite":
      return { ...common, multiwriter: false, busyTimeout: 0 };
    case "sqlite-wait":
    case "bun:sqlite": // not opened through the package (see openBunSqlite); the same settings
      return { ...common, multiwriter: false, busyTimeout: 5000 };
    case "mw":
      return { ...common, busyTimeout: 0, ...(mode === "processes" ? { processes: true } : {}) };
    case "mwr":
      return { ...common, busyTimeout: 0, rebase: true, ...(mode === "processes" ? { processes: true } : {}) };
  }
}

/** Stock SQLite takes the write lock up front; the engine validates at COMMIT. */
export const beginMode = (v: Variant): "immediate" | "deferred" =>
  v === "mw" || v === "mwr" ? "deferred" : "immediate";
export const busyTimeoutMs = (v: Variant): number => (v === "sqlite-wait" || v === "bun:sqlite" ? 5000 : 0);

/** The `bun:sqlite` variant: Bun's own SQLite binding, the anchor Bun users switch from (WAL,
 * synchronous=FULL, busy_timeout=5000, BEGIN IMMEDIATE through its transaction().immediate).
 * It exists only under Bun: elsewhere this is false and the harness skips the variant with a
 * note. */
export function bunSqliteAvailable(): boolean {
  const meta = import.meta as unknown as { require?: unknown };
  return runtimeName() === "bun" && typeof meta.require === "function";
}

interface BunStatement {
  run(...a: unknown[]): { changes: number | bigint };
  values(...a: unknown[]): unknown[][];
  finalize(): void;
}
interface BunDatabase {
  prepare(sql: string): BunStatement;
  exec(sql: string): void;
  transaction<A extends unknown[]>(fn: (...a: A) => void): { immediate(...a: A): void; deferred(...a: A): void };
  close(): void;
}

/** Opens path with bun:sqlite, wrapped in the part of the package's Database that Writer uses:
 * prepare().run()/.values()/.source, exec, transaction(fn).immediate/.deferred,
 * transactionRetries (bun:sqlite never runs a transaction again: 0), stats().engine (false),
 * close. */
function openBunSqlite(path: string, busyMs: number): Database {
  if (!bunSqliteAvailable()) throw new Error("bun:sqlite exists only under Bun");
  const req = (import.meta as unknown as { require(id: string): unknown }).require;
  const { Database: BunDb } = req("bun:sqlite") as { Database: new (p: string, o: object) => BunDatabase };
  const db = new BunDb(path, { readwrite: true, create: false });
  db.exec(`PRAGMA busy_timeout = ${busyMs}`);
  db.exec("PRAGMA journal_mode = WAL");
  db.exec("PRAGMA synchronous = FULL");
  const statements: BunStatement[] = [];
  const wrapped = {
    prepare(sql: string) {
      const s = db.prepare(sql);
      statements.push(s);
      return {
        source: sql,
        run: (...a: unknown[]) => ({ changes: Number(s.run(...a).changes) }),
        values: (...a: unknown[]) => s.values(...a),
      };
    },
    exec: (sql: string) => db.exec(sql),
    transaction: <A extends unknown[]>(fn: (...a: A) => void) => db.transaction(fn),
    transactionRetries: 0,
    stats: () => ({ engine: false }),
    // Finalized first: with a statement left, sqlite3_close_v2 only marks the connection,
    // which then closes (and checkpoints, as the last one) whenever the statements go.
    close: () => {
      for (const st of statements.splice(0)) st.finalize();
      db.close();
    },
  };
  return wrapped as unknown as Database;
}

/** Creates the run's database with a stock connection: the three tables and their rows. */
export function createSchema(path: string, writers: number): void {
  for (const suffix of ["", "-wal", "-shm"]) {
    try {
      unlinkSync(path + suffix);
    } catch { /* absent */ }
  }
  const db = new Database(path, { multiwriter: false });
  try {
    db.exec(`
      CREATE TABLE bk(id INTEGER PRIMARY KEY, v TEXT);
      CREATE TABLE ct(id TEXT PRIMARY KEY, a INT, b INT, c INT, d INT, pad BLOB);
      CREATE TABLE acct(id INTEGER PRIMARY KEY, balance INT);`);
    db.transaction(() => {
      const ct = db.prepare("INSERT INTO ct VALUES(?1, 0, 0, 0, 0, zeroblob(16))");
      for (let i = 0; i < ctRows(writers); i++) ct.run(`r${i}`);
      const ac = db.prepare("INSERT INTO acct VALUES(?1, ?2)");
      for (let i = 1; i <= NACCT; i++) ac.run(i, INIT_BALANCE);
    }).immediate();
    db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
  } finally {
    db.close();
  }
}

/** A file that bun:sqlite wrote, checked and checkpointed by bun:sqlite itself before the
 * package's stock connection looks at it. Bun's SQLite is another copy of SQLite in this
 * process: a WAL it leaves behind is read wrongly by the package's copy (POSIX locks do not
 * separate the two, so the package's connection takes itself for the only one and recovers
 * the WAL on its own terms): integrity_check failed there ("unable to get the page",
 * short reads) on files that bun:sqlite found sound. */
function settleBunSqlite(path: string): void {
  const req = (import.meta as unknown as { require(id: string): unknown }).require;
  const { Database: BunDb } = req("bun:sqlite") as { Database: new (p: string, o: object) => BunDatabase };
  const b = new BunDb(path, { readwrite: true, create: false });
  try {
    // A connection still closing elsewhere (the last one checkpoints under an exclusive
    // lock) is waited for, not a "database is locked" (seen once in CI's smoke run).
    b.exec("PRAGMA busy_timeout = 10000");
    const ic = b.prepare("PRAGMA integrity_check").values();
    if (ic.length !== 1 || ic[0][0] !== "ok") {
      throw new Error(`integrity_check (bun:sqlite) failed: ${JSON.stringify(ic)}`);
    }
    b.exec("PRAGMA wal_checkpoint(TRUNCATE)");
  } finally {
    b.close();
  }
}

/** integrity_check and the workload's check, with a stock connection after the run (for a
 * bun:sqlite run, bun:sqlite's own integrity_check and checkpoint first). */
export function validate(path: string, wl: Workload, total: number, variant: Variant): string {
  if (variant === "bun:sqlite") settleBunSqlite(path);
  const db = new Database(path, { multiwriter: false });
  try {
    const ic = db.prepare("PRAGMA integrity_check").values();
    if (ic.length !== 1 || ic[0][0] !== "ok") throw new Error(`integrity_check failed: ${JSON.stringify(ic)}`);
    let sql: string, want: number;
    switch (wl) {
      case "bulk":
        [sql, want] = ["SELECT count(*) FROM bk", total * BULK_ROWS];
        break;
      case "transfer":
        [sql, want] = ["SELECT sum(balance) FROM acct", NACCT * INIT_BALANCE];
        break;
      case "read":
        [sql, want] = ["SELECT sum(a) FROM ct", 0];
        break;
      default:
        [sql, want] = ["SELECT sum(a) FROM ct", total];
    }
    const got = Number(db.prepare(sql).values()[0][0]);
    if (got !== want) throw new Error(`check failed: ${sql} = ${got}, expected ${want}`);
    if (wl === "transfer") {
      const n = Number(db.prepare("SELECT count(*) FROM acct").values()[0][0]);
      if (n !== NACCT) throw new Error(`check failed: ${n} accounts, expected ${NACCT}`);
    }
    return `integrity_check ok; ${sql.slice(7)} = ${got}`;
  } finally {
    db.close();
  }
}

/** One writer: its connection and the workload's statements, ready to run. */
export class Writer {
  readonly db: Database;
  readonly engine: boolean;
  #seq = 0;
  #lat = new Float64Array(4096);
  #n = 0;
  readonly res: WriterResult = { committed: 0, retries: 0, gaveUp: 0, abandoned: 0, total: 0, engine: false, openAtStopUs: 0 };
  readonly #one: () => void;

  constructor(readonly cfg: RunConfig, readonly w: number) {
    // Opened with a busy timeout: a connection opening while another recovers the WAL
    // index gets SQLITE_BUSY. The variant's timeout applies from the first transaction.
    this.db = cfg.variant === "bun:sqlite"
      ? openBunSqlite(cfg.db, 10000)
      : new Database(cfg.db, { ...openOptions(cfg.variant, cfg.mode), busyTimeout: 10000, create: false });
    const db = this.db;
    const mode = db.prepare("PRAGMA journal_mode").values()[0][0];
    if (mode !== "wal") throw new Error(`journal_mode is ${String(mode)}, expected wal`);
    db.exec(`PRAGMA busy_timeout = ${busyTimeoutMs(cfg.variant)}`);
    this.engine = db.stats().engine;
    this.res.engine = this.engine;
    const begin = beginMode(cfg.variant);
    const w4 = w * 2 ** 32;
    const nrows = ctRows(cfg.writers);
    const rand = (n: number) => Math.floor(Math.random() * n);
    const tail = "abcdefghijklmnopqrstuvwxyz0123456789";
    const one = (stmt: Statement, ...args: (string | number)[]) => {
      if (stmt.run(...args).changes !== 1) throw new Error(`${stmt.source}: no row changed`);
    };
    // mwr (rebase): every workload's statements are point statements on rows it writes; a
    // transaction declares their rowids (ct's r<k> has rowid k + 1: createSchema inserts
    // them in order; acct's id is its rowid) before its COMMIT.
    const engineDb = db instanceof Database ? db : null;
    const rebase = cfg.variant === "mwr" && engineDb !== null;
    const declare = (...rowids: number[]) => {
      if (rebase) engineDb.declareReads(rowids);
    };
    const ctRowid = (id: string) => Number(id.slice(1)) + 1;
    switch (cfg.workload) {
      case "bulk": {
        const ins = db.prepare("INSERT INTO bk(id, v) VALUES(?1, ?2)");
        const tx = db.transaction((seq: number) => {
          for (let i = 0; i < BULK_ROWS; i++) {
            const text = `w${String(w).padStart(6, "0")}-n${String(seq).padStart(10, "0")}-i${String(i).padStart(3, "0")}-${tail}`
              .slice(0, 64);
            ins.run(w4 + seq * BULK_ROWS + i, text);
          }
          if (rebase) declare(...Array.from({ length: BULK_ROWS }, (_, i) => w4 + seq * BULK_ROWS + i));
        })[begin];
        this.#one = () => this.#tx(() => tx(this.#seq));
        break;
      }
      case "samepage":
      case "hot": {
        const up = db.prepare("UPDATE ct SET a = a + 1 WHERE id = ?1");
        const own = `r${w}`;
        // One statement in autocommit mode; mwr runs it in a transaction, to declare its row.
        const inTx = rebase
          ? db.transaction((id: string) => {
            one(up, id);
            declare(ctRowid(id));
          })[begin]
          : null;
        // transaction() retries, counted as #tx counts them; a plain statement, by #auto.
        const update = (id: string) => (inTx ? this.#tx(() => inTx(id)) : this.#auto(() => one(up, id)));
        this.#one = cfg.workload === "hot" ? () => update(`r${rand(HOT_ROWS)}`) : () => update(own);
        break;
      }
      case "transfer": {
        const sel = db.prepare("SELECT balance FROM acct WHERE id = ?1");
        const up = db.prepare("UPDATE acct SET balance = ?2 WHERE id = ?1");
        const tx = db.transaction((a: number, b: number, amount: number) => {
          const ba = Number(sel.values(a)[0][0]);
          const bb = Number(sel.values(b)[0][0]);
          const amt = amount < ba ? amount : Math.max(ba, 0);
          // Values computed from what was read: a lost update changes the sum.
          one(up, a, ba - amt);
          one(up, b, bb + amt);
          declare(a, b);
        })[begin];
        this.#one = () => {
          const a = 1 + rand(NACCT);
          let b = a;
          while (b === a) b = 1 + rand(NACCT);
          const amount = 1 + rand(100);
          this.#tx(() => tx(a, b, amount));
        };
        break;
      }
      case "slow": {
        const sel = db.prepare("SELECT a FROM ct WHERE id = ?1");
        const up = db.prepare("UPDATE ct SET a = ?2 WHERE id = ?1");
        const own = `r${w}`;
        const tx = db.transaction(() => {
          const a = Number(sel.values(own)[0][0]);
          sleepMs(SLOW_WORK_MS); // the application's work
          one(up, own, a + 1);
          declare(ctRowid(own));
        })[begin];
        this.#one = () => this.#tx(tx);
        break;
      }
      case "read": {
        const sel = db.prepare("SELECT a, b, c, d, pad FROM ct WHERE id = ?1");
        this.#one = () => {
          const id = `r${rand(nrows)}`;
          this.#auto(() => {
            if (sel.values(id).length !== 1) throw new Error(`row ${id} missing`);
          });
        };
        break;
      }
    }
  }

  #measureAt = Infinity;
  #stopAt = Infinity;

  /** The phase now, as mwbench counts it: a transaction counts by when it ended. */
  get #measuring(): boolean {
    const t = wall();
    return t >= this.#measureAt && t < this.#stopAt;
  }

  get #stopped(): boolean {
    return wall() >= this.#stopAt;
  }

  #record(t0: number, retries: number): void {
    this.#seq++;
    this.res.total++;
    if (!this.#measuring) return;
    this.res.committed++;
    this.res.retries += retries;
    if (this.#n === this.#lat.length) {
      const bigger = new Float64Array(this.#lat.length * 2);
      bigger.set(this.#lat);
      this.#lat = bigger;
    }
    this.#lat[this.#n++] = (performance.now() - t0) * 1000;
  }

  /** A multi-statement transaction through db.transaction(): the package retries it. */
  #tx(run: () => void): void {
    const before = this.db.transactionRetries;
    const t0 = performance.now();
    try {
      run();
    } catch (e) {
      if (!isBusy(e)) throw e;
      if (this.#measuring) this.res.gaveUp++;
      return;
    }
    this.#record(t0, this.db.transactionRetries - before);
  }

  /** One statement in autocommit mode, retried here with the same rules. */
  #auto(run: () => void): void {
    const t0 = performance.now();
    for (let attempt = 0;; attempt++) {
      try {
        run();
        this.#record(t0, attempt);
        return;
      } catch (e) {
        if (!isBusy(e)) throw e;
      }
      if (this.#stopped) {
        this.res.abandoned++;
        return;
      }
      if (attempt + 1 > MAX_RETRIES) {
        if (this.#measuring) this.res.gaveUp++;
        return;
      }
      sleepMs(backoffMs(attempt + 1));
    }
  }

  /** Runs transactions until stopAt (wall ms); those that end after measureAt count. */
  run(measureAt: number, stopAt: number): Float64Array {
    this.#measureAt = measureAt;
    this.#stopAt = stopAt;
    let started = stopAt;
    while (!this.#stopped) {
      started = wall();
      this.#one();
    }
    this.res.openAtStopUs = Math.max(0, Math.round((stopAt - started) * 1000));
    // Test hook of bench/smoke.sh: claim a commit that never happened; the check must fail.
    if (this.w === 0 && process.env.MWBENCH_FAULT === "count") this.res.total++;
    // Test hook: writer 0 hangs after the run; the parent's watchdog must report it.
    if (this.w === 0 && process.env.MWBENCH_FAULT === "hang") for (;;) sleepMs(1000);
    return this.#lat.slice(0, this.#n);
  }

  close(): void {
    this.db.close();
  }
}

/** Every writer's raw latencies in one sorted array (percentiles of the merge, never of
 * per-writer percentiles). */
export function mergeLatencies(parts: Float64Array[]): Float64Array {
  const all = new Float64Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    all.set(p, at);
    at += p.length;
  }
  return all.sort();
}

/** The throughput, retry and latency fields of a result line, from the merged latencies. */
export function runFigures(duration: number, committed: number, retries: number, sorted: Float64Array) {
  const r1 = (x: number) => Math.round(x * 10) / 10;
  return {
    elapsed_s: duration,
    committed,
    tx_per_s: r1(committed / duration),
    retries,
    retries_per_100: committed ? Math.round((10000 * retries) / committed) / 100 : 0,
    p50_us: r1(pct(sorted, 0.5)),
    p99_us: r1(pct(sorted, 0.99)),
    p999_us: r1(pct(sorted, 0.999)),
    max_us: r1(sorted.length ? sorted[sorted.length - 1] : 0),
    mean_us: r1(sorted.length ? sorted.reduce((a, b) => a + b, 0) / sorted.length : 0),
  };
}

/** Nearest-rank percentile of a sorted array. */
export function pct(v: Float64Array, q: number): number {
  if (v.length === 0) return 0;
  const k = Math.min(v.length, Math.max(1, Math.ceil(q * v.length)));
  return v[k - 1];
}

function fsType(dir: string): string {
  try {
    const real = realpathSync(dir);
    let best = -1, type = "unknown";
    for (const line of readFileSync("/proc/self/mounts", "utf8").split("\n")) {
      const [, mnt, t] = line.split(" ");
      if (!mnt || !t) continue;
      const prefix = mnt === "/" || real === mnt || real.startsWith(mnt + "/");
      if (prefix && mnt.length > best) [best, type] = [mnt.length, t];
    }
    return type;
  } catch {
    return "unknown";
  }
}

/** Median ms of a 4 KiB write + fdatasync in dir (µs returned). */
function measureFdatasync(dir: string): number {
  const path = `${dir}/fdatasync-probe.${process.pid}`;
  const buf = new Uint8Array(4096).fill(0x5a);
  const v: number[] = [];
  const fd = openSync(path, "w");
  try {
    const start = performance.now();
    while (v.length < 64 && (v.length < 5 || performance.now() - start < 500)) {
      const t0 = performance.now();
      writeSync(fd, buf, 0, buf.length, (v.length % 16) * 4096);
      fdatasyncSync(fd);
      v.push((performance.now() - t0) * 1000);
    }
  } finally {
    closeSync(fd);
    unlinkSync(path);
  }
  v.sort((a, b) => a - b);
  return Math.round(v[v.length >> 1] * 10) / 10;
}

export interface Facts {
  machine: { cores: number; cpu: string; kernel: string; fs: string; fdatasync_us: number };
  sqlite_version: string;
  engine_version: string;
  commit: string;
  runtime_version: string;
}

export function runtimeName(): "bun" | "deno" {
  return (globalThis as { Bun?: unknown }).Bun !== undefined ? "bun" : "deno";
}

export function collectFacts(dir: string): Facts {
  const g = globalThis as { Bun?: { version: string }; Deno?: { version: { deno: string } } };
  let commit = process.env.MWBENCH_COMMIT ?? "";
  if (!commit) {
    try {
      const head = execSync("git rev-parse --short=12 HEAD", { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
      const dirty = execSync("git status --porcelain --untracked-files=no", { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
      commit = head + (dirty ? "-dirty" : "");
    } catch {
      commit = "unknown";
    }
  }
  const cpus = os.cpus();
  return {
    machine: {
      cores: cpus.length,
      cpu: cpus[0]?.model?.trim() ?? "unknown",
      kernel: `${os.type()} ${os.release()} ${typeof os.machine === "function" ? os.machine() : os.arch()}`,
      fs: fsType(dir),
      fdatasync_us: measureFdatasync(dir),
    },
    sqlite_version: sqliteVersion(),
    engine_version: mwVersion(),
    commit,
    runtime_version: g.Bun ? g.Bun.version : g.Deno ? g.Deno.version.deno : "unknown",
  };
}
