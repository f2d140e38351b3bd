#!/usr/bin/env bash
# The HTTP/JSON API against gRPC on the same server: one relserve process serving one model on
# both ports, loaded in turn by the same closed-loop workload, each request one sequence of
# exactly TOKENS token ids ([CLS], TOKENS-2 random ids, [SEP]) at CONCURRENCY requests in
# flight: gRPC Embed from `relserve-client bench --input tokens --lengths fixed:TOKENS`, HTTP
# POST /v1/embeddings (ROUTE=/embed: TEI's route) from wrk with scripts/wrk-embeddings.lua.
# Each side gets WARMUP seconds of load first, then DURATION measured seconds. Prints requests/s,
# tokens/s and latency side by side with the HTTP/gRPC ratios, and appends one JSON line to OUT.
# Only successful answers count (each one a TOKENS-token sequence, checked before the run).
# The clients run on the same machine as the server and take CPU from it, wrk less than
# relserve-client; for a saturated server, CONCURRENCY must exceed the model's workers (the
# default 32 does), and the HTTP threads are raised to at least CONCURRENCY.
#   scripts/bench-http-vs-grpc.sh             (after scripts/build.sh; needs wrk: apt-get install wrk)
#   DURATION=5 WARMUP=2 scripts/bench-http-vs-grpc.sh    (a short check that it works)
# MODEL names another model directory (default: a DeBERTa-v3-xsmall-sized model with random
# weights, created on first use); SERVER_FLAGS adds relserve flags; ORDER="http grpc" swaps the
# sides.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
BIN="$BUILD_DIR/bin"
MODELS=${MODELS:-$BUILD_DIR/bench-models}
MODEL=${MODEL:-$MODELS/deberta-v3-xsmall}
OUT=${OUT:-bench-http-vs-grpc.jsonl}
TOKENS=${TOKENS:-128}
VOCAB=${VOCAB:-128100}
CONCURRENCY=${CONCURRENCY:-32}
DURATION=${DURATION:-20}
WARMUP=${WARMUP:-3}
ROUTE=${ROUTE:-/v1/embeddings}
ORDER=${ORDER:-"grpc http"}
WRK_THREADS=${WRK_THREADS:-2}
GRPC_PORT=${GRPC_PORT:-50161}
HTTP_PORT=${HTTP_PORT:-8161}
METRICS_PORT=${METRICS_PORT:-9261}

command -v wrk > /dev/null || {
  echo "bench-http-vs-grpc: wrk not found; install it: apt-get install wrk" >&2; exit 2; }
for b in relserve relserve-client relserve-model; do
  [ -x "$BIN/$b" ] || { echo "bench-http-vs-grpc: $BIN/$b not found; run scripts/build.sh" >&2; exit 2; }
done
case "$ROUTE" in /v1/embeddings|/embed) ;; *) echo "ROUTE must be /v1/embeddings or /embed" >&2; exit 2 ;; esac
[ "$WRK_THREADS" -le "$CONCURRENCY" ] || WRK_THREADS=$CONCURRENCY

# DeBERTa-v3-xsmall sizes: hidden 384, 12 layers, 6 heads, intermediate 1536 (as bench-serving.sh).
[ -f "$MODEL/config.json" ] || "$BIN/relserve-model" create --family deberta-v3 --hidden 384 --layers 12 --heads 6 \
  --intermediate 1536 --vocab "$VOCAB" --out "$MODEL" > /dev/null

log="$OUT.server.log"
http_threads=$(( CONCURRENCY > 64 ? CONCURRENCY : 64 ))
"$BIN/relserve" --model "bench=$MODEL" --grpc-address "127.0.0.1:$GRPC_PORT" --http-address "127.0.0.1:$HTTP_PORT" \
  --http-threads "$http_threads" --metrics-address 127.0.0.1 --metrics-port "$METRICS_PORT" ${SERVER_FLAGS:-} \
  > "$log" 2>&1 &
pid=$!
trap 'kill -TERM $pid 2> /dev/null || true' EXIT
for _ in $(seq 1 240); do
  grep -q "serving" "$log" && break
  kill -0 "$pid" 2> /dev/null || { cat "$log" >&2; exit 1; }
  sleep 0.5
done
grep -q "serving" "$log" || { echo "bench-http-vs-grpc: the server did not start:" >&2; cat "$log" >&2; exit 1; }

