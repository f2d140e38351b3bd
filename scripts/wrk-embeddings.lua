-- wrk script of scripts/bench-http-vs-grpc.sh: POSTs embedding requests of one sequence of
-- exactly TOKENS token ids to ROUTE (/v1/embeddings, OpenAI's shape, or /embed, TEI's). Each
-- sequence is framed as relserve-client bench --input tokens frames it ([CLS]=1, TOKENS-2 ids
-- drawn from [5, VOCAB), [SEP]=2), so both sides compute the same lengths. Each wrk thread
-- builds BODIES different bodies once and cycles through them. At the end it prints one JSON
-- line: requests, the window, errors, latency percentiles.
--   TOKENS=128 VOCAB=128100 ROUTE=/v1/embeddings wrk -t2 -c32 -d20s -s scripts/wrk-embeddings.lua URL
local tokens = tonumber(os.getenv("TOKENS") or "128")
local vocab = tonumber(os.getenv("VOCAB") or "128100")
local route = os.getenv("ROUTE") or "/v1/embeddings"
local count = tonumber(os.getenv("BODIES") or "64")

local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("thread_id", threads)
end

local bodies = {}
local next_body = 0

function init(args)
  math.randomseed(1000 + (thread_id or 0))
  for i = 1, count do
    local ids = {1}
    for _ = 1, tokens - 2 do ids[#ids + 1] = math.random(5, vocab - 1) end
    ids[#ids + 1] = 2
    local list = "[[" .. table.concat(ids, ",") .. "]]"
    if route == "/embed" then
      bodies[i] = '{"inputs": ' .. list .. '}'
    else
      bodies[i] = '{"input": ' .. list .. '}'
    end
  end
  wrk.method = "POST"
  wrk.path = route
  wrk.headers["Content-Type"] = "application/json"
end

function request()
  next_body = next_body % count + 1
  return wrk.format(nil, nil, nil, bodies[next_body])
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"requests":%d,"duration_s":%.3f,"errors_status":%d,"errors_connect":%d,"errors_read":%d,' ..
    '"errors_write":%d,"errors_timeout":%d,"p50_ms":%.2f,"p90_ms":%.2f,"p99_ms":%.2f,"max_ms":%.2f}\n',
    summary.requests, summary.duration / 1e6, e.status, e.connect, e.read, e.write, e.timeout,
    latency:percentile(50) / 1e3, latency:percentile(90) / 1e3, latency:percentile(99) / 1e3,
    latency.max / 1e3))
end
