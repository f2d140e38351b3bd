#!/usr/bin/env bash
# The memory soak of docs/PERFORMANCE.md: relserve under a closed-loop load for DURATION
# seconds (lengths log-uniform in [8, 512] tokens by default, enough concurrency to keep every
# worker busy), its resident size (VmRSS of /proc/PID/status) sampled every INTERVAL seconds.
# Writes "seconds rss_mib metric_mib" lines to ${OUT:-soak.tsv} (0 = after start-up and warm-up,
# before the load; metric_mib is the server's own process_resident_memory_bytes from /metrics),
# the bench report to $OUT.bench.json and the server's log to $OUT.log.
#   scripts/soak.sh                                        (after scripts/build.sh)
#   DURATION=300 SERVER_ENV="RELSERVE_MALLOC_DEFAULTS=0" scripts/soak.sh   (another setting)
# SERVER_ENV: environment of the server (e.g. RELSERVE_MALLOC=reuse-all); SERVER_FLAGS: extra
# relserve flags; LENGTHS: the bench --lengths spec; CONCURRENCY: closed-loop callers;
# DTYPE: float32 (default) or bfloat16; MODEL: a model directory (default: the serving
# benchmark's DeBERTa-v3-xsmall-sized model, made on first use).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
BIN="$BUILD_DIR/bin"
MODELS=${MODELS:-$BUILD_DIR/bench-models}
OUT=${OUT:-soak.tsv}
DURATION=${DURATION:-1200}
INTERVAL=${INTERVAL:-15}
CONCURRENCY=${CONCURRENCY:-64}
LENGTHS=${LENGTHS:-log-uniform:8:512}
DTYPE=${DTYPE:-float32}
GRPC_PORT=${GRPC_PORT:-50161}
METRICS_PORT=${METRICS_PORT:-9261}
MODEL=${MODEL:-$MODELS/deberta-v3-xsmall}
if [ ! -f "$MODEL/config.json" ]; then
  # DeBERTa-v3-xsmall sizes: hidden 384, 12 layers, 6 heads, intermediate 1536.
  "$BIN/relserve-model" create --family deberta-v3 --hidden 384 --layers 12 --heads 6 \
    --intermediate 1536 --vocab 128100 --out "$MODEL" > /dev/null
fi

env ${SERVER_ENV:-} "$BIN/relserve" --model "soak=$MODEL" --grpc-address "127.0.0.1:$GRPC_PORT" --http-address -1 \
  --metrics-port "$METRICS_PORT" --metrics-address 127.0.0.1 --dtype "$DTYPE" ${SERVER_FLAGS:-} \
  > "$OUT.log" 2>&1 &
pid=$!
trap 'kill -TERM "$pid" 2> /dev/null || true' EXIT
for _ in $(seq 1 600); do
  grep -q "serving" "$OUT.log" && break
  kill -0 "$pid" 2> /dev/null || { echo "relserve exited:" >&2; cat "$OUT.log" >&2; exit 1; }
  sleep 0.5
done
rss_mib() { awk '/^VmRSS:/ { printf "%.0f", $2 / 1024 }' "/proc/$pid/status"; }
metric_mib() {
  curl -sf "http://127.0.0.1:$METRICS_PORT/metrics" \
    | awk '$1 == "process_resident_memory_bytes" { printf "%.0f", $2 / 1048576 }'
}

echo "# relserve ${SERVER_ENV:-} ${SERVER_FLAGS:-} --dtype $DTYPE; bench --concurrency $CONCURRENCY --lengths $LENGTHS" \
  | tee "$OUT"
echo "0 $(rss_mib) $(metric_mib)" | tee -a "$OUT"
"$BIN/relserve-client" bench --target "127.0.0.1:$GRPC_PORT" --metrics-port "$METRICS_PORT" \
  --concurrency "$CONCURRENCY" --duration "$DURATION" --warmup 0 --lengths "$LENGTHS" --vocab 128100 \
  --deadline-ms 120000 --quiet > "$OUT.bench.json" &
bench=$!
start=$(date +%s)
while kill -0 "$bench" 2> /dev/null; do
  sleep "$INTERVAL"
  kill -0 "$bench" 2> /dev/null || break
  echo "$(($(date +%s) - start)) $(rss_mib) $(metric_mib)" | tee -a "$OUT"
done
wait "$bench"
echo "# peak VmHWM $(awk '/^VmHWM:/ { printf "%.0f", $2 / 1024 }' "/proc/$pid/status") MiB" | tee -a "$OUT"
cat "$OUT.bench.json"
kill -TERM "$pid"
wait "$pid" || true
trap - EXIT
