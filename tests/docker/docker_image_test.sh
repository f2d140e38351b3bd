#!/usr/bin/env bash
# The Docker image, run for real: a container of relserve:latest (or $RELSERVE_DOCKER_IMAGE)
# serves a model directory mounted read-only at /models/default. Checks that Docker's own
# HEALTHCHECK turns healthy, that an Embed through the published port equals what the engine
# computes offline for the same text, that the HTTP API on its published port gives the same
# embedding, that /metrics answers, that the server runs as the
# unprivileged user, that it sizes its workers by the container's CPU limit, that every binary
# finds its libraries, that `docker stop` drains and exits
# 0, that a missing model directory stops the container with a message naming it, and that
# removing its containers leaves no volume behind.
# Skipped (77) where no Docker daemon answers or the image has not been built
# (scripts/docker-build.sh); a failure instead with RELSERVE_DOCKER_TESTS=required
# (scripts/test.sh, hence CI: tests/docker/docker_env.sh), where the CTest fixture
# docker_image_build has built it.
#   docker_image_test.sh BIN_DIR SOURCE_DIR
set -Eeuo pipefail
trap 'echo "FAILED: line $LINENO of $(basename "$0"): $BASH_COMMAND"' ERR
bin="$1"; root="$2"
image="${RELSERVE_DOCKER_IMAGE:-relserve:latest}"
. "$(dirname "$0")/docker_env.sh"
require_docker_engine
docker image inspect "$image" > /dev/null 2>&1 || docker_unavailable "image $image not built (scripts/docker-build.sh)"

py=/usr/bin/python3
work="$(mktemp -d)"
name="relserve-test-$$"
# Each container goes with its anonymous volumes (the image's /models and /hf-cache): -v.
cleanup() {
  for c in "$name" "$name-bad" "$name-flags"; do
    docker rm -f -v "$c" > /dev/null 2>&1 || true
  done
  rm -rf "$work"
}
trap cleanup EXIT
# The anonymous volumes of a container, by name.
volumes_of() {
  docker inspect --format '{{range .Mounts}}{{if eq .Type "volume"}}{{.Name}} {{end}}{{end}}' "$1"
}

# The model, made on the host, readable by the container's user (uid 10001).
spm="$root/tests/data/reference/tokenizer/spm.model"
"$bin/relserve-model" create --family deberta-v3 --hidden 32 --layers 2 --heads 4 --intermediate 64 \
  --vocab-file "$spm" --sentence-transformers --out "$work/models/default" > /dev/null
chmod -R a+rX "$work/models"

# Every binary and the SentencePiece module find all their shared libraries in the slim stage.
# (docker run's output goes to a file first: its own failure must fail the test, not read as
# "nothing missing".)
docker run --rm --entrypoint sh "$image" -c \
  'for f in /opt/relserve/bin/* /opt/relserve/lib/relserve/*; do ldd "$f" 2>&1 | sed "s|^|$f: |"; done' \
  > "$work/ldd.txt"
grep -q '/opt/relserve/bin/relserve-server: .*libtorch' "$work/ldd.txt" || {
  echo "FAILED: ldd in the image did not list relserve-server's libraries:"; head -20 "$work/ldd.txt"; exit 1; }
if grep 'not found' "$work/ldd.txt"; then echo "FAILED: libraries missing in the image (above)"; exit 1; fi

# A CPU limit of 1.5: relserve must plan for one CPU, not for the host's cores.
docker run -d --name "$name" --cpus 1.5 -p 127.0.0.1::50051 -p 127.0.0.1::8080 -p 127.0.0.1::9090 \
  -v "$work/models:/models:ro" "$image" > /dev/null
grpc_port=$(docker port "$name" 50051/tcp | sed -n '1s/.*://p')
http_port=$(docker port "$name" 8080/tcp | sed -n '1s/.*://p')
metrics_port=$(docker port "$name" 9090/tcp | sed -n '1s/.*://p')
echo "container $name: gRPC on 127.0.0.1:$grpc_port, HTTP on 127.0.0.1:$http_port, metrics on 127.0.0.1:$metrics_port"

