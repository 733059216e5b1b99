// The event log of examples/bun/events on Deno: POST /events appends a JSON event
// ({"type": ..., ...}) and answers its id; GET /events?after=ID&limit=N reads the page of
// events after ID, in id order, with `next` for the following page. Ids are in sequence: a
// reader that pages with `after` sees every event once, in the order they committed.
//
// This module is the service: the database, the handler, and the default export that
// `deno serve` runs (one copy per isolate with --parallel):
//   deno run -A app.ts --init                       create events.db (empty), then exit
//   deno serve -A --parallel --port 8080 app.ts     one process, one isolate per core
//   deno run -A server.ts                           one process on PORT (start several on one port:
//                                                   deno run -A --unstable-net server.ts --reuse-port)
// Environment: PORT (8080, server.ts only), EVENTS_DB (events.db), EVENTS_SYNC (full | normal),
// EVENTS_DRIVER: multiwriter (the engine), stock (stock SQLite through the same binding,
// multiwriter: false), node:sqlite (Deno's built-in stock SQLite); with stock SQLite each
// append is a statement of its own, committed on the event loop.
//
// In your project: import { Database } from "jsr:@sqlite-multiwriter/sqlite-multiwriter";
import { Database } from "../../../lib/jsr.ts";
import { DatabaseSync } from "node:sqlite";

const env = (name: string, fallback: string) => Deno.env.get(name) ?? fallback;
const PATH = env("EVENTS_DB", "events.db");
const SYNC = env("EVENTS_SYNC", "full") === "normal" ? "NORMAL" : "FULL";
export const DRIVER = env("EVENTS_DRIVER", "multiwriter");
if (!["multiwriter", "stock", "node:sqlite"].includes(DRIVER)) throw new Error(`EVENTS_DRIVER=${DRIVER}?`);
const MAX_PAGE = 1000;

// body is the event as it came (checked to be a JSON object with a string "type").
const SCHEMA = `PRAGMA synchronous = ${SYNC};
  CREATE TABLE IF NOT EXISTS events(id INTEGER PRIMARY KEY, at INTEGER NOT NULL, type TEXT NOT NULL, body TEXT NOT NULL)`;
const INSERT = "INSERT INTO events(at, type, body) VALUES (?, ?, ?) RETURNING id";
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

let append: (type: string, body: string) => Promise<number>;
let page: (after: number, limit: number) => Row[];
let closeDb: () => void;

if (DRIVER === "node:sqlite") {
  const db = new DatabaseSync(PATH);
  db.exec("PRAGMA journal_mode = WAL; PRAGMA busy_timeout = 5000");
  db.exec(SCHEMA);
  if (Deno.args.includes("--init")) {
    db.exec("DELETE FROM events");
    db.close();
    Deno.exit(0);
  }
  const ins = db.prepare(INSERT), q = db.prepare(PAGE);
  append = async (type, body) => (ins.get(Date.now(), type, body) as { id: number }).id;
  page = (after, limit) => q.all(after, limit) as Row[];
  closeDb = () => db.isOpen && db.close();
} else {
  // processes: true lets several processes (server.ts) and the isolates of `deno serve` open
  // the file through the engine at once.
  const db = new Database(PATH, DRIVER === "stock" ? { multiwriter: false } : { processes: true });
  db.exec(SCHEMA);
  if (Deno.args.includes("--init")) {
    db.exec("DELETE FROM events");
    db.close();
    Deno.exit(0);
  }
  // A statement of its own: SQLite commits it on the event loop (stock, and the engine at
  // every synchronous level: at FULL, transactionAsync appends in flight would all write the
  // table's last page, and the engine would run all but one of them again, one at a time,
  // each with a sync of its own; docs/server.md).
  const ins = db.prepare(INSERT);
  append = async (type, body) => ins.get<{ id: number }>(Date.now(), type, body)!.id;
  const q = db.prepare(PAGE);
  page = (after, limit) => q.all<Row>(after, limit);
  closeDb = () => db.close();
}

/** Closes the database (idempotent): only the .db file stays. */
export function close(): void {
  closeDb();
}

export async function handler(req: Request): Promise<Response> {
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
}

// `deno serve` stops accepting on SIGTERM or SIGINT, lets the requests in flight finish, then
// unloads each isolate: close there.
addEventListener("unload", close);

export default { fetch: handler } satisfies Deno.ServeDefaultExport;
