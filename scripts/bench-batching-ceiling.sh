#!/usr/bin/env bash
# The most that batching can gain on this machine for the serving benchmark's workload, measured
# on the engine alone (no server, no padding, no queueing): for each sequence length L, the
# engine's tokens/s with one sequence per batch and with a full batch (min(64, 16384 / L)
# sequences, the server's default limits). The workload's lengths are log-uniform in [8, 512],
# so its tokens are spread evenly over L; the script integrates the time per token over L for
# both and prints the ratio: the throughput gain that perfect batching would give.
# It also prints the engine's tokens/s over the whole workload with full batches
# (workload_full_tps): what a server serving that workload could deliver at most, the yardstick
# of the server's own tokens/s. DEVICE=cuda runs it on a GPU, MODEL names another model directory,
# EXTRA adds relserve-model bench options (--cuda-graph-tokens 0, --max-length 2048).
#   DTYPE=bfloat16 scripts/bench-batching-ceiling.sh      (after scripts/build.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
BIN="$BUILD_DIR/bin"
MODELS=${MODELS:-$BUILD_DIR/bench-models}
DTYPE=${DTYPE:-float32}
DEVICE=${DEVICE:-cpu}
LENGTHS=${LENGTHS:-"8 16 32 64 96 128 192 256 384 512"}
MAX_BATCH_TOKENS=${MAX_BATCH_TOKENS:-16384}
MAX_BATCH_SIZE=${MAX_BATCH_SIZE:-64}
MODEL=${MODEL:-$MODELS/deberta-v3-xsmall}
[ -f "$MODEL/config.json" ] || "$BIN/relserve-model" create --family deberta-v3 --hidden 384 --layers 12 --heads 6 \
  --intermediate 1536 --vocab 128100 --out "$MODEL" > /dev/null
rows=()
for len in $LENGTHS; do
  full=$(( MAX_BATCH_TOKENS / len )); [ "$full" -gt "$MAX_BATCH_SIZE" ] && full=$MAX_BATCH_SIZE
  for batch in 1 "$full"; do
    # About 2 s of work per measurement (at least 3 iterations).
    iters=$(( 2 * 4096 / (batch * len) )); [ "$iters" -lt 3 ] && iters=3
    line=$("$BIN/relserve-model" bench --model "$MODEL" --dtype "$DTYPE" --device "$DEVICE" --seq "$len" \
           --batch "$batch" --iters "$iters" --warmup 1 --no-gemm ${EXTRA:-})
    rows+=("$line")
    echo "$line" >&2
  done
done
printf '%s\n' "${rows[@]}" | /usr/bin/python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin if l.strip()]
by = {}
for r in rows:
    by.setdefault(r["seq"], {})[r["batch"]] = r["tokens_per_second"]
lengths = sorted(by)
single = {L: by[L][1] for L in lengths}
full = {L: max(v for b, v in by[L].items()) for L in lengths}
def integral(tps):  # trapezoid over L of seconds per token
    return sum((lengths[i+1]-lengths[i]) * (1/tps[lengths[i]] + 1/tps[lengths[i+1]]) / 2
               for i in range(len(lengths)-1))
out = {"dtype": rows[0]["dtype"], "device": rows[0].get("device", "cpu"), "threads": rows[0]["threads"],
       "per_length": [{"seq": L, "single_tps": round(single[L]), "full_tps": round(full[L]),
                       "gain": round(full[L]/single[L], 2)} for L in lengths],
       "workload_gain_ceiling": round(integral(single) / integral(full), 3),
       # Lengths spread evenly over the tokens of the workload: tokens per second of the whole.
       "workload_full_tps": round((lengths[-1] - lengths[0]) / integral(full)),
       "workload_single_tps": round((lengths[-1] - lengths[0]) / integral(single))}
print(json.dumps(out))
'