# Docker's HEALTHCHECK (relserve-healthcheck inside the container: /healthz on the metrics port) decides.
health=""
for _ in $(seq 1 90); do
  health=$(docker inspect --format '{{.State.Health.Status}}' "$name")
  [ "$health" = healthy ] && break
  [ "$(docker inspect --format '{{.State.Running}}' "$name")" = true ] || break
  sleep 1
done
if [ "$health" != healthy ]; then
  echo "FAILED: container health is '$health'"; docker logs "$name" 2>&1 | tail -30; exit 1
fi
echo "docker health: $health"
# The README's calls: the health check script and the client inside the image.
probe=$(docker exec "$name" relserve-healthcheck)
[[ "$probe" == "healthy: GET http://127.0.0.1:9090/healthz"* ]] || {
  echo "FAILED: relserve-healthcheck in the container: $probe"; exit 1; }
docker exec "$name" relserve-client health --quiet

# The container's answer equals the engine's, computed offline on the host.
text="a container serves this"
"$bin/relserve-client" embed --target "127.0.0.1:$grpc_port" --model default "$text" > "$work/served.json"
echo "$text" | "$bin/relserve-model" embed --model "$work/models/default" > "$work/offline.json"
$py - "$work/served.json" "$work/offline.json" <<'PY'
import json, sys
served = json.load(open(sys.argv[1]))["embeddings"][0]["values"]
offline = json.loads(open(sys.argv[2]).readline())["embedding"]
assert len(served) == len(offline) == 32, (len(served), len(offline))
diff = max(abs(a - b) for a, b in zip(served, offline))
assert diff < 1e-5, "served and offline embeddings differ by %g" % diff
print("embedding matches the offline engine (max |diff| %.2g)" % diff)
PY

# The HTTP API on its published port (OpenAI's route, as the README's curl example calls it):
# the same embedding (the model normalises, so OpenAI's normalisation changes nothing).
$py - "$http_port" "$text" "$work/served.json" <<'PY'
import json, sys, urllib.request
request = urllib.request.Request("http://127.0.0.1:%s/v1/embeddings" % sys.argv[1],
                                 data=json.dumps({"input": sys.argv[2]}).encode(),
                                 headers={"Content-Type": "application/json"})
answer = json.load(urllib.request.urlopen(request, timeout=30))
got = answer["data"][0]["embedding"]
served = json.load(open(sys.argv[3]))["embeddings"][0]["values"]
diff = max(abs(a - b) for a, b in zip(got, served))
assert len(got) == len(served) and diff < 1e-5, "HTTP and gRPC embeddings differ by %g" % diff
print("HTTP /v1/embeddings matches gRPC (max |diff| %.2g)" % diff)
PY

# /metrics on the published metrics port counts the call.
$py - "$metrics_port" <<'PY'
import sys, urllib.request
text = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=5).read().decode()
ok = [l for l in text.splitlines()
      if l.startswith("relserve_requests_total{") and 'rpc="Embed"' in l and 'code="OK"' in l]
assert ok and float(ok[0].rsplit(" ", 1)[1]) >= 1, "no OK Embed counted:\n" + "\n".join(ok)
print("metrics:", ok[0])
PY

# Not root: the server process runs as uid 10001.
uid=$(docker exec "$name" sh -c 'stat -c %u /proc/1')
[ "$uid" = 10001 ] || { echo "FAILED: the server runs as uid $uid"; exit 1; }

# The CPU limit was seen through the container's cgroup.
# (Read into a file first: `grep -q` in a pipe would stop `docker logs` early, and pipefail fails.)
docker logs "$name" > "$work/start.log" 2>&1
grep -q 'INFO 1 CPU (affinity [0-9]*, cgroup quota 1.5): 1 worker x 1 thread per model' "$work/start.log" || {
  echo "FAILED: the CPU limit was not detected:"; head -5 "$work/start.log"; exit 1; }