# One request as wrk sends it: answered, and counted as TOKENS tokens.
TOKENS=$TOKENS ROUTE=$ROUTE VOCAB=$VOCAB python3 - "$HTTP_PORT" <<'PY'
import json, os, random, sys, urllib.request
tokens, route = int(os.environ["TOKENS"]), os.environ["ROUTE"]
ids = [1] + [random.randrange(5, int(os.environ["VOCAB"])) for _ in range(tokens - 2)] + [2]
body = {"inputs": [ids]} if route == "/embed" else {"input": [ids]}
req = urllib.request.Request("http://127.0.0.1:%s%s" % (sys.argv[1], route), json.dumps(body).encode(),
                             {"Content-Type": "application/json"})
answer = json.load(urllib.request.urlopen(req, timeout=60))
if route == "/v1/embeddings":
    assert answer["usage"]["prompt_tokens"] == tokens, answer["usage"]
else:
    assert len(answer) == 1 and len(answer[0]) > 0, answer
PY

grpc_json=""; http_json=""
run_grpc() {
  grpc_json=$("$BIN/relserve-client" bench --target "127.0.0.1:$GRPC_PORT" --concurrency "$CONCURRENCY" \
    --duration "$DURATION" --warmup "$WARMUP" --lengths "fixed:$TOKENS" --input tokens --vocab "$VOCAB" \
    --deadline-ms 60000 --quiet)
}
run_http() {
  local url="http://127.0.0.1:$HTTP_PORT"
  export TOKENS VOCAB ROUTE
  [ "$WARMUP" = 0 ] || wrk -t "$WRK_THREADS" -c "$CONCURRENCY" -d "${WARMUP}s" --timeout 60s \
    -s scripts/wrk-embeddings.lua "$url" > /dev/null
  http_json=$(wrk -t "$WRK_THREADS" -c "$CONCURRENCY" -d "${DURATION}s" --timeout 60s \
    -s scripts/wrk-embeddings.lua "$url" | grep '^{')
}
for side in $ORDER; do
  case "$side" in
    grpc) run_grpc ;;
    http) run_http ;;
    *) echo "ORDER: unknown side $side" >&2; exit 2 ;;
  esac
done

GRPC_JSON=$grpc_json HTTP_JSON=$http_json python3 - "$OUT" "$TOKENS" "$CONCURRENCY" "$ROUTE" "$MODEL" <<'PY'
import json, os, sys
out, tokens, concurrency, route, model = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
g = json.loads(os.environ["GRPC_JSON"])
w = json.loads(os.environ["HTTP_JSON"])
ok = w["requests"] - w["errors_status"]
http = {"requests": ok, "requests_per_second": ok / w["duration_s"],
        "tokens_per_second": ok * tokens / w["duration_s"], "p50_ms": w["p50_ms"], "p99_ms": w["p99_ms"],
        "failed_requests": w["errors_status"] + w["errors_connect"] + w["errors_read"] + w["errors_write"]
                           + w["errors_timeout"]}
grpc = {"requests": g["requests"], "requests_per_second": g["requests_per_second"],
        "tokens_per_second": g["tokens_per_second"], "p50_ms": g["p50_ms"], "p99_ms": g["p99_ms"],
        "failed_requests": g.get("failed_requests", 0)}
ratio = lambda k: http[k] / grpc[k] if grpc[k] else float("nan")
for side, r in (("gRPC", grpc), ("HTTP", http)):
    if r["requests"] == 0:
        print("warning: no %s request finished inside the window: raise DURATION (and WARMUP) or use a smaller "
              "MODEL" % side, file=sys.stderr)
print("%-22s %12s %12s %12s" % ("", "gRPC", "HTTP " + route, "HTTP/gRPC"))
for k, fmt in (("requests_per_second", "%.1f"), ("tokens_per_second", "%.0f"), ("p50_ms", "%.1f"),
               ("p99_ms", "%.1f")):
    print("%-22s %12s %12s %12.3f" % (k, fmt % grpc[k], fmt % http[k], ratio(k)))
print("%-22s %12d %12d" % ("requests (failed)", grpc["requests"], http["requests"]) +
      "   failed: gRPC %d, HTTP %d" % (grpc["failed_requests"], http["failed_requests"]))
line = {"model": model, "tokens": tokens, "concurrency": concurrency, "route": route,
        "duration_s": g.get("duration_s"), "grpc": grpc, "http": http,
        "http_over_grpc_requests": ratio("requests_per_second"), "http_over_grpc_tokens": ratio("tokens_per_second")}
with open(out, "a") as f:
    f.write(json.dumps(line) + "\n")
PY
