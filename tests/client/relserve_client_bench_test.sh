#!/usr/bin/env bash
# relserve-client bench against a real server: a short timed run (throughput, no errors,
# latency order, sequence lengths inside --lengths as the server counted them, padding ratio
# from /metrics, a progress line a second), a fixed number of requests for each RPC, a
# file:PATH length distribution, open-loop runs at a fixed rate, failed requests counted by
# status code, and connection failures apart from them, with the callers' back-off against a
# port where no server listens and recovery when a server comes up during the run.
bin="$1"; root="$2"
source "$(dirname "$0")/client_test_lib.sh"

make_model embedder --sentence-transformers
make_model reranker --labels 1
start_server server.log --model "embedder=$work/embedder" --model "reranker=$work/reranker" --metrics-port 0
b=("$client" bench --target "127.0.0.1:$grpc_port")

# metric NAME: the sum of a series on the server's /metrics.
metric() {
  /usr/bin/python3 - "$metrics_port" "$1" <<'PY'
import sys, urllib.request
text = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=5).read().decode()
print(int(sum(float(l.rsplit(" ", 1)[1]) for l in text.splitlines()
              if l.startswith(sys.argv[2] + "{") or l.startswith(sys.argv[2] + " "))))
PY
}

tokens0=$(metric relserve_tokens_total); requests0=$(metric relserve_requests_total)
expect_exit 0 "${b[@]}" --duration 2 --warmup 0.5 --concurrency 4 --lengths uniform:10:20 --metrics-port "$metrics_port"
tokens1=$(metric relserve_tokens_total); requests1=$(metric relserve_requests_total)
check_json 'j["rpc"] == "embed" and j["concurrency"] == 4 and j["lengths"] == "uniform:10:20"' \
  'j["requests"] > 0 and j["requests_per_second"] > 0' \
  'j["sequences"] == j["requests"] and j["sequences_per_second"] > 0 and j["tokens_per_second"] > 0' \
  'j["errors"] == {} and j["failed_requests"] == 0' \
  '1.9 < j["duration_s"] < 3' \
  '0 < j["p50_ms"] <= j["p90_ms"] <= j["p99_ms"] <= j["max_ms"]' \
  'j["sequence_tokens"]["min"] == 10 and j["sequence_tokens"]["max"] == 20' \
  '10 <= j["tokens"] / j["sequences"] <= 20' \
  'j["padding_ratio"] >= 1 and j["mean_batch_size"] >= 1' \
  'abs(j["server_requests"] - j["requests"]) <= 0.1 * j["requests"] + 10' \
  < "$work/out"
# The server's own counters over the run, warm-up included: 10 to 20 tokens per request.
/usr/bin/python3 -c "
import json
j = json.load(open('$work/out'))
tokens, requests = $tokens1 - $tokens0, $requests1 - $requests0
assert requests >= j['requests'] and tokens >= j['tokens'], (tokens, requests, j)
assert 10 <= tokens / requests <= 20, (tokens, requests)
"
grep -q "^bench: 1 s, [0-9]* requests" "$work/err" || { echo "FAILED: no progress line"; cat "$work/err"; exit 1; }

# --requests: exactly that many, for each RPC; --inputs-per-request.
expect_exit 0 "${b[@]}" --requests 25 --warmup 0 --concurrency 3 --lengths fixed:16 --inputs-per-request 2 --quiet
check_json 'j["requests"] == 25 and j["sequences"] == 50 and j["tokens"] == 50 * 16' \
  'j["sequence_tokens"] == {"min": 16, "max": 16, "mean": 16.0}' < "$work/out"
[ ! -s "$work/err" ] || { echo "FAILED: --quiet printed progress"; cat "$work/err"; exit 1; }
expect_exit 0 "${b[@]}" --rpc rerank --model reranker --requests 12 --warmup 0 --concurrency 2 --lengths fixed:8 \
  --inputs-per-request 3 --quiet
check_json 'j["rpc"] == "rerank" and j["requests"] == 12 and j["sequences"] == 36 and j["errors"] == {}' < "$work/out"
expect_exit 0 "${b[@]}" --rpc classify --model reranker --requests 12 --warmup 0 --lengths log-uniform:8:64 --quiet
check_json 'j["rpc"] == "classify" and j["requests"] == 12' \
  '8 <= j["sequence_tokens"]["min"] <= j["sequence_tokens"]["max"] <= 64' < "$work/out"
expect_exit 0 "${b[@]}" --input text --requests 12 --warmup 0 --lengths fixed:12 --quiet
check_json 'j["requests"] == 12 and j["tokens"] > 12 * 6' < "$work/out"

