#!/usr/bin/env bash
# The images' HEALTHCHECK script (scripts/docker-healthcheck.sh, relserve-healthcheck in the
# image), run on the host against a real relserve started the ways a container can be: it must
# follow the server's own flags and RELSERVE_ variables (read from its /proc entries, not from
# the probe's environment), probe the metrics port's /healthz, else the HTTP API's /health, else
# gRPC health, stay healthy with TLS on gRPC (both HTTP ports are plain), and turn unhealthy
# when the server is gone. Needs no Docker.
#   healthcheck_test.sh BIN_DIR SOURCE_DIR
set -Eeuo pipefail
trap 'echo "FAILED: line $LINENO of $(basename "$0"): $BASH_COMMAND"' ERR
bin="$(cd "$1" && pwd)"; root="$2"
check="$root/scripts/docker-healthcheck.sh"
if [ ! -x "$bin/relserve" ] || [ ! -x "$bin/relserve-model" ]; then echo "SKIP: relserve is not built in $bin"; exit 77; fi
command -v openssl > /dev/null || { echo "SKIP: openssl is missing"; exit 77; }

work="$(mktemp -d)"
server=""
cleanup() {
  [ -z "$server" ] || kill "$server" 2> /dev/null || true
  [ -z "$server" ] || wait "$server" 2> /dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

"$bin/relserve-model" create --family deberta-v3 --hidden 32 --layers 2 --heads 4 --intermediate 64 \
  --vocab-file "$root/tests/data/reference/tokenizer/spm.model" --out "$work/model" > /dev/null
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost -keyout "$work/key.pem" \
  -out "$work/cert.pem" > /dev/null 2>&1

free_ports() {
  /usr/bin/python3 - "$1" <<'PY'
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
}

# The probe as Docker runs it, but with an empty environment (PATH aside): what it finds out
# comes from the server's process.
probe() {
  env -i PATH="$bin:/usr/bin:/bin" bash "$check" "${1:-$server}"
}

# start ENV... -- FLAGS...: relserve with those variables and flags, in the background.
start() {
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  env -i PATH=/usr/bin:/bin OMP_WAIT_POLICY=PASSIVE "${envs[@]}" "$bin/relserve" --warmup false \
    --threads-per-worker 1 --workers-per-device 1 "$@" > "$work/server.log" 2>&1 &
  server=$!
}

stop() {
  kill "$server"
  wait "$server" || true
  stopped="$server" server=""
}

# expect_healthy PATTERN: the probe turns healthy within 60 s and says it probed PATTERN.
expect_healthy() {
  local out=""
  for _ in $(seq 1 300); do
    if out=$(probe); then
      [[ "$out" == *"$1"* ]] || { echo "FAILED: healthy, but probed '$out', expected '$1'"; exit 1; }
      echo "  $out"
      return 0
    fi
    kill -0 "$server" 2> /dev/null || { echo "FAILED: relserve exited:"; cat "$work/server.log"; exit 1; }
    sleep 0.2
  done
  echo "FAILED: never healthy; last probe: $out"; tail -20 "$work/server.log"; exit 1
}

read -r grpc http metrics other <<< "$(free_ports 4)"
model="default=$work/model"

echo "1. everything from RELSERVE_ variables (as the image's ENV defaults are)"
start RELSERVE_MODEL="$model" RELSERVE_GRPC_ADDRESS="127.0.0.1:$grpc" RELSERVE_HTTP_ADDRESS="127.0.0.1:$http" \
  RELSERVE_METRICS_ADDRESS=127.0.0.1 RELSERVE_METRICS_PORT="$metrics" --
expect_healthy "GET http://127.0.0.1:$metrics/healthz: HTTP/1.1 200"
stop
# The server is gone: unhealthy, and says so.
if out=$(probe "$stopped" 2>&1); then echo "FAILED: healthy with no server: $out"; exit 1; fi
[[ "$out" == *"is not running"* ]] || { echo "FAILED: the probe does not say the server is gone: $out"; exit 1; }
echo "  after stop: $out"

echo "2. a flag on the command line wins over its variable"
start RELSERVE_MODEL="$model" RELSERVE_METRICS_PORT="$other" RELSERVE_GRPC_ADDRESS="127.0.0.1:$grpc" -- \
  --http-address "127.0.0.1:$http" --metrics-address=127.0.0.1 --offline --metrics-port "$metrics"
expect_healthy "GET http://127.0.0.1:$metrics/healthz"
stop

echo "3. no metrics port: the HTTP API's /health"
start RELSERVE_MODEL="$model" RELSERVE_METRICS_PORT=-1 -- --grpc-address "127.0.0.1:$grpc" \
  --http-address "127.0.0.1:$http"
expect_healthy "GET http://127.0.0.1:$http/health: HTTP/1.1 200"
stop

echo "4. neither HTTP port: gRPC health"
start -- --model "$model" --grpc-address "127.0.0.1:$grpc" --http-address -1 --metrics-port -1
expect_healthy "gRPC health on 127.0.0.1:$grpc"
stop

echo "5. TLS on gRPC: /healthz is plain HTTP and still answers"
start RELSERVE_TLS_CERT="$work/cert.pem" RELSERVE_TLS_KEY="$work/key.pem" -- --model "$model" \
  --grpc-address "127.0.0.1:$grpc" --http-address "127.0.0.1:$http" --metrics-address 127.0.0.1 --metrics-port "$metrics"
expect_healthy "GET http://127.0.0.1:$metrics/healthz: HTTP/1.1 200"
stop

echo "6. TLS on gRPC and no HTTP port: unhealthy, saying why"
start RELSERVE_TLS_CERT="$work/cert.pem" RELSERVE_TLS_KEY="$work/key.pem" RELSERVE_HTTP_ADDRESS= -- \
  --model "$model" --grpc-address "127.0.0.1:$grpc" --metrics-port=-1
sleep 2
if out=$(probe); then echo "FAILED: healthy without a port it can probe: $out"; exit 1; fi
[[ "$out" == *"--tls-cert"* ]] || { echo "FAILED: the probe does not say why: $out"; exit 1; }
echo "  $out"
stop

echo "7. not serving yet (the model still loads): unhealthy"
# A server whose model load stalls is hard to make: this stands in for one, a listener that
# answers 503 as /healthz does during start-up, with its port in its RELSERVE_ variables.
# A port picked now: the one the cases above used may have been taken since by another test.
read -r fake_port <<< "$(free_ports 1)"
env -i PATH=/usr/bin:/bin RELSERVE_METRICS_ADDRESS=127.0.0.1 RELSERVE_METRICS_PORT="$fake_port" \
  /usr/bin/python3 - "$fake_port" > "$work/fake.log" 2>&1 <<'PY' &
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"model default: loading\n"
        self.send_response(503 if self.path == "/healthz" else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
PY
server=$!
# Up to 30 s for the stand-in to listen: under a loaded CI machine (the fuzz tests beside it) its
# Python took more than the 5 s this loop once allowed.
for _ in $(seq 1 300); do
  out=$(probe) && { echo "FAILED: healthy on a 503: $out"; exit 1; }
  [[ "$out" == *503* ]] && break
  sleep 0.1
done
[[ "$out" == *"503"*"model default: loading"* ]] || {
  echo "FAILED: the probe does not report the 503: $out"; cat "$work/fake.log"; exit 1; }
echo "  $out"
stop

echo "healthcheck test: passed"
