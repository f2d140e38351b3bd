#!/usr/bin/env bash
# The serving benchmark of docs/PERFORMANCE.md: relserve under a closed-loop mixed-length
# workload (lengths log-uniform in [8, 512] tokens, one sequence per request) at several
# concurrency levels, with three batching configurations side by side in one run:
# length-bucketed (the default), first-come (--batching fifo) and one sequence per batch
# (--max-batch-size 1). DTYPE=bfloat16 runs the model in bfloat16. Writes JSON lines to ${OUT:-bench-serving.jsonl}.
# SERVER_FLAGS adds relserve flags to every configuration; SERVER_WRAPPER runs the server under a
# command (a profiler: its pid, memory and CPU are then the wrapper's). RATES="10 20 ..." runs an open loop
# instead (relserve-client bench --rate R: Poisson arrivals, up to 1024 in flight) at each
# offered rate, for latency at a given load. ALLOCATORS="cache heap" runs every configuration once
# per RELSERVE_ALLOCATOR value (server/util/process_tuning.h), in that order, for a side-by-side
# comparison (repeat values, "cache heap cache heap", to alternate them on a noisy machine).
# server_rss_mib is the server's resident size after each point, server_cpu_s the CPU time
# (user + system) it spent during the point, warm-up included. MODEL names another model
# directory, DEVICE=cuda serves it on a GPU. METRICS_DIR keeps the server's /metrics after each
# point there (<batching>-<concurrency>.prom; -2, -3, ... added for a point repeated), and adds the mean forward time per batch, queue
# time per sequence and batch size of the point (from the histograms' sums and counts) to its
# line, and the mean time per batch of each stage of the model call (stage_prepare_ms,
# stage_forward_ms, stage_results_ms: relserve_batch_stage_duration_seconds): where a batch's
# time goes. With the simulated device (MODEL=simulated:h100-deberta-v3-base, see the README's
# --model) each line also has utilisation: the simulated device's busy time over the point's
# wall time (relserve_simulated_device_busy_seconds_total), and device_share: the server's
# tokens/s over the device's saturated rate (its largest batches back to back; /info's
# simulated_saturated_tokens_per_second). VOCAB (default 128100) is the largest token id + 1
# the client sends, WARMUP (default 3) its seconds before each point, LABEL a word put in each line,
# PORT and METRICS_PORT the server's gRPC and metrics ports (default 50151, 9251).
#   scripts/bench-serving.sh          (after scripts/build.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
BIN="$BUILD_DIR/bin"
MODELS=${MODELS:-$BUILD_DIR/bench-models}
OUT=${OUT:-bench-serving.jsonl}
DURATION=${DURATION:-15}
LEVELS=${LEVELS:-"1 8 32 64"}
SETTINGS=${SETTINGS:-"bucketed fifo single"}
DTYPE=${DTYPE:-float32}
DEVICE=${DEVICE:-cpu}
MODEL=${MODEL:-$MODELS/deberta-v3-xsmall}
# DeBERTa-v3-xsmall sizes: hidden 384, 12 layers, 6 heads, intermediate 1536.
[[ "$MODEL" == simulated:* ]] || [ -f "$MODEL/config.json" ] || "$BIN/relserve-model" create --family deberta-v3 --hidden 384 --layers 12 --heads 6 \
  --intermediate 1536 --vocab 128100 --out "$MODEL"
