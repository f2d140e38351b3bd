#!/usr/bin/env bash
# Sets up, builds, and runs relserve on the bundled default model: a small DeBERTa-v3
# sentence-embedding model created with relserve-model (random weights, the bundled
# SentencePiece tokenizer). Starts the server, calls it with relserve-client (health, the
# model list, an embedding), loads it for a few seconds with `relserve-client bench`, shows a
# few of its metrics, and stops it with SIGTERM.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
BUILD_DIR=${BUILD_DIR:-build}
BIN="$BUILD_DIR/bin"
model="$BUILD_DIR/default-model"
if [ ! -f "$model/config.json" ]; then
  "$BIN/relserve-model" create --family deberta-v3 --hidden 256 --layers 4 --heads 4 \
    --intermediate 1024 --vocab-file models/default/spm.model --sentence-transformers --out "$model"
fi
GRPC_PORT=${GRPC_PORT:-50051}
METRICS_PORT=${METRICS_PORT:-9090}
HTTP_PORT=${HTTP_PORT:-8080}
log="$BUILD_DIR/relserve-demo.log"
"$BIN/relserve" --model "default=$model" --grpc-address "127.0.0.1:$GRPC_PORT" --http-address "127.0.0.1:$HTTP_PORT" \
  --metrics-address 127.0.0.1 --metrics-port "$METRICS_PORT" 2> "$log" &
pid=$!
trap 'kill -TERM $pid 2>/dev/null || true' EXIT
for _ in $(seq 1 120); do grep -q "serving" "$log" && break; kill -0 $pid || { cat "$log"; exit 1; }; sleep 0.5; done
cat "$log"
client=("$BIN/relserve-client" --target "127.0.0.1:$GRPC_PORT")
echo "--- relserve-client health / models / embed"
"${client[@]}" health
"${client[@]}" models
"${client[@]}" embed --normalize --dimensions 4 "relserve serves relative-attention encoders"
echo "--- load: 8 clients for 5 s, sequences of 8 to 512 tokens"
"${client[@]}" bench --metrics-port "$METRICS_PORT" --concurrency 8 --duration 5 --warmup 1 \
  --lengths log-uniform:8:512 --vocab 1000
echo "--- a few of the server's metrics"
exec 3<>"/dev/tcp/127.0.0.1/$METRICS_PORT"
printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3
grep -E '^relserve_(requests_total|tokens_total|batches_total|padded_tokens_total)' <&3 || true
exec 3<&-
kill -TERM $pid
wait $pid
trap - EXIT
tail -3 "$log"
