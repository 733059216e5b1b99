-- wrk -s hit.lua: every request is POST /hit/<key>, the key one of 10000 (k1 .. k10000).
-- wrk -s hit.lua http://127.0.0.1:8080 -- 100   the keys are k1 .. k100 instead.
local keys = 10000
function init(args)
  if args[1] then keys = tonumber(args[1]) end
  math.randomseed(os.time() + tonumber(tostring({}):sub(8), 16))
end
function request()
  return wrk.format("POST", "/hit/k" .. math.random(keys))
end