: > "$OUT"
port=${PORT:-50151}; mport=${METRICS_PORT:-9251}
# scrape FILE: the server's /metrics into FILE (no curl needed: HTTP/1.0 over bash's /dev/tcp).
scrape() {
  { exec 3<>"/dev/tcp/127.0.0.1/$mport" && printf 'GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3 &&
    cat <&3 > "$1"; exec 3<&-; } 2> /dev/null || : > "$1"
}
# metric FILE NAME: the sum of a metric's series (every label), empty when it has none.
metric() { awk -v n="$2" 'index($1, n) == 1 && substr($1, length(n) + 1, 1) ~ /^({|)$/ { s += $2; f = 1 }
                          END { if (f) print s }' "$1"; }
sim=$(mktemp -d)
for run in $(for a in ${ALLOCATORS:-default}; do for s in $SETTINGS; do echo "$s/$a"; done; done); do
  setting=${run%/*}; allocator=${run#*/}
  envs=()
  [ "$allocator" != default ] && envs=(RELSERVE_ALLOCATOR="$allocator")
  flags=(--batching bucketed)
  [ "$setting" = fifo ] && flags=(--batching fifo)
  [ "$setting" = single ] && flags=(--max-batch-size 1)
  env "${envs[@]}" ${SERVER_WRAPPER:-} "$BIN/relserve" --model "xsmall=$MODEL" --grpc-address "127.0.0.1:$port" --http-address -1 --metrics-port "$mport" \
    --metrics-address 127.0.0.1 --dtype "$DTYPE" --device "$DEVICE" "${flags[@]}" ${SERVER_FLAGS:-} > "$OUT.$setting.log" 2>&1 &
  pid=$!
  trap 'kill -TERM "$pid" 2> /dev/null || true' EXIT
  # Ready when it logs "serving" (READY_WAIT_S, default 60 s: a GPU warms every batch shape up).
  started=$(date +%s.%N)
  for _ in $(seq 1 $(( ${READY_WAIT_S:-60} * 2 ))); do grep -q "serving" "$OUT.$setting.log" && break; sleep 0.5; done
  ready_s=$(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  if [ -n "${RATES:-}" ]; then points=($RATES); else points=($LEVELS); fi
  last_prom=""
  for c in "${points[@]}"; do
    if [ -n "${RATES:-}" ]; then load=(--rate "$c" --concurrency 1024); else load=(--concurrency "$c"); fi
    cpu0=$(awk '{ print $14 + $15 }' "/proc/$pid/stat")
    scrape "$sim/before.prom"; wall0=$(date +%s.%N)
    line=$("$BIN/relserve-client" bench --target "127.0.0.1:$port" --metrics-port "$mport" "${load[@]}" \
           --duration "$DURATION" --warmup "${WARMUP:-3}" --lengths log-uniform:8:512 --vocab "${VOCAB:-128100}" --deadline-ms 60000 \
           --quiet)
    wall1=$(date +%s.%N); scrape "$sim/after.prom"
    client_line=$line
    busy0=$(metric "$sim/before.prom" relserve_simulated_device_busy_seconds_total)
    busy1=$(metric "$sim/after.prom" relserve_simulated_device_busy_seconds_total)
    if [ -n "$busy0" ] && [ -n "$busy1" ]; then
      # utilisation over the client's whole run (its warm-up is at the same load);
      # device_share: the measured tokens/s over the simulated device's saturated rate.
      saturated=$(metric "$sim/after.prom" relserve_simulated_device_saturated_tokens_per_second)
      tps=$(echo "$line" | sed -n 's/.*"tokens_per_second":\([0-9.]*\).*/\1/p')
      extra=$(awk -v b0="$busy0" -v b1="$busy1" -v w0="$wall0" -v w1="$wall1" -v sat="${saturated:-0}" -v tps="${tps:-0}" \
        'BEGIN { printf "\"utilisation\":%.4f,\"device_share\":%.4f,", (b1 - b0) / (w1 - w0), (sat > 0 ? tps / sat : 0) }')
      line="{$extra${line#\{}"
    fi
    [ -n "$line" ] && line="{\"ready_s\":$ready_s,${line#\{}"
    [ -n "$line" ] && [ -n "${LABEL:-}" ] && line="{\"label\":\"$LABEL\",${line#\{}"
    if [ -n "${METRICS_DIR:-}" ]; then
      mkdir -p "$METRICS_DIR"
      prom="$METRICS_DIR/$setting-$c.prom"
      # A point repeated (LEVELS="128 128 128", or a setting again under ALLOCATORS) keeps each
      # scrape: -2, -3, ...
      n=2
      while [[ " ${seen_proms:-} " == *" $prom "* ]]; do prom="$METRICS_DIR/$setting-$c-$n.prom"; n=$((n + 1)); done
      seen_proms="${seen_proms:-} $prom"
      # No curl needed: HTTP/1.0 over bash's /dev/tcp.
      { exec 3<>"/dev/tcp/127.0.0.1/$mport" && printf 'GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3 &&
        cat <&3 > "$prom"; exec 3<&-; } || true
      # This point's share: the sums and counts less those of the setting's previous point.
      means=$(awk -v prev="${last_prom:-/dev/null}" '
        function add(sign) {
          if ($1 ~ /^relserve_inference_duration_seconds_sum/) fs += sign * $2
          if ($1 ~ /^relserve_inference_duration_seconds_count/) fc += sign * $2
          if ($1 ~ /^relserve_queue_duration_seconds_sum/) qs += sign * $2
          if ($1 ~ /^relserve_queue_duration_seconds_count/) qc += sign * $2
          if ($1 ~ /^relserve_batch_size_sum/) bs += sign * $2
          if ($1 ~ /^relserve_batch_size_count/) bc += sign * $2
          if ($1 ~ /^relserve_batch_stage_duration_seconds_sum/) {
            st = $1; sub(/.*stage="/, "", st); sub(/".*/, "", st); ss[st] += sign * $2
          }
          if ($1 ~ /^relserve_batch_stage_duration_seconds_count/) {
            st = $1; sub(/.*stage="/, "", st); sub(/".*/, "", st); sc[st] += sign * $2
          }
        }
        BEGIN { while ((getline < prev) > 0) add(-1) }
        { add(1) }
        END { printf "\"forward_ms_per_batch\":%.3f,\"queue_ms_per_sequence\":%.3f,\"sequences_per_batch\":%.2f,",
              fc ? 1000 * fs / fc : 0, qc ? 1000 * qs / qc : 0, bc ? bs / bc : 0
              n = split("prepare forward results", names, " ")
              for (i = 1; i <= n; ++i) printf "\"stage_%s_ms\":%.3f,", names[i], sc[names[i]] ? 1000 * ss[names[i]] / sc[names[i]] : 0 }' "$prom")
      last_prom=$prom
      line="{$means${line#\{}"
    fi
    rss=$(awk '/^VmRSS:/ { printf "%.0f", $2 / 1024 }' "/proc/$pid/status")
    cpu=$(awk -v c0="$cpu0" -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15 - c0) / hz }' "/proc/$pid/stat")
    [ -n "$client_line" ] || { echo "bench-serving: no result at concurrency $c (the client failed; $OUT.$setting.log)" >&2; continue; }
    echo "{\"batching\":\"$setting\",\"device\":\"$DEVICE\",\"dtype\":\"$DTYPE\",\"allocator\":\"$allocator\",\"server_rss_mib\":$rss,\"server_cpu_s\":$cpu,${line#\{}" | tee -a "$OUT"
  done
  kill -TERM "$pid"; wait "$pid" || true
done
rm -rf "$sim"
