#!/usr/bin/env node
// bench/server/run.mjs: the example services (examples/{bun,deno}/{shop,counter,events}) under
// load, the engine against stock SQLite, every run checked afterwards. See README.md.
//
// For each cell (service, shape, mix, connections, sync) and each run, alternating the
// drivers: a fresh database (the service's --init), the servers started (--procs of them, or
// one process with --procs threads/isolates), wrk on 127.0.0.1 (a warm-up, then the measured
// period), the servers stopped with SIGTERM, then the file checked with /usr/bin/sqlite3
// against the responses wrk counted. A markdown table of medians goes to stdout (and --out).
//
//   node bench/server/run.mjs [--services shop,counter,events] [--shapes LIST] [--drivers engine,stock]
//       [--mixes write,read90,hot] [--conns 16,64,256] [--sync full,normal] [--runs 3]
//       [--duration 5] [--warmup 1] [--procs 2] [--wrk-threads 2] [--port 18500] [--out FILE]
//       [--json FILE] [--dir DIR] [--smoke]
// Exit: 0 every run checked, 1 a check failed (or a server failed), 2 bad input.
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync, appendFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { cleanupAtExit, root, runtimes, sleep, sql, start, WRK } from "./common.mjs";

const SHAPES = ["bun-processes", "bun-threads", "deno-processes", "deno-serve"];
const SERVICES = ["shop", "counter", "events"];
const MIXES = ["write", "read90", "hot"];
const DRIVERS = ["engine", "stock", "node:sqlite"];

// ---------------------------------------------------------------- options
function usage(msg) {
  process.stderr.write(`bench/server: ${msg}\n(see the header of bench/server/run.mjs)\n`);
  process.exit(2);
}
const opt = {
  services: SERVICES, shapes: SHAPES, drivers: ["engine", "stock"], mixes: MIXES, conns: [16, 64, 256],
  sync: ["full", "normal"], runs: 3, duration: 5, warmup: 1, procs: 2, wrkThreads: 2, port: 18500,
  out: null, json: null, dir: null, smoke: false,
};
const argv = process.argv.slice(2);
const list = (v, allowed, name) => {
  const xs = v.split(",").filter(Boolean);
  for (const x of xs) if (allowed && !allowed.includes(x)) usage(`unknown ${name} "${x}" (one of ${allowed.join(", ")})`);
  if (xs.length === 0) usage(`empty --${name}`);
  return xs;
};
const num = (v, name, min = 0) => {
  const n = Number(v);
  if (!Number.isFinite(n) || n < min) usage(`--${name} takes a number >= ${min}, not "${v}"`);
  return n;
};
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  if (a === "--smoke") { opt.smoke = true; continue; }
  if (a === "--help" || a === "-h") usage("options");
  const v = argv[++i];
  if (v === undefined) usage(`${a} needs a value`);
  switch (a) {
    case "--services": opt.services = list(v, SERVICES, "services"); break;
    case "--shapes": opt.shapes = list(v, SHAPES, "shapes"); break;
    case "--drivers": opt.drivers = list(v, DRIVERS, "drivers"); break;
    case "--mixes": opt.mixes = list(v, MIXES, "mixes"); break;
    case "--conns": opt.conns = list(v, null, "conns").map((x) => num(x, "conns", 1)); break;
    case "--sync": opt.sync = list(v, ["full", "normal"], "sync"); break;
    case "--runs": opt.runs = num(v, "runs", 1); break;
    case "--duration": opt.duration = num(v, "duration", 1); break;
    case "--warmup": opt.warmup = num(v, "warmup", 0); break;
    case "--procs": opt.procs = num(v, "procs", 1); break;
    case "--wrk-threads": opt.wrkThreads = num(v, "wrk-threads", 1); break;
    case "--port": opt.port = num(v, "port", 1024); break;
    case "--out": opt.out = v; break;
    case "--json": opt.json = v; break;
    case "--dir": opt.dir = v; break;
    default: usage(`unknown option ${a}`);
  }
}
if (opt.smoke) {
  // One tiny cell per service, a few seconds in all: the engine, two processes, 16 connections.
  const given = new Set(argv.filter((a) => a.startsWith("--")).map((a) => a.slice(2)));
  if (!given.has("shapes")) opt.shapes = ["bun-processes"];
  if (!given.has("drivers")) opt.drivers = ["engine"];
  if (!given.has("mixes")) opt.mixes = ["write"];
  if (!given.has("conns")) opt.conns = [16];
  if (!given.has("sync")) opt.sync = ["full"];
  if (!given.has("runs")) opt.runs = 1;
  if (!given.has("duration")) opt.duration = 1;
  if (!given.has("warmup")) opt.warmup = 0;
}

