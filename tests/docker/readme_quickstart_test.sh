#!/usr/bin/env bash
# The README's Docker quick start, run as written: the first ```sh block of its "## Docker"
# section, read from README.md itself, runs in the repository's root under bash -e with only
# what a user's shell would differ in set from outside: HOME (the models land in a temporary
# ~/relserve-models) and the three ports (GRPC_PORT, HTTP_PORT, METRICS_PORT, which the block
# reads with its defaults; free ports here). It must install and start the engine (no-ops where
# they are there), build the image (Docker's layer cache: the CTest fixture docker_image_build
# built it), make the model, start the container, wait for it, and print an embedding over gRPC
# and over HTTP that agree; then the container and its volumes are gone.
# Runs where RELSERVE_DOCKER_TESTS is `required` (scripts/test.sh, hence CI; a failure there when
# no engine answers) or `build`; skipped otherwise, as the block rebuilds the image.
#   readme_quickstart_test.sh SOURCE_DIR
set -Eeuo pipefail
trap 'echo "FAILED: line $LINENO of $(basename "$0"): $BASH_COMMAND"' ERR
root="$(cd "$1" && pwd)"
. "$(dirname "$0")/docker_env.sh"
case "${RELSERVE_DOCKER_TESTS:-}" in
  required|build) ;;
  *) echo "SKIP: the quick start builds the image: only with RELSERVE_DOCKER_TESTS=build or required (scripts/test.sh)"; exit 77 ;;
esac
require_docker_engine
py=/usr/bin/python3

# The block's container is named relserve: a container of that name that is not ours stays.
if docker container inspect relserve > /dev/null 2>&1; then
  echo "FAILED: a container named relserve exists already; the quick start would collide with it"; exit 1
fi
work="$(mktemp -d)"
volumes=""
cleanup() {
  if docker container inspect relserve > /dev/null 2>&1; then
    docker logs relserve > "$work/left.log" 2>&1 || true
    docker rm -f -v relserve > /dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# The block, from the README as it is.
$py - "$root/README.md" "$work/quickstart.sh" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
section = re.search(r"^## Docker\n(.*?)(?=^## )", text, re.M | re.S)
assert section, "README.md has no '## Docker' section"
block = re.search(r"```sh\n(.*?)```", section.group(1), re.S)
assert block, "README.md's Docker section has no sh block"
open(sys.argv[2], "w").write(block.group(1))
PY
echo "--- the README's block:"; cat "$work/quickstart.sh"; echo "---"

free_port() {
  $py -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
mkdir -p "$work/home"
start=$(date +%s)
set +e
(cd "$root" && HOME="$work/home" GRPC_PORT=$(free_port) HTTP_PORT=$(free_port) METRICS_PORT=$(free_port) \
  bash -eo pipefail "$work/quickstart.sh") > "$work/out.txt" 2> "$work/err.txt"
code=$?
set -e
echo "--- its output ($(( $(date +%s) - start )) s, exit $code):"; tail -c 3000 "$work/out.txt"
echo "--- its standard error (end):"; tail -20 "$work/err.txt"
[ "$code" = 0 ] || { echo "FAILED: the README's Docker quick start exited $code"; exit 1; }

# Its output: "ok" from the readiness loop, then the gRPC and the HTTP embedding, which agree.
$py - "$work/out.txt" <<'PY'
import json, sys
lines = open(sys.argv[1]).read().replace("ok{", "ok\n{").splitlines()
assert any(l.strip().startswith("ok") for l in lines), "no 'ok' from /healthz in the output"
grpc = http = None
for l in lines:
    l = l.strip()
    if not l.startswith("{"):
        continue
    # curl's answer has no newline after it: what the next command prints may follow on its line.
    o, _ = json.JSONDecoder().raw_decode(l)
    if "embeddings" in o:
        grpc = o["embeddings"][0]["values"]
    elif "data" in o:
        http = o["data"][0]["embedding"]
assert grpc is not None, "no gRPC embedding (relserve-client) in the output"
assert http is not None, "no HTTP embedding (/v1/embeddings) in the output"
assert len(grpc) == len(http) == 256, (len(grpc), len(http))
diff = max(abs(a - b) for a, b in zip(grpc, http))
assert diff < 1e-4, "gRPC and HTTP embeddings differ by %g" % diff
print("quick start: a 256-dimensional embedding over gRPC and HTTP (max |diff| %.2g)" % diff)
PY

# The block's last line removed the container, and with it its volumes.
if docker container inspect relserve > /dev/null 2>&1; then
  echo "FAILED: the quick start left its container behind"; exit 1
fi
echo "readme quick start test: passed"
