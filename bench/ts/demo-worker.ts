// bench/ts/demo-worker.ts: one writer of the demo (bench/ts/demo.ts), as a Worker. It uses
// the package the way an application would: one connection, a prepared INSERT, and
// db.transaction(fn), which runs fn again when another writer won the commit.
// In: {path, multiwriter, w, counters, stopAt}. Out: {type: "done", commits, retries, lat}
// after its connection is closed, or {type: "error", error}.
import { Database } from "../../lib/mod.ts";

declare const self: {
  onmessage: ((e: MessageEvent) => void) | null;
  postMessage(msg: unknown, transfer?: Transferable[]): void;
};

const ROWS = 100; // rows per transaction

self.onmessage = (e: MessageEvent) => {
  const { path, multiwriter, w, counters, stopAt } = e.data as {
    path: string;
    multiwriter: boolean;
    w: number;
    counters: SharedArrayBuffer;
    stopAt: number;
  };
  let db: Database | null = null;
  try {
    db = new Database(path, { multiwriter, create: false });
    const live = new Int32Array(counters);
    const insert = db.prepare("INSERT INTO item(id, writer, body) VALUES(?1, ?2, ?3)");
    const body = "x".repeat(64);
    let seq = 0;
    const write = db.transaction((n: number) => {
      for (let i = 0; i < ROWS; i++) insert.run(w * 2 ** 32 + n * ROWS + i, w, body);
    });
    const lat: number[] = [];
    while (performance.timeOrigin + performance.now() < stopAt) {
      const t0 = performance.now();
      write(seq);
      lat.push(performance.now() - t0);
      seq++;
      Atomics.add(live, w, 1);
    }
    const retries = db.transactionRetries;
    db.close();
    db = null;
    const out = Float64Array.from(lat);
    self.postMessage({ type: "done", commits: seq, retries, lat: out }, [out.buffer as ArrayBuffer]);
  } catch (err) {
    try {
      db?.close();
    } catch { /* reported below */ }
    self.postMessage({ type: "error", error: err instanceof Error ? `${err.name}: ${err.message}` : String(err) });
  }
};