const { BUN, DENO } = runtimes({ bun: opt.shapes.some((s) => s.startsWith("bun")), deno: opt.shapes.some((s) => s.startsWith("deno")) }, usage);

// ---------------------------------------------------------------- services
const ITEMS = 1000, STOCK0 = 1000000, LIMIT = 1000;
const SERVICE = {
  shop: { env: "SHOP", extra: { SHOP_ITEMS: String(ITEMS), SHOP_AWAIT_MS: "1" } },
  counter: { env: "COUNTER", extra: { COUNTER_LIMIT: String(LIMIT), COUNTER_WINDOW_S: "1" } },
  events: { env: "EVENTS", extra: {} },
};

// The requests of each mix (Lua for wrk), and what the response hook counts besides codes.
function requestLua(service, mix) {
  const pick = (readLua, writeLua, readShare) =>
    `function request()\n  if math.random() < ${readShare} then\n    ${readLua}\n  end\n  ${writeLua}\nend\n`;
  if (service === "shop") {
    const order = mix === "hot" ? `return wrk.format("POST", "/order?item=1")` : `return wrk.format("POST", "/order")`;
    const read = `return wrk.format("GET", "/stock/" .. math.random(${ITEMS}))`;
    return pick(read, order, mix === "read90" ? 0.9 : 0);
  }
  if (service === "counter") {
    const hit = mix === "hot" ? `return wrk.format("POST", "/hit/hot")` : `return wrk.format("POST", "/hit/k" .. math.random(10000))`;
    const read = `return wrk.format("GET", "/count/k" .. math.random(10000))`;
    return pick(read, hit, mix === "read90" ? 0.9 : 0);
  }
  // events: the reader pages from a little before the last id this thread was given.
  return `local types = { "signup", "login", "view", "click", "purchase" }
function request()
  if math.random() < ${mix === "read90" ? 0.9 : 0} then
    return wrk.format("GET", "/events?after=" .. math.max(0, last - math.random(200)) .. "&limit=50")
  end
  local body = string.format('{"type":"%s","user":%d,"ms":%d}', types[math.random(#types)], math.random(100000), math.random(5000))
  return wrk.format("POST", "/events", { ["Content-Type"] = "application/json" }, body)
end
`;
}

// Counts every status, plus the accepted hits of the counter (its GET answers 200 too), and
// prints one JSON line in done(): the latency percentiles, the errors, the codes summed over
// wrk's threads.
const REPORT_LUA = `
local threads = {}
codes = {}
hits = 0
last = 0
function setup(thread) table.insert(threads, thread) end
function init(args) math.randomseed(os.time() + tonumber(tostring({}):sub(8), 16)) end
pids = {}
function response(status, headers, body)
  codes[status] = (codes[status] or 0) + 1
  local pid = headers["x-server-pid"]
  if pid and status == 201 then pids[pid] = (pids[pid] or 0) + 1 end
  if status == 200 and body:find('"allowed":true', 1, true) then hits = hits + 1 end
  if status == 201 then
    local id = tonumber(body:match('"id":(%d+)'))
    if id and id > last then last = id end
  end
end
function done(summary, latency, requests)
  local c, h, ps = {}, 0, {}
  for _, t in ipairs(threads) do
    for k, v in pairs(t:get("codes")) do c[k] = (c[k] or 0) + v end
    for k, v in pairs(t:get("pids")) do ps[k] = (ps[k] or 0) + v end
    h = h + t:get("hits")
  end
  local parts, pparts = {}, {}
  for k, v in pairs(c) do table.insert(parts, string.format('"%d":%d', k, v)) end
  for k, v in pairs(ps) do table.insert(pparts, string.format('"%s":%d', k, v)) end
  local e = summary.errors
  io.write(string.format('WRKJSON {"requests":%d,"duration_us":%d,"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d,' ..
    '"p50_us":%d,"p99_us":%d,"p999_us":%d,"max_us":%d,"mean_us":%d,"hits":%d,"codes":{%s},"pids":{%s}}\\n',
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(99), latency:percentile(99.9), latency.max, latency.mean, h,
    table.concat(parts, ","), table.concat(pparts, ",")))
end
`;

