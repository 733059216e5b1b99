// A rate limiter / counter on Bun.serve: POST /hit/:key counts one hit of a key in the
// current window and answers 429 once the key is over its limit, in one transaction (read
// the count, decide, write). GET /count/:key reads the count. See README.md.
//
//   bun server.ts --init            create counter.db (empty), then exit
//   bun server.ts                   serve (start as many processes as you like: reusePort)
//   bun server.ts --threads 4       one process, 4 Workers, each serving the same port
// Environment: PORT (8080), COUNTER_DB (counter.db), COUNTER_LIMIT (100 hits per key and
// window), COUNTER_WINDOW_S (60), COUNTER_SYNC (full | normal), COUNTER_DRIVER
// (multiwriter | bun:sqlite: stock SQLite, for comparison: WAL, busy timeout 5 s,
// BEGIN IMMEDIATE, one transaction at a time per process or thread).
//
// In your project: import { Database } from "sqlite-multiwriter";
import { Database } from "../../../lib/mod.ts";
import { Database as BunDatabase } from "bun:sqlite";
import process from "node:process";

const PATH = process.env.COUNTER_DB ?? "counter.db";
const PORT = Number(process.env.PORT ?? 8080);
const LIMIT = Number(process.env.COUNTER_LIMIT ?? 100);
const WINDOW_MS = Number(process.env.COUNTER_WINDOW_S ?? 60) * 1000;
const SYNC = process.env.COUNTER_SYNC === "normal" ? "NORMAL" : "FULL";
const STOCK = process.env.COUNTER_DRIVER === "bun:sqlite";
const at = process.argv.indexOf("--threads");
const THREADS = at > 0 ? Number(process.argv[at + 1]) : 0;

// One row per key and window; WITHOUT ROWID keeps a key's rows together in the primary key.
const SCHEMA = `PRAGMA synchronous = ${SYNC};
  CREATE TABLE IF NOT EXISTS hits(key TEXT NOT NULL, win INTEGER NOT NULL, n INTEGER NOT NULL,
                                  PRIMARY KEY(key, win)) WITHOUT ROWID`;

// The statements one hit runs, on whatever connection the transaction has.
type Params = (string | number)[];
type Conn = { get(sql: string, ...p: Params): unknown; run(sql: string, ...p: Params): unknown };
// A Conn over anything with query(sql): a database of either driver, or a transactionAsync handle.
const connOf = (q: { query(sql: string): { get(...p: Params): unknown; run(...p: Params): unknown } }): Conn => ({
  get: (sql, ...p) => q.query(sql).get(...p),
  run: (sql, ...p) => q.query(sql).run(...p),
});
type Hit = { allowed: boolean; n: number };

// Read, decide, write: in one transaction, so two hits never both take the last slot.
function hit(c: Conn, key: string, win: number): Hit {
  const row = c.get("SELECT n FROM hits WHERE key = ? AND win = ?", key, win) as { n: number } | null;
  const n = row?.n ?? 0;
  if (n >= LIMIT) return { allowed: false, n }; // over the limit: nothing written
  c.run("INSERT INTO hits(key, win, n) VALUES (?, ?, 1) ON CONFLICT(key, win) DO UPDATE SET n = n + 1", key, win);
  return { allowed: true, n: n + 1 };
}

