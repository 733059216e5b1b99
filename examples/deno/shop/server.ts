// The shop (app.ts) as a process of its own: `deno run -A server.ts` serves PORT (8080).
//   deno run -A server.ts --init                          create shop.db with its items, then exit
//   deno run -A server.ts                                 serve
//   deno run -A --unstable-net server.ts --reuse-port     serve; start several: they share
//                                                         the port (SO_REUSEPORT, Linux) and the file
// `deno serve -A --parallel app.ts` is the other shape: one process, one isolate per core.
import { close, DRIVER, handler } from "./app.ts";

const PORT = Number(Deno.env.get("PORT") ?? "8080");
// reusePort is an unstable API in Deno: without --unstable-net, Deno exits at Deno.serve().
const reusePort = Deno.args.includes("--reuse-port");
// The handlers still running: stop() waits for them too before it closes the database.
let inflight = 0;
let drained: (() => void) | undefined;
const server = Deno.serve({
  port: PORT,
  reusePort,
  onListen: () => console.log(`shop ${Deno.pid} on :${PORT} (${DRIVER}${reusePort ? ", reusePort" : ""})`),
}, async (req) => {
  inflight++;
  try {
    return await handler(req);
  } finally {
    if (--inflight === 0) drained?.();
  }
});

// SIGTERM or SIGINT: stop accepting, let the requests in flight finish, close (only the .db stays).
const stop = async () => {
  await server.shutdown();
  if (inflight > 0) await new Promise<void>((resolve) => (drained = resolve));
  close();
  Deno.exit(0);
};
Deno.addSignalListener("SIGTERM", stop);
Deno.addSignalListener("SIGINT", stop);