// ---------------------------------------------------------------- processes
let workDir = null;
const cleanup = cleanupAtExit(() => {
  if (workDir && !opt.dir) rmSync(workDir, { recursive: true, force: true });
});

// The commands of a shape: the servers to start, how many "listening" lines to wait for.
function serverCommands(shape, service, port, procs) {
  if (shape === "bun-processes") {
    return { cmds: Array.from({ length: procs }, () => [BUN, [`examples/bun/${service}/server.ts`]]), ready: procs };
  }
  if (shape === "bun-threads") return { cmds: [[BUN, [`examples/bun/${service}/server.ts`, "--threads", String(procs)]]], ready: procs };
  if (shape === "deno-processes") {
    return {
      cmds: Array.from({ length: procs }, () => [DENO, ["run", "-A", "--unstable-net", `examples/deno/${service}/server.ts`, "--reuse-port"]]),
      ready: procs,
    };
  }
  return { cmds: [[DENO, ["serve", "-A", "--parallel", "--port", String(port), `examples/deno/${service}/app.ts`]]], ready: 1 };
}
function initCommand(shape, service) {
  return shape.startsWith("bun") ? [BUN, [`examples/bun/${service}/server.ts`, "--init"]] : [DENO, ["run", "-A", `examples/deno/${service}/app.ts`, "--init"]];
}
function driverEnv(shape, service, driver) {
  const key = `${SERVICE[service].env}_DRIVER`;
  if (driver === "engine") return { [key]: "multiwriter" };
  if (driver === "stock") return { [key]: shape.startsWith("bun") ? "bun:sqlite" : "stock" };
  return { [key]: "node:sqlite" };
}

function cpuTicks(pid) {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, "utf8");
    const f = s.slice(s.lastIndexOf(")") + 2).split(" ");
    return Number(f[11]) + Number(f[12]); // utime + stime (fields 14, 15)
  } catch {
    return 0;
  }
}
const CLK_TCK = Number(spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout.trim()) || 100;

function wrk(url, conns, seconds, script) {
  const r = spawnSync(WRK, ["-t", String(Math.min(opt.wrkThreads, conns)), "-c", String(conns), "-d", `${seconds}s`,
    "--timeout", "10s", "-s", script, url], { encoding: "utf8", timeout: (seconds + 30) * 1000 });
  const line = (r.stdout ?? "").split("\n").find((l) => l.startsWith("WRKJSON "));
  if (!line) throw new Error(`wrk gave no result (exit ${r.status}): ${(r.stderr || r.stdout || "").slice(-400)}`);
  return JSON.parse(line.slice(8));
}

