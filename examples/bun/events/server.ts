// An append-only event log on Bun.serve: POST /events appends a JSON event ({"type": ..., ...})
// and answers its id; GET /events?after=ID&limit=N reads the page of events after ID, in id
// order, with `next` for the following page. Ids are in sequence: a reader that pages with
// `after` sees every event once, in the order they committed. See README.md.
//
//   bun server.ts --init            create events.db (empty), then exit
//   bun server.ts                   serve (start as many processes as you like: reusePort)
//   bun server.ts --threads 4       one process, 4 Workers, each serving the same port
// Environment: PORT (8080), EVENTS_DB (events.db), EVENTS_SYNC (full | normal),
// EVENTS_DRIVER (multiwriter | bun:sqlite: stock SQLite, for comparison: WAL, busy timeout
// 5 s, each append a statement of its own, one at a time per process or thread).
//
// In your project: import { Database } from "sqlite-multiwriter";
import { Database } from "../../../lib/mod.ts";
import { Database as BunDatabase } from "bun:sqlite";
import process from "node:process";

const PATH = process.env.EVENTS_DB ?? "events.db";
const PORT = Number(process.env.PORT ?? 8080);
const SYNC = process.env.EVENTS_SYNC === "normal" ? "NORMAL" : "FULL";
const STOCK = process.env.EVENTS_DRIVER === "bun:sqlite";
const at = process.argv.indexOf("--threads");
const THREADS = at > 0 ? Number(process.argv[at + 1]) : 0;
const MAX_PAGE = 1000;

// body is the event as it came (checked to be a JSON object with a string "type").
const SCHEMA = `PRAGMA synchronous = ${SYNC};
  CREATE TABLE IF NOT EXISTS events(id INTEGER PRIMARY KEY, at INTEGER NOT NULL, type TEXT NOT NULL, body TEXT NOT NULL)`;
const PAGE = "SELECT id, at, type, body FROM events WHERE id > ? ORDER BY id LIMIT ?";
type Row = { id: number; at: number; type: string; body: string };

class BadEvent extends Error {}
function parse(text: string): { type: string } {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    throw new BadEvent("not JSON");
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw new BadEvent("not a JSON object");
  const type = (v as { type?: unknown }).type;
  if (typeof type !== "string" || type.length === 0 || type.length > 100) throw new BadEvent('no "type" string');
  return { type };
}

function serve(): void {
  let append: (type: string, body: string) => Promise<number>;
  let page: (after: number, limit: number) => Row[];
  let close: () => void;
  if (!STOCK) {
    // processes: true lets several server processes open the file through the engine; in
    // threads mode one process owns it and its Workers share it without that option.
    const db = new Database(PATH, THREADS > 0 ? {} : { processes: true });
    db.exec(SCHEMA);
    // An append is a plain statement: SQLite commits it on the event loop, and one that lost
    // its commit to another process runs again (within busyTimeout). Not transactionAsync,
    // even at FULL where its commits in flight would share a sync: appends in flight together
    // all write the table's last page, so the engine commits one of them and runs the others
    // again, one at a time, each with a sync of its own (docs/server.md).
    const ins = db.query("INSERT INTO events(at, type, body) VALUES (?, ?, ?)");
    append = async (type, body) => Number(ins.run(Date.now(), type, body).lastInsertRowid);
    const q = db.query(PAGE);
    page = (after, limit) => q.all(after, limit) as Row[];
    close = () => db.close();
  } else {
    const db = new BunDatabase(PATH);
    db.exec("PRAGMA journal_mode = WAL");
    db.exec("PRAGMA busy_timeout = 5000");
    db.exec(SCHEMA);
    // A statement of its own: SQLite commits it (and syncs) on the event loop.
    const ins = db.query("INSERT INTO events(at, type, body) VALUES (?, ?, ?)");
    append = async (type, body) => Number(ins.run(Date.now(), type, body).lastInsertRowid);
    const q = db.query(PAGE);
    page = (after, limit) => q.all(after, limit) as Row[];
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
      if (url.pathname !== "/events") return new Response("not found", { status: 404 });
      if (req.method === "POST") {
        try {
          const body = await req.text();
          const { type } = parse(body);
          return Response.json({ id: await append(type, body) }, { status: 201 });
        } catch (e) {
          if (e instanceof BadEvent) return Response.json({ error: e.message }, { status: 400 });
          console.error(e);
          return Response.json({ error: "internal error" }, { status: 500 });
        }
      }
      if (req.method === "GET") {
        const after = Number(url.searchParams.get("after") ?? 0);
        const limit = Math.min(MAX_PAGE, Number(url.searchParams.get("limit") ?? 100));
        if (!Number.isSafeInteger(after) || !Number.isSafeInteger(limit) || limit < 1) {
          return Response.json({ error: "after and limit are whole numbers" }, { status: 400 });
        }
        const rows = page(after, limit);
        // The stored text is JSON already: splice it in rather than parse and print it again.
        const events = rows.map((r) => `{"id":${r.id},"at":${r.at},"event":${r.body}}`).join(",");
        const next = rows.length ? rows[rows.length - 1].id : after;
        return new Response(`{"events":[${events}],"next":${next}}`, { headers: { "content-type": "application/json" } });
      }
      return new Response("method not allowed", { status: 405 });
    }),
  });
  const where = Bun.isMainThread ? `${process.pid}` : `${process.pid} (a Worker)`;
  console.log(`events ${where} on :${server.port} (${STOCK ? "bun:sqlite" : "sqlite-multiwriter"}, ${PATH}, synchronous=${SYNC})`);

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
  // A fresh, empty log; the bench starts every run from this.
  if (STOCK) {
    const db = new BunDatabase(PATH);
    db.exec("PRAGMA journal_mode = WAL");
    db.exec(SCHEMA);
    db.exec("DELETE FROM events");
    db.close();
  } else {
    const db = new Database(PATH);
    db.exec(SCHEMA);
    db.exec("DELETE FROM events");
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
