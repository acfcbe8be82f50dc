-- wrk script: closed-loop label round trips against one `crowdbudget serve` process.
--
-- Used by benchmarks/bench_multiprocess.py (--client wrk); run wrk with as many threads as
-- connections (-t N -c N): each wrk thread then has exactly one connection, so its requests
-- and responses strictly alternate and the round trip "POST assignments -> POST label" is a
-- plain state machine per thread (wrk tells a response's callback nothing about its
-- connection).
--
-- Environment:
--   CB_WORKERS  a file of lines "campaign_id worker_token" (the workers of this server's
--               campaigns); thread t serves lines t, t + N, t + 2N, ... in turn
--   CB_LOG      a path prefix: thread t appends to CB_LOG .. t ".log" one line per response:
--               "A cid assignment_id token status" (ask for work) and
--               "L cid assignment_id label status" (answer it)
--   CB_THREADS  N (the -t given to wrk)

local counter = 0
local threads = {}

function setup(thread)
   thread:set("id", counter)
   counter = counter + 1
   table.insert(threads, thread)
end

local mine, log, slot, state, current, answers

function init(args)
   local n = tonumber(os.getenv("CB_THREADS"))
   mine = {}
   local k = 0
   for line in io.lines(os.getenv("CB_WORKERS")) do
      local cid, token = line:match("^(%S+) (%S+)$")
      if cid and k % n == id then
         table.insert(mine, { cid = cid, token = token })
      end
      k = k + 1
   end
   log = io.open(os.getenv("CB_LOG") .. id .. ".log", "w")
   log:setvbuf("full")
   slot = 0
   state = "next"
   answers = 0
end

local function post(path, token, body)
   return wrk.format("POST", path, {
      ["Authorization"] = "Bearer " .. token,
      ["Content-Type"] = "application/json",
   }, body)
end

function request()
   if state == "label" then
      -- the label was chosen with the assignment: a request sent again after a reconnect
      -- carries the same one (a repeated label is accepted, a different one refused)
      return post(
         "/v1/campaigns/" .. current.cid .. "/assignments/" .. current.aid .. "/label",
         current.worker.token,
         '{"label":"' .. current.label .. '"}'
      )
   end
   slot = slot % #mine + 1
   current = { worker = mine[slot] }
   return post("/v1/campaigns/" .. mine[slot].cid .. "/assignments", mine[slot].token, "{}")
end

function response(status, headers, body)
   local w = current.worker
   if state == "label" then
      log:write("L ", w.cid, " ", current.aid, " ", current.label, " ", status, "\n")
      state = "next"
      return
   end
   local aid = status == 200 and body:match('"assignment_id":"([^"]+)"') or "-"
   log:write("A ", w.cid, " ", aid, " ", w.token, " ", status, "\n")
   if aid ~= "-" then
      current.cid = w.cid
      current.aid = aid
      answers = answers + 1
      current.label = tostring(answers % 2)
      state = "label"
   end
end

function done(summary, latency, requests)
   io.write(string.format(
      "WRK requests=%d seconds=%.3f p50_ms=%.3f p99_ms=%.3f errors=%d timeouts=%d\n",
      summary.requests, summary.duration / 1e6, latency:percentile(50) / 1000,
      latency:percentile(99) / 1000,
      summary.errors.connect + summary.errors.read + summary.errors.write,
      summary.errors.timeout
   ))
end
