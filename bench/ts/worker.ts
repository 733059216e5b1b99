// bench/ts/worker.ts: one writer of the TypeScript harness as a Worker (threads mode).
// Messages: in {init, cfg, w} -> out {ready} | {error}; in {go, measureAt, stopAt} ->
// runs, closes its connection, then out {done, res, lat}. Touches nothing else.
import { type RunConfig, Writer } from "./common.ts";

declare const self: {
  onmessage: ((e: MessageEvent) => void) | null;
  postMessage(msg: unknown, transfer?: Transferable[]): void;
};

let writer: Writer | null = null;

self.onmessage = (e: MessageEvent) => {
  const m = e.data as { type: string; cfg?: RunConfig; w?: number; measureAt?: number; stopAt?: number };
  try {
    if (m.type === "init") {
      writer = new Writer(m.cfg as RunConfig, m.w as number);
      self.postMessage({ type: "ready" });
    } else if (m.type === "go" && writer) {
      const lat = writer.run(m.measureAt as number, m.stopAt as number);
      writer.close(); // closed before the parent validates
      self.postMessage({ type: "done", res: writer.res, lat }, [lat.buffer as ArrayBuffer]);
      writer = null;
    }
  } catch (err) {
    try {
      writer?.close();
    } catch { /* reported below */ }
    writer = null;
    self.postMessage({ type: "error", error: err instanceof Error ? `${err.name}: ${err.message}` : String(err) });
  }
};
