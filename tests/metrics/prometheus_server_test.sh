#!/usr/bin/env bash
# The real Prometheus server (Debian's `prometheus`) scrapes a running relserve on loopback; the
# test then reads relserve's request counter back through Prometheus's HTTP query API and checks
# it counts exactly the calls made, before and after a second round of calls.
#   prometheus_server_test.sh BIN_DIR SOURCE_DIR
set -euo pipefail
bin="$1"; root="$2"
command -v prometheus > /dev/null || { echo "SKIP: no prometheus server installed"; exit 77; }
py=/usr/bin/python3
work="$(mktemp -d)"
server_pid=""; prom_pid=""
cleanup() {
  [ -n "$prom_pid" ] && kill -KILL "$prom_pid" 2>/dev/null
  [ -n "$server_pid" ] && kill -KILL "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

spm="$root/tests/data/reference/tokenizer/spm.model"
"$bin/relserve-model" create --family deberta-v3 --hidden 32 --layers 2 --heads 4 --intermediate 64 \
  --vocab-file "$spm" --sentence-transformers --out "$work/embedder" > /dev/null
: > "$work/server.log"
"$bin/relserve" --model "embedder=$work/embedder" --grpc-address 127.0.0.1:0 --http-address 127.0.0.1:0 \
  --metrics-address 127.0.0.1 --metrics-port 0 --warmup false > /dev/null 2> "$work/server.log" &
server_pid=$!
grpc_port=""; metrics_port=""
for _ in $(seq 1 600); do
  grpc_port=$(sed -n 's/.*serving .* on port \([0-9]*\), metrics on port.*/\1/p' "$work/server.log")
  metrics_port=$(sed -n 's/.*metrics on port \([0-9]*\).*/\1/p' "$work/server.log")
  [ -n "$grpc_port" ] && [ -n "$metrics_port" ] && break
  kill -0 "$server_pid" || { cat "$work/server.log"; exit 1; }
  sleep 0.1
done
[ -n "$metrics_port" ] || { echo "relserve did not start"; cat "$work/server.log"; exit 1; }

prom_port=$($py -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat > "$work/prometheus.yml" <<CONFIG
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: relserve
    static_configs:
      - targets: ["127.0.0.1:$metrics_port"]
CONFIG
promtool check config "$work/prometheus.yml" > /dev/null
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
  --web.listen-address="127.0.0.1:$prom_port" > "$work/prometheus.log" 2>&1 &
prom_pid=$!

# Calls through the Python example: exactly one successful Embed on model "embedder" per run.
"$root/client/python/generate.sh" "$work/gen" > /dev/null
call_server() {
  PYTHONPATH="$work/gen" $py "$root/client/python/relserve_example.py" --target "127.0.0.1:$grpc_port" > /dev/null
}

# Waits until a PromQL query returns the expected single value (or fails after 60 s).
expect_query() {
  local query="$1" want="$2"
  $py - "$prom_port" "$query" "$want" <<'PY'
import json, sys, time, urllib.parse, urllib.request
port, query, want = sys.argv[1], sys.argv[2], float(sys.argv[3])
url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": query})
last = None
for _ in range(600):
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            body = json.load(r)
        result = body["data"]["result"]
        last = result
        if body["status"] == "success" and len(result) == 1 and float(result[0]["value"][1]) == want:
            print(f"prometheus: {query} = {want:g}")
            sys.exit(0)
    except Exception as e:  # Prometheus still starting
        last = repr(e)
    time.sleep(0.1)
print(f"FAIL: {query}: wanted {want:g}, last answer {last}")
sys.exit(1)
PY
}

expect_query 'up{job="relserve"}' 1
call_server
expect_query 'sum(relserve_requests_total{job="relserve",model="embedder",rpc="Embed",code="OK"})' 1
# The example's call naming an unserved model is counted under model="unknown".
expect_query 'sum(relserve_requests_total{job="relserve",model="unknown",rpc="Embed",code="NOT_FOUND"})' 1
call_server
call_server
expect_query 'sum(relserve_requests_total{job="relserve",model="embedder",rpc="Embed",code="OK"})' 3
expect_query 'sum(relserve_requests_total{job="relserve",model="unknown",rpc="Embed",code="NOT_FOUND"})' 3
expect_query 'relserve_model_serving{job="relserve",model="embedder"}' 1
kill -TERM "$prom_pid"; wait "$prom_pid" || true; prom_pid=""
kill -TERM "$server_pid"; wait "$server_pid"; server_pid=""
echo "prometheus server test: passed"