# file:PATH lengths.
printf '%s\n' 24 24 40 > "$work/lengths.txt"
expect_exit 0 "${b[@]}" --requests 40 --warmup 0 --lengths "file:$work/lengths.txt" --quiet
check_json 'j["sequence_tokens"]["min"] == 24 and j["sequence_tokens"]["max"] == 40' \
  '(j["tokens"] - 24 * j["requests"]) % 16 == 0' \
  < "$work/out"

# Open loop: --rate paces the starts whatever the server's speed. 30 requests at 30 a second
# on a constant schedule take about 1 s, where the closed loop above finishes such requests in
# milliseconds (a few starts may wake up late on a busy machine); Poisson arrivals at 40 a
# second for 3 s give about 120 requests.
expect_exit 0 "${b[@]}" --rate 30 --arrivals constant --requests 30 --warmup 0 --concurrency 4 --lengths fixed:16 --quiet
check_json 'j["requests"] == 30 and j["errors"] == {}' 'j["rate"] == 30 and j["arrivals"] == "constant"' \
  '0.9 < j["duration_s"] < 2.5' 'j["late_starts"] <= 3' < "$work/out"
expect_exit 0 "${b[@]}" --rate 40 --duration 3 --warmup 0 --concurrency 8 --lengths fixed:16 --quiet
check_json '75 < j["requests"] < 170' 'j["rate"] == 40 and j["arrivals"] == "poisson"' 'j["errors"] == {}' \
  < "$work/out"
# One caller and a server that needs time per request: the schedule runs ahead, requests start
# late, and the wait counts in their latency.
expect_exit 0 "${b[@]}" --rate 2000 --arrivals constant --requests 100 --warmup 0 --concurrency 1 \
  --lengths fixed:64 --quiet
check_json 'j["requests"] == 100' 'j["late_starts"] > 50' 'j["max_ms"] >= j["max_start_lag_ms"] > 10' < "$work/out"

# Failures are counted by code, and the run still reports (exit 0).
expect_exit 0 "${b[@]}" --model nope --requests 5 --warmup 0 --lengths fixed:16 --quiet
check_json 'j["requests"] == 0 and j["errors"] == {"NOT_FOUND": 5} and j["failed_requests"] == 5' \
  'j["connection_failures"] == 0 and "connection_error" not in j' < "$work/out"
# A bad distribution is a usage error.
expect_exit 2 "${b[@]}" --lengths uniform:20:10
check_json '"--lengths" in j["error"]["message"]' < "$work/err"

# No server on the port: each caller backs off after a connection failure (50 ms doubling to
# 1 s, with jitter), so 8 callers make a few dozen attempts in 2 s instead of spinning through
# hundreds of thousands, and the report counts them as connection failures, not server errors.
free_port() {
  /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
dead_port=$(free_port)
expect_exit 0 "$client" bench --target "127.0.0.1:$dead_port" --duration 2 --warmup 0 --concurrency 8 --lengths fixed:16
check_json 'j["requests"] == 0 and j["errors"] == {}' '8 <= j["connection_failures"] <= 100' \
  'j["failed_requests"] == j["connection_failures"] and j["connection_error"] != ""' '1.9 < j["duration_s"] < 3.5' \
  < "$work/out"
grep -q "^bench: [0-9]* s, 0 requests, .*, 0 errors, [0-9]* connection failures" "$work/err" \
  || { echo "FAILED: no connection failures in the progress line"; cat "$work/err"; exit 1; }

# The server comes up while the run goes on: the load resumes (the channel reconnects at least
# once a second, the callers' back-off is capped at 1 s), and only the attempts before it
# count as connection failures.
late_port=$(free_port)
"$client" bench --target "127.0.0.1:$late_port" --duration 12 --warmup 0 --concurrency 4 --lengths fixed:16 --quiet \
  > "$work/late.json" 2> "$work/late.err" &
bench_pid=$!
pids+=("$bench_pid")
sleep 1.5
"$bin/relserve" --grpc-address "127.0.0.1:$late_port" --http-address -1 --metrics-port -1 --warmup false \
  --model "embedder=$work/embedder" > /dev/null 2> "$work/late-server.log" &
pids+=("$!")
wait "$bench_pid" || { echo "FAILED: bench exited $?"; cat "$work/late.err"; exit 1; }
check_json 'j["requests"] > 0 and j["errors"] == {}' '1 <= j["connection_failures"] <= 100' < "$work/late.json"
echo "relserve-client bench: passed"
