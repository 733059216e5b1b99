// bench/ts/child.ts: one writer of the TypeScript harness as a process (processes mode).
// argv: a JSON {cfg, w, lat}. Protocol on stdout/stdin, one line each:
//   out "ready" | "error <message>"; in "go <measureAt> <stopAt>"; then it runs, writes
//   its raw latencies (Float64, µs) to the file `lat`, closes its connection and prints
//   "done <json result>". The parent merges the raw latencies, never percentiles.
import { writeFileSync } from "node:fs";
import process from "node:process";
import { type RunConfig, Writer } from "./common.ts";

const args = process.argv.slice(2);
const spec = JSON.parse(args[args.length - 1]) as { cfg: RunConfig; w: number; lat: string };

function say(line: string): void {
  process.stdout.write(line + "\n");
}

function fail(e: unknown): never {
  say(`error ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}`.replace(/\n/g, " "));
  process.exit(1);
}

let writer: Writer;
try {
  writer = new Writer(spec.cfg, spec.w);
} catch (e) {
  fail(e);
}
say("ready");

let buf = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk: string) => {
  buf += chunk;
  const nl = buf.indexOf("\n");
  if (nl < 0) return;
  const [word, a, b] = buf.slice(0, nl).split(" ");
  buf = "";
  if (word !== "go") fail(new Error(`unexpected command ${word}`));
  try {
    const lat = writer.run(Number(a), Number(b));
    writer.close();
    writeFileSync(spec.lat, new Uint8Array(lat.buffer, lat.byteOffset, lat.byteLength));
    say(`done ${JSON.stringify(writer.res)}`);
  } catch (e) {
    try {
      writer.close();
    } catch { /* reported by fail */ }
    fail(e);
  }
  process.exit(0);
});
process.stdin.on("end", () => fail(new Error("the parent went away before the start")));