// ---------------------------------------------------------------- one run
let portSeq = 0;
async function runOne(cell, driver) {
  const { service, shape, mix, conns, sync } = cell;
  const port = opt.port + (portSeq++ % 500);
  const dir = join(workDir, `${service}-${shape}-${driver.replace(":", "")}-${portSeq}`);
  mkdirSync(dir, { recursive: true });
  const db = join(dir, `${service}.db`);
  const env = { PORT: String(port), [`${SERVICE[service].env}_DB`]: db, [`${SERVICE[service].env}_SYNC`]: sync, ...SERVICE[service].extra };
  const res = { ...cell, driver, failures: [] };
  const fail = (m) => res.failures.push(m);
  // A fresh database, created by the engine build of the same runtime (a plain file after).
  const [icmd, iargs] = initCommand(shape, service);
  const init = spawnSync(icmd, iargs, { cwd: root, env: { ...process.env, ...env, ...driverEnv(shape, service, "engine") }, encoding: "utf8", timeout: 60000 });
  if (init.status !== 0) { fail(`--init failed: ${(init.stderr || init.stdout).slice(-300)}`); return res; }

  const script = join(dir, "mix.lua");
  writeFileSync(script, REPORT_LUA + requestLua(service, mix));
  const { cmds, ready } = serverCommands(shape, service, port, opt.procs);
  const senv = { ...env, ...driverEnv(shape, service, driver), ...(shape === "deno-serve" ? { DENO_JOBS: String(opt.procs) } : {}) };
  const servers = cmds.map(([c, a]) => start(c, a, senv));
  try {
    const readyRe = / on :\d+|Listening on /g;
    const t0 = Date.now();
    while (servers.reduce((n, s) => n + (s.out.match(readyRe)?.length ?? 0), 0) < ready) {
      if (servers.some((s) => s.exited)) throw new Error(`a server exited before listening: ${servers.map((s) => s.out).join("").slice(-500)}`);
      if (Date.now() - t0 > 30000) throw new Error(`servers not listening after 30 s: ${servers.map((s) => s.out).join("").slice(-500)}`);
      await sleep(50);
    }
    const url = `http://127.0.0.1:${port}`;
    const passes = [];
    if (opt.warmup > 0) passes.push(wrk(url, conns, opt.warmup, script));
    const cpu0 = servers.reduce((n, s) => n + cpuTicks(s.pid), 0);
    const m = wrk(url, conns, opt.duration, script);
    const cpu1 = servers.reduce((n, s) => n + cpuTicks(s.pid), 0);
    passes.push(m);
    if (servers.some((s) => s.exited)) throw new Error(`a server died under load: ${servers.map((s) => s.out).join("").slice(-500)}`);
    res.rps = m.requests / (m.duration_us / 1e6);
    res.p50_ms = m.p50_us / 1000;
    res.p99_ms = m.p99_us / 1000;
    res.p999_ms = m.p999_us / 1000;
    res.cpu_us_per_req = m.requests ? ((cpu1 - cpu0) / CLK_TCK) * 1e6 / m.requests : null;
    // wrk's percentiles count answered requests only: a connection whose request waits past
    // the end of the run adds nothing to them. The mean wait per answer a client saw, every
    // wait included (Little's law: connections / answers per second), shows such stalls, and
    // so does the share of the orders answered by the least served process (the shop's
    // answers carry x-server-pid; 1.0 is an even split, 0 a process that answered none).
    res.mean_ms = m.mean_us / 1000;
    res.wait_ms = res.rps > 0 ? (conns / res.rps) * 1000 : null;
    const perPid = Object.values(m.pids ?? {});
    const procs = shape.endsWith("-processes") ? opt.procs : 0;
    if (procs > 1 && perPid.length > 0) {
      const counts = [...perPid, ...Array(Math.max(0, procs - perPid.length)).fill(0)];
      res.fewest_share = Math.min(...counts) / (counts.reduce((a, b) => a + b, 0) / counts.length);
    } else res.fewest_share = null;
    res.socket_errors = m.connect + m.read + m.write + m.timeout;
    const sum = (k) => passes.reduce((n, p) => n + (p.codes[k] ?? 0), 0);
    const expected = service === "shop" ? [200, 201] : service === "counter" ? [200, 429] : [200, 201];
    res.expected_non2xx = service === "counter" ? m.codes["429"] ?? 0 : 0;
    res.bad_status = Object.entries(m.codes).filter(([k]) => !expected.includes(Number(k))).reduce((n, [, v]) => n + v, 0);
    const badAll = passes.flatMap((p) => Object.entries(p.codes).filter(([k]) => !expected.includes(Number(k))).map(([k, v]) => `${v} x ${k}`));
    if (badAll.length) fail(`unexpected statuses: ${badAll.join(", ")}`);
    // Requests that may have committed without wrk seeing the answer: one per connection at
    // the end of each pass, plus those whose connection failed.
    const slack = passes.reduce((n, p) => n + conns + p.read + p.write + p.timeout, 0);
    res.acked = service === "counter" ? passes.reduce((n, p) => n + p.hits, 0) : sum("201");
    // MW_SERVER_BENCH_FAULT=ack claims one acknowledgement that never happened: the check
    // must fail (how the smoke's own failure path is tested).
    if (process.env.MW_SERVER_BENCH_FAULT === "ack") res.acked += slack + 1;

    // SIGTERM: stop accepting, finish in flight, close; every server must exit 0 in time.
    for (const s of servers) if (!s.exited) process.kill(s.pid, "SIGTERM");
    const t1 = Date.now();
    const exits = await Promise.race([Promise.all(servers.map((s) => s.done)), sleep(20000).then(() => null)]);
    if (exits === null) throw new Error(`servers still running 20 s after SIGTERM`);
    res.stop_ms = Date.now() - t1;
    for (const e of exits) if (e.code !== 0) fail(`a server exited with ${e.code ?? e.signal} after SIGTERM: ${servers.map((s) => s.out).join("").slice(-300)}`);
    const errOut = servers.map((s) => s.out).join("");
    if (/error|panic|Segmentation/i.test(errOut)) fail(`server output: ${errOut.slice(-300)}`);

    const left = readdirSync(dir).filter((f) => f !== `${service}.db` && f !== "mix.lua");
    // Stock SQLite leaves its -wal/-shm when two processes close at the same moment (neither
    // sees itself as the last); the engine's last close must leave the .db alone.
    const stockLeft = driver !== "engine" && left.every((f) => f.endsWith("-wal") || f.endsWith("-shm"));
    if (left.length && stockLeft) process.stderr.write(`  note: stock SQLite left ${left.join(", ")} (processes closed together)\n`);
    else if (left.length) fail(`files left beside the database: ${left.join(", ")}`);
    check(service, db, res, slack, fail, sum);
  } catch (e) {
    fail(String(e.message ?? e));
  } finally {
    for (const s of servers) if (!s.exited) { try { process.kill(s.pid, "SIGKILL"); } catch { /* gone */ } }
    await Promise.all(servers.map((s) => s.done));
    if (!opt.dir) rmSync(dir, { recursive: true, force: true });
  }
  return res;
}

