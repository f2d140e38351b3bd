#!/usr/bin/env bash
# The two HTTP stacks side by side under the HTTP hardening issue's attacks: the project's
# WebServer (server/http_transport) and cpp-httplib 0.11 (what the API port ran before), each in a small
# server (tests/http_transport/http_stack_bench.cc: 64 handler threads, GET /health, POST /work holding a
# thread 5 ms). For each: health and work calls answered within 1 s while IDLE idle and SLOW
# byte-a-second connections are held; three pipelined requests; a request followed by a
# half-close; Content-Length: -1; and the server's resident memory after a client streams a
# 256 MB chunked body (limit 16 MB on both).
#   scripts/bench-http-stacks.sh          (after scripts/build.sh; ROUNDS=3 alternating rounds)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
BENCH="$BUILD_DIR/bin/http_stack_bench"
IDLE=${IDLE:-200}
SLOW=${SLOW:-100}
CALLS=${CALLS:-30}
PORT=${PORT:-8181}
[ -x "$BENCH" ] || { echo "$BENCH not found; run scripts/build.sh" >&2; exit 2; }

echo "| stack | /health within 1 s | /work within 1 s | pipelined answered | half-close answered | Content-Length: -1 | RSS growth, 256 MB chunked |"
echo "| --- | ---: | ---: | ---: | --- | --- | ---: |"
port=$PORT
for round in $(seq 1 "${ROUNDS:-3}"); do
for stack in ${STACKS:-web httplib}; do
  port=$((port + 1))  # a fresh port for each: the previous one's closed connections linger
  "$BENCH" "$stack" "$port" > /dev/null 2>&1 &
  pid=$!
  sleep 0.5
  python3 - "$stack" "$port" "$pid" "$IDLE" "$SLOW" "$CALLS" <<'PY'
import socket, sys, threading, time
stack, port, pid, idle_n, slow_n, calls = sys.argv[1], *map(int, sys.argv[2:])

def rss_mb():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0

def exchange(data, timeout=1.0, half_close=False):
    start = time.monotonic()
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        s.settimeout(timeout)
        s.sendall(data)
        if half_close:
            s.shutdown(socket.SHUT_WR)
        got = b""
        while True:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            if not chunk:
                break
            got += chunk
            if time.monotonic() - start > timeout:
                break
        s.close()
    except OSError:
        got = b""
    return got, time.monotonic() - start

health = b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
work = b"POST /work HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}"

def connect():
    try:
        return socket.create_connection(("127.0.0.1", port), timeout=2)
    except OSError:
        return None
held = [c for c in (connect() for _ in range(idle_n)) if c is not None]
slow = []
for _ in range(slow_n):
    s = connect()
    if s is None:
        continue
    try:
        s.sendall(b"POST /work HTTP/1.1\r\n")
        slow.append(s)
    except OSError:
        s.close()
stop = threading.Event()
def drip():
    while not stop.is_set():
        for s in slow:
            try:
                s.send(b"X")
            except OSError:
                pass
        stop.wait(1.0)
t = threading.Thread(target=drip); t.start()
time.sleep(1.0)
def answered(request):
    n = 0
    for _ in range(calls):
        got, took = exchange(request, timeout=1.0)
        n += got.startswith(b"HTTP/1.1 200") and took < 1.0
    return n
h = answered(health)
w = answered(work)
stop.set(); t.join()
for s in held + slow:
    s.close()
time.sleep(0.5)

got, _ = exchange(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n" * 2 + health, timeout=2.0)
pipelined = got.count(b"HTTP/1.1 200")
got, _ = exchange(work.replace(b"Connection: close\r\n", b""), timeout=3.0, half_close=True)
half = "yes" if got.startswith(b"HTTP/1.1 200") else "no"
got, took = exchange(b"POST /work HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", timeout=5.0)
neg = (got.split(b"\r\n")[0].decode(errors="replace")[9:12] + f" in {took*1000:.0f} ms") if got else f"no answer in {took:.0f} s"

before = rss_mb()
s = socket.create_connection(("127.0.0.1", port))
s.sendall(b"POST /work HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
chunk = b"%x\r\n" % (1 << 20) + b"a" * (1 << 20) + b"\r\n"
peak = before
try:
    s.settimeout(5)
    for i in range(256):
        s.sendall(chunk)
        peak = max(peak, rss_mb())
    s.sendall(b"0\r\n\r\n")
    s.recv(100)
except OSError:
    pass
time.sleep(0.3)
peak = max(peak, rss_mb())
s.close()
print(f"| {stack} | {h}/{calls} | {w}/{calls} | {pipelined}/3 | {half} | {neg} | {peak - before:.0f} MB |")
PY
  kill -TERM "$pid" 2> /dev/null || true
  wait "$pid" 2> /dev/null || true
done
done
