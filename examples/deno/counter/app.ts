// The counter of examples/bun/counter on Deno: POST /hit/:key counts one hit of a key in the
// current window and answers 429 once the key is over its limit, in one transaction (read
// the count, decide, write); GET /count/:key reads the count. See README.md.
//
// This module is the service: the database, the handler, and the default export that
// `deno serve` runs (one copy per isolate with --parallel):
//   deno run -A app.ts --init                       create counter.db (empty), then exit
//   deno serve -A --parallel --port 8080 app.ts     one process, one isolate per core
//   deno run -A server.ts                           one process on PORT (start several on one port:
//                                                   deno run -A --unstable-net server.ts --reuse-port)
// Environment: PORT (8080, server.ts only), COUNTER_DB (counter.db), COUNTER_LIMIT (100 hits
// per key and window), COUNTER_WINDOW_S (60), COUNTER_SYNC (full | normal), COUNTER_DRIVER:
// multiwriter (the engine), stock (stock SQLite through the same binding, multiwriter: false:
// transactionAsync then runs one call at a time), node:sqlite (Deno's built-in stock SQLite,
// BEGIN IMMEDIATE, one transaction at a time).
//
// In your project: import { Database } from "jsr:@sqlite-multiwriter/sqlite-multiwriter";
import { Database } from "../../../lib/jsr.ts";
import { DatabaseSync } from "node:sqlite";

const env = (name: string, fallback: string) => Deno.env.get(name) ?? fallback;
const PATH = env("COUNTER_DB", "counter.db");
const LIMIT = Number(env("COUNTER_LIMIT", "100"));
const WINDOW_MS = Number(env("COUNTER_WINDOW_S", "60")) * 1000;
const SYNC = env("COUNTER_SYNC", "full") === "normal" ? "NORMAL" : "FULL";
export const DRIVER = env("COUNTER_DRIVER", "multiwriter");
if (!["multiwriter", "stock", "node:sqlite"].includes(DRIVER)) throw new Error(`COUNTER_DRIVER=${DRIVER}?`);

// One row per key and window; WITHOUT ROWID keeps a key's rows together in the primary key.
const SCHEMA = `PRAGMA synchronous = ${SYNC};
  CREATE TABLE IF NOT EXISTS hits(key TEXT NOT NULL, win INTEGER NOT NULL, n INTEGER NOT NULL,
                                  PRIMARY KEY(key, win)) WITHOUT ROWID`;
const READ = "SELECT n FROM hits WHERE key = ? AND win = ?";
const WRITE = "INSERT INTO hits(key, win, n) VALUES (?, ?, 1) ON CONFLICT(key, win) DO UPDATE SET n = n + 1";

type Hit = { allowed: boolean; n: number };
type Conn = { read(key: string, win: number): number; write(key: string, win: number): void };

// Read, decide, write: in one transaction, so two hits never both take the last slot.
function hit(c: Conn, key: string, win: number): Hit {
  const n = c.read(key, win);
  if (n >= LIMIT) return { allowed: false, n }; // over the limit: nothing written
  c.write(key, win);
  return { allowed: true, n: n + 1 };
}

let count: (key: string, win: number) => Promise<Hit>;
let read: (key: string, win: number) => number;
let closeDb: () => void;

if (DRIVER === "node:sqlite") {
  const db = new DatabaseSync(PATH);
  db.exec("PRAGMA journal_mode = WAL; PRAGMA busy_timeout = 5000");
  db.exec(SCHEMA);
  if (Deno.args.includes("--init")) {
    db.exec("DELETE FROM hits");
    db.close();
    Deno.exit(0);
  }
  const r = db.prepare(READ), w = db.prepare(WRITE);
  const c: Conn = {
    read: (key, win) => (r.get(key, win) as { n: number } | undefined)?.n ?? 0,
    write: (key, win) => void w.run(key, win),
  };
  // Synchronous: one transaction at a time, the commit (and its sync) on the event loop.
  count = async (key, win) => {
    db.exec("BEGIN IMMEDIATE");
    try {
      const out = hit(c, key, win);
      db.exec("COMMIT");
      return out;
    } catch (e) {
      db.exec("ROLLBACK");
      throw e;
    }
  };
  read = c.read;
  closeDb = () => db.isOpen && db.close();
} else {
  // processes: true lets several processes (server.ts) and the isolates of `deno serve` open
  // the file through the engine at once.
  const db = new Database(PATH, DRIVER === "stock" ? { multiwriter: false } : { processes: true });
  db.exec(SCHEMA);
  if (Deno.args.includes("--init")) {
    db.exec("DELETE FROM hits");
    db.close();
    Deno.exit(0);
  }
  const rd = db.prepare(READ);
  read = (key, win) => rd.get<{ n: number }>(key, win)?.n ?? 0;
  if (SYNC === "FULL" || DRIVER === "stock") {
    // Many of these run at once on this one thread, each on its own snapshot; a commit that
    // lost to another writer runs the function again on fresh data. At FULL the COMMIT waits
    // for its sync off the event loop, so the hits in flight share one sync. Without the
    // engine the same code runs one call at a time.
    count = db.transactionAsync(async (tx, key: string, win: number) =>
      hit({
        read: (k, w) => tx.query(READ).get<{ n: number }>(k, w)?.n ?? 0,
        write: (k, w) => void tx.query(WRITE).run(k, w),
      }, key, win)
    );
  } else {
    // Below FULL a commit waits for no sync: a hit (no await in it) runs whole on the loop,
    // one at a time in this isolate, and one that lost its commit to another process or
    // isolate runs again at once. Cheaper than a pooled transactionAsync call, and no hit
    // waits behind another's retry.
    const wr = db.prepare(WRITE);
    const tx = db.transaction((key: string, win: number) => hit({ read, write: (k, w) => void wr.run(k, w) }, key, win));
    count = async (key, win) => tx(key, win);
  }
  closeDb = () => db.close();
}

/** Closes the database (idempotent): only the .db file stays. */
export function close(): void {
  closeDb();
}

export async function handler(req: Request): Promise<Response> {
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
      return allowed ? Response.json(body) : Response.json(body, { status: 429, headers: { "retry-after": String(reset) } });
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
}

// `deno serve` stops accepting on SIGTERM or SIGINT, lets the requests in flight finish, then
// unloads each isolate: close there.
addEventListener("unload", close);

export default { fetch: handler } satisfies Deno.ServeDefaultExport;
