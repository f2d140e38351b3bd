#!/usr/bin/env bash
# The engine benchmark of docs/PERFORMANCE.md: DeBERTa-v3-base- and T5-base-sized models made
# by relserve-model create, tokens/s at several batch x length shapes in float32 and bfloat16,
# each against this machine's matmul throughput measured in the same run, and the distance of
# bfloat16 from float32. Writes JSON lines to ${OUT:-bench-engine.jsonl}.
#   scripts/bench-engine.sh            (after scripts/build.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
BIN="$BUILD_DIR/bin/relserve-model"
MODELS=${MODELS:-$BUILD_DIR/bench-models}
OUT=${OUT:-bench-engine.jsonl}
THREADS=${THREADS:-$(nproc)}
ITERS=${ITERS:-5}
: > "$OUT"
[ -f "$MODELS/deberta-v3-base/config.json" ] || "$BIN" create --family deberta-v3 --vocab 128100 --labels 3 --out "$MODELS/deberta-v3-base"
[ -f "$MODELS/t5-base/config.json" ] || "$BIN" create --family t5 --vocab 32128 --out "$MODELS/t5-base"
for model in deberta-v3-base t5-base; do
  for dtype in float32 bfloat16; do
    for shape in 1x128 8x128 32x128 8x512; do
      b=${shape%x*}; l=${shape#*x}
      iters=$ITERS; [ "$b" = 1 ] && iters=$((ITERS * 4))
      line=$("$BIN" bench --model "$MODELS/$model" --batch "$b" --seq "$l" --iters "$iters" --warmup 1 \
             --dtype "$dtype" --threads "$THREADS")
      echo "{\"model\":\"$model\",${line#\{}" | tee -a "$OUT"
    done
  done
  "$BIN" accuracy --model "$MODELS/$model" --dtype bfloat16 --batch 16 --seq 128 --threads "$THREADS" \
    | sed "s/^{/{\"model\":\"$model\",\"accuracy\":true,/" | tee -a "$OUT"
done
# The process settings (server/util/process_tuning.h) side by side: as shipped (the buffer
# cache), glibc's heap keeping every freed block (RELSERVE_ALLOCATOR=heap, the setting before
# the cache), and libgomp's default (spin-then-sleep) waits with glibc's and LibTorch's
# allocators (baseline).
for shape in 1x128 32x128; do
  b=${shape%x*}; l=${shape#*x}
  for setting in tuned heap baseline; do
    envs=(RELSERVE_SETTING=tuned)
    [ "$setting" = heap ] && envs=(RELSERVE_ALLOCATOR=heap)
    [ "$setting" = baseline ] && envs=(RELSERVE_NO_REEXEC=1 RELSERVE_ALLOCATOR=system)
    line=$(env "${envs[@]}" "$BIN" bench --model "$MODELS/deberta-v3-base" --batch "$b" --seq "$l" \
           --iters "$ITERS" --warmup 1 --threads "$THREADS")
    echo "{\"model\":\"deberta-v3-base\",\"process\":\"$setting\",${line#\{}" | tee -a "$OUT"
  done
done
