-- wrk -s order.lua: every request is POST /order (the server picks the item).
wrk.method = "POST"
wrk.path = "/order"