// The file against what wrk saw (stock sqlite3, after the servers closed it).
function check(service, db, res, slack, fail, sum) {
  const [[ic]] = sql(db, "PRAGMA integrity_check");
  if (ic !== "ok") fail(`integrity_check: ${ic}`);
  const between = (what, n) => {
    if (n < res.acked || n > res.acked + slack) fail(`${what} ${n}, acknowledged ${res.acked} (allowed up to ${res.acked + slack} with requests in flight)`);
  };
  if (service === "shop") {
    const [[orders, total, off, soldOut]] = sql(db, `SELECT (SELECT count(*) FROM orders), (SELECT sum(stock) FROM items) + (SELECT count(*) FROM orders),
      (SELECT count(*) FROM items i LEFT JOIN (SELECT item, count(*) c FROM orders GROUP BY item) o ON o.item = i.id WHERE i.stock + coalesce(o.c, 0) != ${STOCK0}),
      (SELECT count(*) FROM items WHERE stock <= 0)`).map((r) => r.map(Number));
    between("orders", orders);
    if (total !== ITEMS * STOCK0) fail(`stock + orders = ${total}, not ${ITEMS * STOCK0}`);
    if (off) fail(`${off} items whose stock + orders is not ${STOCK0}`);
    if (soldOut || sum("409")) fail(`sold out: ${soldOut} items, ${sum("409")} answers 409`);
    res.rows = orders;
  } else if (service === "counter") {
    const [[total, max]] = sql(db, "SELECT coalesce(sum(n), 0), coalesce(max(n), 0) FROM hits").map((r) => r.map(Number));
    between("hits counted", total);
    if (max > LIMIT) fail(`a key has ${max} hits in a window, over the limit ${LIMIT}`);
    res.rows = total;
  } else {
    const [[count, maxId, valid]] = sql(db, "SELECT count(*), coalesce(max(id), 0), coalesce(sum(json_valid(body)), 0) FROM events").map((r) => r.map(Number));
    between("events", count);
    if (maxId !== count) fail(`max(id) ${maxId} != count ${count}: a gap in the ids`);
    if (valid !== count) fail(`${count - valid} bodies are not JSON`);
    res.rows = count;
  }
}

// ---------------------------------------------------------------- the matrix
const median = (xs) => {
  const v = xs.filter((x) => x != null && Number.isFinite(x)).sort((a, b) => a - b);
  if (!v.length) return null;
  const m = v.length >> 1;
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
};

