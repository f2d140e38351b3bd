#!/usr/bin/env bash
# The HTTP port under the slow-client attack of the HTTP hardening issue: IDLE connections that
# send nothing and SLOW ones that send a request head one byte per second, all from one client,
# while CALLS health checks and CALLS embedding calls (each on a new connection, one at a time)
# must be answered. Prints how many were answered within 1 s and their latency percentiles, and
# the same for the metrics port's /healthz under the same attack.
#   scripts/bench-http-slow-clients.sh          (after scripts/build.sh)
#   IDLE=200 SLOW=100 CALLS=30 scripts/bench-http-slow-clients.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
BIN="$BUILD_DIR/bin"
MODEL=${MODEL:-$BUILD_DIR/bench-models/tiny-deberta}
IDLE=${IDLE:-200}
SLOW=${SLOW:-100}
CALLS=${CALLS:-30}
HTTP_PORT=${HTTP_PORT:-8171}
GRPC_PORT=${GRPC_PORT:-50171}
METRICS_PORT=${METRICS_PORT:-9271}

[ -f "$MODEL/config.json" ] || "$BIN/relserve-model" create --family deberta-v3 --hidden 64 --layers 2 --heads 2 \
  --intermediate 128 --vocab-file models/default/spm.model --out "$MODEL" > /dev/null
log=$(mktemp)
"$BIN/relserve" --model "tiny=$MODEL" --grpc-address "127.0.0.1:$GRPC_PORT" --http-address "127.0.0.1:$HTTP_PORT" \
  --metrics-address 127.0.0.1 --metrics-port "$METRICS_PORT" ${SERVER_FLAGS:-} > "$log" 2>&1 &
pid=$!
trap 'kill -TERM $pid 2> /dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 1 240); do
  grep -q "serving" "$log" && break
  kill -0 "$pid" 2> /dev/null || { cat "$log" >&2; exit 1; }
  sleep 0.5
done

python3 - "$HTTP_PORT" "$METRICS_PORT" "$IDLE" "$SLOW" "$CALLS" <<'PY'
import socket, sys, threading, time
http_port, metrics_port, idle_n, slow_n, calls = map(int, sys.argv[1:])

def call(port, request, timeout=1.0):
    start = time.monotonic()
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        s.settimeout(max(0.01, timeout - (time.monotonic() - start)))
        s.sendall(request)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        s.close()
        ok = data.startswith(b"HTTP/1.1 200")
    except OSError:
        ok = False
    return ok, time.monotonic() - start

def attack(port):
    conns = []
    for _ in range(idle_n):
        conns.append(socket.create_connection(("127.0.0.1", port)))
    slow = []
    for _ in range(slow_n):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"POST /v1/embeddings HTTP/1.1\r\n")
        slow.append(s)
    stop = threading.Event()
    def drip():
        while not stop.is_set():
            for s in slow:
                try:
                    s.send(b"X")
                except OSError:
                    pass
            stop.wait(1.0)
    t = threading.Thread(target=drip)
    t.start()
    return conns + slow, stop, t

def measure(name, port, request):
    held, stop, t = attack(port)
    time.sleep(1.0)
    lat, ok = [], 0
    for _ in range(calls):
        good, seconds = call(port, request)
        ok += good and seconds < 1.0
        lat.append(seconds)
    stop.set(); t.join()
    for s in held:
        s.close()
    lat.sort()
    p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] * 1000
    print(f"| {name} | {ok}/{calls} | {p(0.5):.1f} | {p(0.99):.1f} |")

body = b'{"input": "a short sentence"}'
print(f"{idle_n} idle + {slow_n} slow connections from one client\n")
print("| call | answered within 1 s | p50 ms | p99 ms |")
print("| --- | ---: | ---: | ---: |")
measure("HTTP GET /health", http_port, b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
measure("HTTP POST /v1/embeddings", http_port,
        b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
measure("metrics GET /healthz", metrics_port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
PY
