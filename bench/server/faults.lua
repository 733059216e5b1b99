-- wrk -s bench/server/faults.lua: every request is POST /order (the server picks the item).
-- Each thread keeps the order id of every 2xx answer and counts the answers by the process
-- that sent them (the x-server-pid header). done() writes "id|pid", one order a line, to
-- the file named by FAULTS_IDS and prints one JSON line (FAULTSJSON ...) with the counts.
wrk.method = "POST"
wrk.path = "/order"
local threads = {}
ids = {}
nids = 0
noid = 0
codes = {}
pids = {}

function setup(thread)
  table.insert(threads, thread)
end

function response(status, headers, body)
  codes[status] = (codes[status] or 0) + 1
  if status >= 200 and status < 300 then
    -- The id stays a string: ids go up to 2^53, printed back exactly.
    local id = body:match('"order":(%d+)')
    local pid = "?"
    for k, v in pairs(headers) do
      if k:lower() == "x-server-pid" then pid = v end
    end
    pids[pid] = (pids[pid] or 0) + 1
    if id then
      nids = nids + 1
      ids[nids] = id .. "|" .. pid
    else
      noid = noid + 1
    end
  end
end

function done(summary, latency, requests)
  local out = assert(io.open(assert(os.getenv("FAULTS_IDS"), "FAULTS_IDS not set"), "w"))
  local c, p, n, missing = {}, {}, 0, 0
  for _, t in ipairs(threads) do
    for _, id in ipairs(t:get("ids")) do
      out:write(id, "\n")
      n = n + 1
    end
    for k, v in pairs(t:get("codes")) do c[k] = (c[k] or 0) + v end
    for k, v in pairs(t:get("pids")) do p[k] = (p[k] or 0) + v end
    missing = missing + t:get("noid")
  end
  out:close()
  local cs, ps = {}, {}
  for k, v in pairs(c) do table.insert(cs, string.format('"%d":%d', k, v)) end
  for k, v in pairs(p) do table.insert(ps, string.format('"%s":%d', k, v)) end
  local e = summary.errors
  io.write(string.format('FAULTSJSON {"requests":%d,"duration_us":%d,"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d,' ..
    '"p50_us":%d,"p99_us":%d,"max_us":%d,"ids":%d,"noid":%d,"codes":{%s},"pids":{%s}}\n',
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(99), latency.max, n, missing, table.concat(cs, ","), table.concat(ps, ",")))
end