function serve(): void {
  let count: (key: string, win: number) => Promise<Hit>;
  let read: (key: string, win: number) => number;
  let close: () => void;
  if (!STOCK) {
    // processes: true lets several server processes open the file through the engine; in
    // threads mode one process owns it and its Workers share it without that option.
    const db = new Database(PATH, THREADS > 0 ? {} : { processes: true });
    db.exec(SCHEMA);
    if (SYNC === "FULL") {
      // Many of these run at once on this one thread, each on its own snapshot; a commit that
      // lost to another writer runs the function again on fresh data. The COMMIT waits for
      // its sync off the event loop, so the hits in flight share one sync.
      count = db.transactionAsync(async (tx, key: string, win: number) =>
        hit(connOf(tx), key, win)
      );
    } else {
      // Below FULL a commit waits for no sync: a hit (no await in it) runs whole on the loop,
      // one at a time in this process, and one that lost its commit to another process runs
      // again at once. Cheaper than a pooled transactionAsync call, and no hit waits behind
      // another's retry.
      const c = connOf(db);
      const tx = db.transaction((key: string, win: number) => hit(c, key, win));
      count = async (key, win) => tx(key, win);
    }
    const q = db.query("SELECT n FROM hits WHERE key = ? AND win = ?");
    read = (key, win) => (q.get(key, win) as { n: number } | null)?.n ?? 0;
    close = () => db.close();
  } else {
    const db = new BunDatabase(PATH);
    db.exec("PRAGMA journal_mode = WAL");
    db.exec("PRAGMA busy_timeout = 5000");
    db.exec(SCHEMA);
    const c = connOf(db);
    // Synchronous: one transaction at a time, the commit (and its sync) on the event loop.
    const tx = db.transaction((key: string, win: number) => hit(c, key, win)).immediate;
    count = async (key, win) => tx(key, win);
    const q = db.query("SELECT n FROM hits WHERE key = ? AND win = ?");
    read = (key, win) => (q.get(key, win) as { n: number } | null)?.n ?? 0;
    close = () => db.close();
  }

  // The handlers still running: stop() waits for them too (server.stop() does not wait for a
  // request whose client went away, and closing under it would roll its transaction back).
  let inflight = 0;
  let drained: (() => void) | undefined;
  const tracked = (fn: (req: Request) => Promise<Response>) => async (req: Request) => {
    inflight++;
    try {
      return await fn(req);
    } finally {
      if (--inflight === 0) drained?.();
    }
  };

  const server = Bun.serve({
    port: PORT,
    reusePort: true,
    fetch: tracked(async (req) => {
      const url = new URL(req.url);
      const m = /^\/(hit|count)\/([\w.:-]{1,128})$/.exec(url.pathname);
      if (m === null) return new Response("not found", { status: 404 });
      const [, what, key] = m;
      const win = Math.floor(Date.now() / WINDOW_MS);
      const reset = Math.ceil(((win + 1) * WINDOW_MS - Date.now()) / 1000);
      if (req.method === "POST" && what === "hit") {
        try {
          const { allowed, n } = await count(key, win);
          const body = { key, allowed, count: n, limit: LIMIT, remaining: Math.max(0, LIMIT - n), reset };
          return allowed
            ? Response.json(body)
            : Response.json(body, { status: 429, headers: { "retry-after": String(reset) } });
        } catch (e) {
          console.error(e);
          return Response.json({ error: "internal error" }, { status: 500 });
        }
      }
      if (req.method === "GET" && what === "count") {
        const n = read(key, win);
        return Response.json({ key, count: n, limit: LIMIT, remaining: Math.max(0, LIMIT - n), reset });
      }
      return new Response("method not allowed", { status: 405 });
    }),
  });
  const where = Bun.isMainThread ? `${process.pid}` : `${process.pid} (a Worker)`;
  console.log(`counter ${where} on :${server.port} (${STOCK ? "bun:sqlite" : "sqlite-multiwriter"}, ${PATH}, synchronous=${SYNC})`);

  // Stop accepting, let the requests in flight finish, close (only the .db stays).
  const stop = async () => {
    await server.stop();
    if (inflight > 0) await new Promise<void>((resolve) => (drained = resolve));
    close();
  };
  if (Bun.isMainThread) {
    const exit = () => stop().then(() => process.exit(0));
    process.once("SIGTERM", exit);
    process.once("SIGINT", exit);
  } else {
    // A Worker hears no signals: the main thread asks it to stop.
    self.onmessage = async (e: MessageEvent) => {
      if (e.data === "stop") {
        await stop();
        postMessage("closed");
      }
    };
  }
}

if (process.argv.includes("--init")) {
  // A fresh table with its schema; the bench starts every run from this.
  if (STOCK) {
    const db = new BunDatabase(PATH);
    db.exec("PRAGMA journal_mode = WAL");
    db.exec(SCHEMA);
    db.exec("DELETE FROM hits");
    db.close();
  } else {
    const db = new Database(PATH);
    db.exec(SCHEMA);
    db.exec("DELETE FROM hits");
    db.close();
  }
  process.exit(0);
}

if (Bun.isMainThread && THREADS > 0) {
  // Threads mode: this thread only starts the Workers and relays the signals to them.
  const workers = Array.from({ length: THREADS }, () => new Worker(import.meta.url));
  let closed = 0;
  const exit = () => {
    for (const w of workers) {
      w.onmessage = (e: MessageEvent) => {
        if (e.data === "closed" && ++closed === workers.length) process.exit(0);
      };
      w.postMessage("stop");
    }
  };
  process.once("SIGTERM", exit);
  process.once("SIGINT", exit);
} else {
  serve();
}
