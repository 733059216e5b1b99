// The shop of examples/bun/shop on Deno: POST /order takes one unit of an item (?item=N, a JSON
// body {"item": N}, or one the server picks) and records the order in one transaction that
// spans an await, answering 201 {"order": id, "item": N} and x-server-pid; GET /stock/:id
// reads an item.
//
// This module is the service: the database, the handler, and the default export that
// `deno serve` runs (one copy per isolate with --parallel); server.ts serves it as a process:
//   deno run -A server.ts --init                     create shop.db with its items, then exit
//   deno run -A server.ts                            serve on PORT (8080)
//   deno run -A --unstable-net server.ts --reuse-port   the same; start several on one port
//   deno serve -A --parallel --port 8080 app.ts      one process, one isolate per core
// Several processes and isolates may serve the same file (processes: true). Environment as
// in the Bun example (SHOP_DB, SHOP_ITEMS, SHOP_AWAIT_MS, SHOP_SYNC); SHOP_DRIVER=stock opens
// the file with stock SQLite through the same binding (multiwriter: false) and runs one
// transaction at a time, the only safe stock pattern when a transaction spans an await.
import { Database } from "../../../lib/jsr.ts";

const env = (name: string, fallback: string) => Deno.env.get(name) ?? fallback;
const PATH = env("SHOP_DB", "shop.db");
const ITEMS = Number(env("SHOP_ITEMS", "1000"));
const AWAIT_MS = Number(env("SHOP_AWAIT_MS", "1"));
const SYNC = env("SHOP_SYNC", "full") === "normal" ? "NORMAL" : "FULL";
export const DRIVER = env("SHOP_DRIVER", "multiwriter");
const STOCK = DRIVER === "stock";

type Item = { stock: number; price: number };
class SoldOut extends Error {}
const outsideCall = () => new Promise<void>((resolve) => setTimeout(resolve, AWAIT_MS));

const db = new Database(PATH, STOCK ? { multiwriter: false } : { processes: true });
db.exec(`PRAGMA synchronous = ${SYNC}`);
db.exec(`CREATE TABLE IF NOT EXISTS items(id INTEGER PRIMARY KEY, stock INTEGER NOT NULL, price INTEGER NOT NULL);
         CREATE TABLE IF NOT EXISTS orders(id INTEGER PRIMARY KEY, item INTEGER NOT NULL, price INTEGER NOT NULL, at INTEGER NOT NULL)`);
if (Deno.args.includes("--init")) {
  db.transaction(() => {
    db.exec("DELETE FROM items");
    for (let i = 1; i <= ITEMS; i++) db.exec("INSERT INTO items VALUES (?, 1000000, ?)", i, 100 + (i % 50));
  })();
  db.close();
  Deno.exit(0);
}

// Without the engine, transactionAsync runs one call at a time: the same code serves both.
const order = db.transactionAsync(async (tx, item: number) => {
  const [row] = tx.query("SELECT stock, price FROM items WHERE id = ?").all<Item>(item);
  if (row === undefined || row.stock <= 0) throw new SoldOut();
  await outsideCall();
  tx.exec("UPDATE items SET stock = ? WHERE id = ?", row.stock - 1, item);
  // A random order id (below 2^53, a JSON number): concurrent orders land on different
  // leaves of orders.
  const [made] = tx.query("INSERT INTO orders(id, item, price, at) VALUES (abs(random()) % 9007199254740991, ?, ?, ?) RETURNING id")
    .all<{ id: number }>(item, row.price, Date.now());
  return made.id;
});

const stockOf = db.prepare("SELECT stock FROM items WHERE id = ?");
const pick = () => (Math.random() < 0.1 ? 1 : 1 + Math.floor(Math.random() * ITEMS));

/** Closes the database (idempotent): only the .db file stays. */
export function close(): void {
  db.close();
}

export async function handler(req: Request): Promise<Response> {
  const url = new URL(req.url);
  if (req.method === "POST" && url.pathname === "/order") {
    // The item: ?item=N, else a JSON body {"item": N}, else one the server picks.
    let item = Number(url.searchParams.get("item") ?? 0);
    if (!item && req.headers.get("content-type")?.startsWith("application/json")) {
      try {
        item = Number(((await req.json()) as { item?: unknown }).item ?? 0);
      } catch {
        return Response.json({ error: "bad body" }, { status: 400 }); // or the client went away
      }
    }
    item ||= pick();
    try {
      // The header says which process committed the order (bench/server/faults.mjs).
      return Response.json({ order: await order(item), item }, { status: 201, headers: { "x-server-pid": String(Deno.pid) } });
    } catch (e) {
      if (e instanceof SoldOut) return Response.json({ error: "sold out" }, { status: 409 });
      console.error(e);
      return Response.json({ error: "internal error" }, { status: 500 });
    }
  }
  const m = /^\/stock\/(\d+)$/.exec(url.pathname);
  if (req.method === "GET" && m) {
    const [row] = stockOf.all(Number(m[1]));
    return row ? Response.json(row) : new Response("no such item", { status: 404 });
  }
  return new Response("not found", { status: 404 });
}

// `deno serve` stops accepting on SIGTERM or SIGINT, lets the requests in flight finish, then
// unloads each isolate: close there.
addEventListener("unload", close);

export default { fetch: handler } satisfies Deno.ServeDefaultExport;
