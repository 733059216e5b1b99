// bench/peer/turso-worker.ts: one writer of the turso peer (bench/peer/turso.ts) as a
// Worker: the workloads of bench.md on @tursodatabase/database (its synchronous "compat"
// API) in MVCC mode, every write transaction as BEGIN CONCURRENT ... COMMIT, refused ones
// rolled back and retried with the harness's rules (5 us doubling to 2 ms, jittered, up to
// 1000 retries, abandoned at the end of the run).
// In: {init, cfg, w} -> {ready} | {error}; {go, measureAt, stopAt} -> {done, res, lat}.
import { Database } from "@tursodatabase/database/compat";

declare const self: {
  onmessage: ((e: MessageEvent) => void) | null;
  postMessage(msg: unknown, transfer?: Transferable[]): void;
};

const BULK_ROWS = 100, NACCT = 1000, HOT_ROWS = 4, MAX_RETRIES = 1000;
interface Cfg {
  workload: string;
  writers: number;
  db: string;
}
interface Stmt {
  run(...a: unknown[]): { changes: number };
  get(...a: unknown[]): Record<string, unknown> | undefined;
}

const cell = new Int32Array(new SharedArrayBuffer(4));
const sleepMs = (ms: number) => Atomics.wait(cell, 0, 0, ms);
const wall = () => performance.timeOrigin + performance.now();
const rand = (n: number) => Math.floor(Math.random() * n);
/** Turso reports a lost race as an error whose message says so. */
const refused = (e: unknown) => /conflict|dependency aborted|busy|locked|snapshot/i.test(String((e as Error)?.message));

let db: Database | null = null;
let attempt: (() => void) | null = null;
let choose: () => void = () => {};
let seq = 0;

function init(cfg: Cfg, w: number): void {
  db = new Database(cfg.db);
  const d = db;
  const mode = String(Object.values(d.prepare("PRAGMA journal_mode").get() as object)[0]);
  if (mode !== "mvcc") throw new Error(`journal_mode is ${mode}, expected mvcc`);
  d.exec("PRAGMA synchronous = FULL");
  const p = (sql: string) => d.prepare(sql) as unknown as Stmt;
  const one = (s: Stmt, ...a: unknown[]) => {
    if (s.run(...a).changes !== 1) throw new Error("no row changed");
  };
  const tx = (body: () => void) => () => {
    d.exec("BEGIN CONCURRENT");
    body();
    d.exec("COMMIT");
  };
  let a = 0, b = 0, amount = 0;
  const tail = "abcdefghijklmnopqrstuvwxyz0123456789";
  switch (cfg.workload) {
    case "bulk": {
      const ins = p("INSERT INTO bk(id, v) VALUES(?, ?)");
      attempt = tx(() => {
        for (let i = 0; i < BULK_ROWS; i++) {
          ins.run(w * 2 ** 32 + seq * BULK_ROWS + i, `w${w}-n${seq}-i${i}-${tail}${tail}`.slice(0, 64));
        }
      });
      break;
    }
    case "samepage":
    case "hot": {
      const up = p("UPDATE ct SET a = a + 1 WHERE id = ?");
      choose = () => (a = cfg.workload === "hot" ? rand(HOT_ROWS) : w);
      attempt = tx(() => one(up, `r${a}`));
      break;
    }
    case "transfer": {
      const sel = p("SELECT balance FROM acct WHERE id = ?");
      const up = p("UPDATE acct SET balance = ? WHERE id = ?");
      choose = () => {
        a = 1 + rand(NACCT);
        do b = 1 + rand(NACCT);
        while (b === a);
        amount = 1 + rand(100);
      };
      attempt = tx(() => {
        const ba = Number(sel.get(a)?.balance), bb = Number(sel.get(b)?.balance);
        const amt = amount < ba ? amount : Math.max(ba, 0);
        one(up, ba - amt, a);
        one(up, bb + amt, b);
      });
      break;
    }
    case "slow": {
      const sel = p("SELECT a FROM ct WHERE id = ?");
      const up = p("UPDATE ct SET a = ? WHERE id = ?");
      attempt = tx(() => {
        const v = Number(sel.get(`r${w}`)?.a);
        sleepMs(2);
        one(up, v + 1, `r${w}`);
      });
      break;
    }
    case "read": {
      const sel = p("SELECT a, b, c, d, pad FROM ct WHERE id = ?");
      const n = Math.max(cfg.writers + 1, 1100);
      choose = () => (a = rand(n));
      attempt = () => {
        if (sel.get(`r${a}`) === undefined) throw new Error(`row r${a} missing`);
      };
      break;
    }
    default:
      throw new Error(`unknown workload ${cfg.workload}`);
  }
}

function run(measureAt: number, stopAt: number) {
  const res = { committed: 0, retries: 0, gaveUp: 0, abandoned: 0, total: 0, engine: false };
  let lat = new Float64Array(4096), n = 0;
  const d = db as Database;
  while (wall() < stopAt) {
    choose();
    const t0 = performance.now();
    let retries = 0, done = false;
    for (;;) {
      try {
        (attempt as () => void)();
        done = true;
        break;
      } catch (e) {
        if (d.inTransaction) {
          try {
            d.exec("ROLLBACK");
          } catch { /* already gone */ }
        }
        if (!refused(e)) throw e;
      }
      retries++;
      const t = wall();
      if (t >= stopAt) {
        res.abandoned++;
        break;
      }
      if (retries > MAX_RETRIES) {
        if (t >= measureAt) res.gaveUp++;
        break;
      }
      const dd = Math.min(0.005 * 2 ** Math.min(retries - 1, 20), 2);
      sleepMs(dd / 2 + Math.random() * (dd / 2));
    }
    if (!done) continue;
    seq++;
    res.total++;
    const t = wall();
    if (t >= measureAt && t < stopAt) {
      res.committed++;
      res.retries += retries;
      if (n === lat.length) {
        const bigger = new Float64Array(n * 2);
        bigger.set(lat);
        lat = bigger;
      }
      lat[n++] = (performance.now() - t0) * 1000;
    }
  }
  return { res, lat: lat.slice(0, n) };
}

self.onmessage = (e: MessageEvent) => {
  const m = e.data as { type: string; cfg: Cfg; w: number; measureAt: number; stopAt: number };
  try {
    if (m.type === "init") {
      init(m.cfg, m.w);
      self.postMessage({ type: "ready" });
    } else if (m.type === "go") {
      const { res, lat } = run(m.measureAt, m.stopAt);
      db?.close();
      db = null;
      self.postMessage({ type: "done", res, lat }, [lat.buffer as ArrayBuffer]);
    }
  } catch (err) {
    try {
      db?.close();
    } catch { /* reported below */ }
    db = null;
    self.postMessage({ type: "error", error: err instanceof Error ? err.message : String(err) });
  }
};