# `docker stop` sends SIGTERM: the server drains and exits 0 within Docker's stop timeout.
docker stop --time 20 "$name" > /dev/null
code=$(docker inspect --format '{{.State.ExitCode}}' "$name")
[ "$code" = 0 ] || { echo "FAILED: exit code $code after docker stop"; docker logs "$name" 2>&1 | tail -20; exit 1; }
docker logs "$name" > "$work/container.log" 2>&1
grep -qi 'shut' "$work/container.log" || { echo "FAILED: no shutdown in the log:"; cat "$work/container.log"; exit 1; }
# Removed with -v, the container leaves none of its anonymous volumes (/hf-cache) behind.
vols=$(volumes_of "$name")
[ -n "$vols" ] || { echo "FAILED: the container has no anonymous volume (the image's VOLUMEs)"; exit 1; }
docker rm -v "$name" > /dev/null
for v in $vols; do
  if docker volume inspect "$v" > /dev/null 2>&1; then echo "FAILED: volume $v outlived docker rm -v"; exit 1; fi
done

# Flags of the user's own (another metrics port, the model named on the command line) keep the
# image's other defaults, the drain among them, and the health check follows the port.
docker run -d --name "$name-flags" -v "$work/models:/models:ro" "$image" \
  --model other=/models/default --metrics-port 9191 > /dev/null
health=""
for _ in $(seq 1 90); do
  health=$(docker inspect --format '{{.State.Health.Status}}' "$name-flags")
  [ "$health" = healthy ] && break
  [ "$(docker inspect --format '{{.State.Running}}' "$name-flags")" = true ] || break
  sleep 1
done
[ "$health" = healthy ] || { echo "FAILED: with --metrics-port 9191 the health is '$health'"; docker logs "$name-flags" 2>&1 | tail -20; exit 1; }
probe=$(docker exec "$name-flags" relserve-healthcheck)
[[ "$probe" == *":9191/healthz"* ]] || { echo "FAILED: the health check ignores --metrics-port: $probe"; exit 1; }
models=$(docker exec "$name-flags" relserve-client models)
[[ "$models" == *'"other"'* ]] || { echo "FAILED: the command line's model is not served: $models"; exit 1; }
docker stop --time 20 "$name-flags" > /dev/null
docker logs "$name-flags" > "$work/flags.log" 2>&1
grep -q 'draining for up to 8s' "$work/flags.log" || {
  echo "FAILED: the drain is not the image's 8 s with the user's flags:"; cat "$work/flags.log"; exit 1; }
docker rm -v "$name-flags" > /dev/null
echo "user flags: healthy on metrics port 9191, the drain default kept"

# Nothing mounted: the container stops at once, and says which directory is missing.
mkdir -p "$work/empty" && chmod a+rx "$work/empty"
# docker run exits with the container's code; 125-127 would be Docker's own failure to run it.
run_code=0
docker run --name "$name-bad" -v "$work/empty:/models:ro" "$image" > "$work/bad.log" 2>&1 || run_code=$?
case "$run_code" in
  0) echo "FAILED: served with no model"; exit 1 ;;
  125|126|127) echo "FAILED: docker run itself failed ($run_code):"; cat "$work/bad.log"; exit 1 ;;
esac
code=$(docker inspect --format '{{.State.ExitCode}}' "$name-bad")
[ "$code" = "$run_code" ] || { echo "FAILED: docker run exited $run_code, the container $code"; exit 1; }
grep -q '/models/default' "$work/bad.log" || { echo "FAILED: the error does not name /models/default:"; cat "$work/bad.log"; exit 1; }
echo "no model: exit $code, $(grep -m1 '/models/default' "$work/bad.log")"
echo "docker image test: passed"
