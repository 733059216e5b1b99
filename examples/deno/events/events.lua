-- wrk -s events.lua: every request is POST /events with a small JSON event.
-- wrk -s events.lua http://127.0.0.1:8080 -- 10   one request in 10 is a reader instead:
-- GET /events?after=ID&limit=50, ID a little before the last id this thread was given.
local read_every = 0
local last = 0
local n = 0
local types = { "signup", "login", "view", "click", "purchase" }
function init(args)
  if args[1] then read_every = tonumber(args[1]) end
  math.randomseed(os.time() + tonumber(tostring({}):sub(8), 16))
end
function request()
  n = n + 1
  if read_every > 0 and n % read_every == 0 then
    return wrk.format("GET", "/events?after=" .. math.max(0, last - math.random(200)) .. "&limit=50")
  end
  local body = string.format('{"type":"%s","user":%d,"ms":%d}', types[math.random(#types)], math.random(100000), math.random(5000))
  return wrk.format("POST", "/events", { ["Content-Type"] = "application/json" }, body)
end
function response(status, headers, body)
  if status == 201 then
    local id = tonumber(body:match('"id":(%d+)'))
    if id and id > last then last = id end
  end
end
