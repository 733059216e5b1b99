// A small shop on Bun.serve: POST /order takes one unit of an item (?item=N, a JSON body
// {"item": N}, or one the server picks) and records the order, in one transaction that spans
// an await (a stand-in for a call to another service, such as a payment check); the answer
// is 201 {"order": id, "item": N} with the pid of the process in x-server-pid. GET
// /stock/:id reads an item. Several processes share the port
// (reusePort) and write the same file at once. See README.md.
//
//   bun server.ts --init            create shop.db with its items, then exit
//   bun server.ts                   serve (start as many as you like)
//   bun server.ts --threads 4       one process, 4 Workers, each serving the same port
// Environment: PORT (8080), SHOP_DB (shop.db), SHOP_ITEMS (1000), SHOP_AWAIT_MS (1),
// SHOP_SYNC (full | normal), SHOP_DRIVER (multiwriter | bun:sqlite: stock SQLite, for
// comparison, with the only safe stock pattern: one transaction at a time per process).
//
// In your project: import { Database } from "sqlite-multiwriter";
import { Database } from "../../../lib/mod.ts";
import { Database as BunDatabase } from "bun:sqlite";
import process from "node:process";

const PATH = process.env.SHOP_DB ?? "shop.db";
const PORT = Number(process.env.PORT ?? 8080);
const ITEMS = Number(process.env.SHOP_ITEMS ?? 1000);
const AWAIT_MS = Number(process.env.SHOP_AWAIT_MS ?? 1);
const SYNC = process.env.SHOP_SYNC === "normal" ? "NORMAL" : "FULL";
const STOCK = process.env.SHOP_DRIVER === "bun:sqlite";
const at = process.argv.indexOf("--threads");
const THREADS = at > 0 ? Number(process.argv[at + 1]) : 0;

type Item = { stock: number; price: number };
class SoldOut extends Error {}

// The stand-in for an outside call made while the transaction is open.
const outsideCall = () => new Promise<void>((resolve) => setTimeout(resolve, AWAIT_MS));

function schema(run: (sql: string) => unknown): void {
  run(`PRAGMA synchronous = ${SYNC}`);
  run("CREATE TABLE IF NOT EXISTS items(id INTEGER PRIMARY KEY, stock INTEGER NOT NULL, price INTEGER NOT NULL)");
  run("CREATE TABLE IF NOT EXISTS orders(id INTEGER PRIMARY KEY, item INTEGER NOT NULL, price INTEGER NOT NULL, at INTEGER NOT NULL)");
}

// --init: the items, in one transaction, with either driver; then exit.
function init(exec: (sql: string) => unknown, close: () => void): never {
  exec(`BEGIN; DELETE FROM items;
    WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${Math.trunc(ITEMS)})
    INSERT INTO items SELECT i, 1000000, 100 + i % 50 FROM n; COMMIT`);
  close();
  process.exit(0);
}

function serve(): void {
  let order: (item: number) => Promise<number>;
  let stockOf: (item: number) => unknown;
  let close: () => void;

  if (!STOCK) {
    // processes: true lets several server processes open the file through the engine.
    const db = new Database(PATH, { processes: true });
    schema((sql) => db.exec(sql));
    if (process.argv.includes("--init")) init((sql) => db.exec(sql), () => db.close());
    // Many of these run at once on this one thread, each on its own snapshot; a commit that
    // lost to another writer runs the function again on fresh data.
    const tx = db.transactionAsync(async (tx, item: number) => {
      const row = tx.query("SELECT stock, price FROM items WHERE id = ?").get(item) as Item | null;
      if (row === null || row.stock <= 0) throw new SoldOut();
      await outsideCall();
      tx.run("UPDATE items SET stock = ? WHERE id = ?", row.stock - 1, item);
      // A random order id: concurrent orders land on different leaves of orders (ids in
      // sequence would all append to its last leaf, where every commit but one conflicts).
      return Number(tx.run("INSERT INTO orders(id, item, price, at) VALUES (abs(random()) % 9007199254740991, ?, ?, ?)", item, row.price, Date.now()).lastInsertRowid);
    });
    order = tx;
    const read = db.query("SELECT stock FROM items WHERE id = ?");
    stockOf = (item) => read.get(item);
    close = () => db.close();
  } else {
    const db = new BunDatabase(PATH);
    db.exec("PRAGMA journal_mode = WAL");
    db.exec("PRAGMA busy_timeout = 5000");
    schema((sql) => db.exec(sql));
    if (process.argv.includes("--init")) init((sql) => db.exec(sql), () => db.close());
    const get = db.query("SELECT stock, price FROM items WHERE id = ?");
    const dec = db.query("UPDATE items SET stock = ? WHERE id = ?");
    const ins = db.query("INSERT INTO orders(item, price, at) VALUES (?, ?, ?)");
    // A transaction that spans an await holds the connection: one at a time.
    let tail: Promise<unknown> = Promise.resolve();
    order = (item) => {
      const run = tail.then(async () => {
        db.exec("BEGIN IMMEDIATE");
        try {
          const row = get.get(item) as Item | null;
          if (row === null || row.stock <= 0) throw new SoldOut();
          await outsideCall();
          dec.run(row.stock - 1, item);
          const id = Number(ins.run(item, row.price, Date.now()).lastInsertRowid);
          db.exec("COMMIT");
          return id;
        } catch (e) {
          db.exec("ROLLBACK");
          throw e;
        }
      });
      tail = run.catch(() => {});
      return run;
    };
    const read = db.query("SELECT stock FROM items WHERE id = ?");
    stockOf = (item) => read.get(item);
    close = () => db.close();
  }

  // One request in ten is for item 1: a hot item.
  const pick = () => (Math.random() < 0.1 ? 1 : 1 + Math.floor(Math.random() * ITEMS));

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
          return Response.json({ order: await order(item), item }, { status: 201, headers: { "x-server-pid": String(process.pid) } });
        } catch (e) {
          if (e instanceof SoldOut) return Response.json({ error: "sold out" }, { status: 409 });
          console.error(e);
          return Response.json({ error: "internal error" }, { status: 500 });
        }
      }
      const m = /^\/stock\/(\d+)$/.exec(url.pathname);
      if (req.method === "GET" && m) {
        const row = stockOf(Number(m[1]));
        return row ? Response.json(row) : new Response("no such item", { status: 404 });
      }
      return new Response("not found", { status: 404 });
    }),
  });
  console.log(`shop ${process.pid}${Bun.isMainThread ? "" : " (a Worker)"} on :${server.port} (${STOCK ? "bun:sqlite" : "sqlite-multiwriter"}, ${PATH}, synchronous=${SYNC})`);

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

if (Bun.isMainThread && THREADS > 0 && !process.argv.includes("--init")) {
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