async function main() {
  workDir = opt.dir ? (mkdirSync(opt.dir, { recursive: true }), opt.dir) : mkdtempSync(join(tmpdir(), "mw-server-bench-"));
  const cells = [];
  for (const service of opt.services) for (const shape of opt.shapes) for (const mix of opt.mixes) {
    if (service === "events" && mix === "hot") continue; // every append is already on the last page
    for (const conns of opt.conns) for (const sync of opt.sync) cells.push({ service, shape, mix, conns, sync });
  }
  const driversFor = (shape) => opt.drivers.filter((d) => d !== "node:sqlite" || shape.startsWith("deno"));
  const total = cells.reduce((n, c) => n + driversFor(c.shape).length * opt.runs, 0);
  process.stderr.write(`bench/server: ${cells.length} cells, ${total} runs of ~${opt.warmup + opt.duration + 3} s (about ${Math.ceil(total * (opt.warmup + opt.duration + 3) / 60)} min)\n`);
  const rows = [];
  let failed = 0, done = 0;
  for (const cell of cells) {
    const drivers = driversFor(cell.shape);
    const results = Object.fromEntries(drivers.map((d) => [d, []]));
    for (let r = 0; r < opt.runs; r++) {
      // Alternate which driver goes first, so drift of the machine falls on both.
      const order = r % 2 ? [...drivers].reverse() : drivers;
      for (const d of order) {
        const res = await runOne(cell, d);
        done++;
        results[d].push(res);
        const tag = `${cell.service} ${cell.shape} ${cell.mix} c${cell.conns} ${cell.sync} ${d} #${r + 1}`;
        if (res.failures.length) {
          failed++;
          process.stderr.write(`[${done}/${total}] FAIL ${tag}: ${res.failures.join("; ")}\n`);
        } else {
          process.stderr.write(`[${done}/${total}] ok   ${tag}: ${res.rps.toFixed(0)} req/s, p99 ${res.p99_ms.toFixed(1)} ms, wait ${res.wait_ms?.toFixed(1)} ms, ${res.cpu_us_per_req?.toFixed(0)} us CPU/req${res.fewest_share != null ? `, fewest ${res.fewest_share.toFixed(2)}` : ""}\n`);
        }
        if (opt.json) appendFileSync(opt.json, JSON.stringify({ ...res, runs: opt.runs, duration_s: opt.duration, procs: opt.procs, time: new Date().toISOString() }) + "\n");
      }
    }
    for (const d of drivers) {
      const rs = results[d];
      const ok = rs.filter((x) => !x.failures.length);
      const med = (k) => median(ok.map((x) => x[k]));
      rows.push({ ...cell, driver: d, runs: rs.length, failedRuns: rs.length - ok.length, rps: med("rps"), p50: med("p50_ms"),
        p99: med("p99_ms"), p999: med("p999_ms"), cpu: med("cpu_us_per_req"), expected: med("expected_non2xx"),
        wait: med("wait_ms"), fewest: ok.some((x) => x.fewest_share != null) ? median(ok.map((x) => x.fewest_share ?? 0)) : null,
        bad: rs.reduce((n, x) => n + (x.bad_status ?? 0), 0), sock: rs.reduce((n, x) => n + (x.socket_errors ?? 0), 0) });
    }
  }
  const f = (x, d = 0) => (x == null ? "-" : x.toLocaleString("en-US", { minimumFractionDigits: d, maximumFractionDigits: d }));
  const lines = [
    `Median of ${opt.runs} run(s), ${opt.duration} s each after ${opt.warmup} s of warm-up; ${opt.procs} server processes (threads/isolates for bun-threads, deno-serve); wrk -t${opt.wrkThreads} on 127.0.0.1. Non-2xx expected: 429 (counter over its limit); other non-2xx and socket errors are summed over the runs. CPU is the servers' user + system time per request. The percentiles are wrk's, of answered requests; "wait" is connections / req/s, the mean wait per answer with every wait counted (requests still unanswered at the end of the run included); "fewest" is the share of the orders answered by the least served process (shop, process shapes; 1.00 is an even split).`,
    "",
    "| service | shape | mix | conns | sync | driver | req/s | p50 ms | p99 ms | p99.9 ms | wait ms | fewest | 429 | other non-2xx | socket errors | CPU us/req | check |",
    "|---|---|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ...rows.map((r) => `| ${r.service} | ${r.shape} | ${r.mix} | ${r.conns} | ${r.sync} | ${r.driver} | ${f(r.rps)} | ${f(r.p50, 1)} | ${f(r.p99, 1)} | ${f(r.p999, 1)} | ${f(r.wait, 1)} | ${f(r.fewest, 2)} | ${r.service === "counter" ? f(r.expected) : "-"} | ${r.bad} | ${r.sock} | ${f(r.cpu)} | ${r.failedRuns ? `FAILED ${r.failedRuns}/${r.runs}` : "ok"} |`),
  ];
  const md = lines.join("\n") + "\n";
  process.stdout.write(md);
  if (opt.out) writeFileSync(opt.out, md);
  if (failed) process.stderr.write(`bench/server: ${failed} of ${total} runs FAILED their check\n`);
  cleanup();
  process.exit(failed ? 1 : 0);
}

main().catch((e) => {
  console.error(e);
  cleanup();
  process.exit(1);
});
