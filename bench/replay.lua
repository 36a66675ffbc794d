-- wrk script: POST pre-signed Stripe events from the file named by BENCH_EVENTS, each once in
-- order (thread t of n takes records t, t+n, ...), wrapping around when a thread runs out.
-- Record format: "<Stripe-Signature>\n<length>\n<body>". Prints one JSON line at the end.
-- BENCH_LIMIT (optional): a burst; each thread stops once its share of that many is answered,
-- and leaves a file named for itself in the folder BENCH_DONE names.
-- BENCH_ROUTE (optional): where to post them; the webhook by default.
-- BENCH_AUTHORIZATION (optional): an Authorization header for every request (a push token).
-- BENCH_CLOSE (optional): "1" asks the server to close each connection after its answer, so
-- every request comes on a new one (as the Pub/Sub emulator pushes).
local threads = {}
local counter = 0

function setup(thread)
  thread:set("id", counter)
  counter = counter + 1
  table.insert(threads, thread)
end

function init(args)
  local n = tonumber(os.getenv("BENCH_THREADS"))
  local file = assert(io.open(os.getenv("BENCH_EVENTS"), "rb"))
  requests, index, sent, answered = {}, 0, 0, 0
  local route = os.getenv("BENCH_ROUTE") or "/api/webhook/payments"
  local authorization = os.getenv("BENCH_AUTHORIZATION")
  share = tonumber(os.getenv("BENCH_LIMIT") or "0") / n
  local record = 0
  while true do
    local sig = file:read("*l")
    if not sig then break end
    local length = tonumber(file:read("*l"))
    local body = file:read(length)
    if record % n == id then
      local headers = {["Content-Type"] = "application/json", ["Stripe-Signature"] = sig}
      if authorization then headers["Authorization"] = authorization end
      if os.getenv("BENCH_CLOSE") == "1" then headers["Connection"] = "close" end
      table.insert(requests, wrk.format("POST", route, headers, body))
    end
    record = record + 1
  end
  file:close()
end

function request()
  index = index % #requests + 1
  sent = sent + 1
  return requests[index]
end

function response(status, headers, body)
  answered = answered + 1
  if share > 0 and answered >= share then
    if not finished then
      -- wrk itself runs out its -d: the bench stops it once every thread has said so.
      finished = true
      local mark = io.open(os.getenv("BENCH_DONE") .. "/" .. id, "w")
      if mark then mark:close() end
    end
    wrk.thread:stop()
  end
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"requests": %d, "duration_us": %d, "status_errors": %d, "socket_errors": %d,' ..
    ' "p50_us": %d, "p99_us": %d}\n',
    summary.requests, summary.duration, e.status, e.connect + e.read + e.write + e.timeout,
    latency:percentile(50), latency:percentile(99)))
end
