#!/usr/bin/env bash
# Two builds of relserve-model side by side in one run, alternating shape by shape on the same
# models: the engine of this checkout against BASELINE, another build's relserve-model (say,
# an earlier commit's, to measure what a change gained). Prints JSON lines with both tokens/s
# and their ratio; writes them to ${OUT:-bench-engine-compare.jsonl}.
#   git worktree add ../relserve-base COMMIT && (cd ../relserve-base && scripts/build.sh)
#   BASELINE=../relserve-base/build/bin/relserve-model scripts/bench-engine-compare.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
BIN="$BUILD_DIR/bin/relserve-model"
BASELINE=${BASELINE:?set BASELINE to the other build\'s relserve-model}
MODELS=${MODELS:-$BUILD_DIR/bench-models}
OUT=${OUT:-bench-engine-compare.jsonl}
DTYPES=${DTYPES:-"bfloat16 float32"}
ITERS=${ITERS:-3}
# DeBERTa-v3-xsmall (the serving benchmark's model) over short to long shapes; base size at two.
CASES=${CASES:-"deberta-v3-xsmall:1x32 deberta-v3-xsmall:1x128 deberta-v3-xsmall:1x512 deberta-v3-xsmall:64x32
deberta-v3-xsmall:64x128 deberta-v3-xsmall:32x512 deberta-v3-base:32x128 deberta-v3-base:8x512 t5-base:32x128 t5-base:8x512"}
[ -f "$MODELS/deberta-v3-xsmall/config.json" ] || "$BIN" create --family deberta-v3 --hidden 384 --layers 12 \
  --heads 6 --intermediate 1536 --vocab 128100 --out "$MODELS/deberta-v3-xsmall" > /dev/null
[ -f "$MODELS/deberta-v3-base/config.json" ] || "$BIN" create --family deberta-v3 --vocab 128100 --labels 3 \
  --out "$MODELS/deberta-v3-base" > /dev/null
[ -f "$MODELS/t5-base/config.json" ] || "$BIN" create --family t5 --vocab 32128 --out "$MODELS/t5-base" > /dev/null
: > "$OUT"
tps() {  # binary model dtype batch length -> tokens/s
  local iters=$ITERS; [ "$4" = 1 ] && iters=$((ITERS * 5))
  "$1" bench --model "$MODELS/$2" --dtype "$3" --batch "$4" --seq "$5" --iters "$iters" --warmup 1 --no-gemm |
    /usr/bin/python3 -c 'import json, sys; print(round(json.load(sys.stdin)["tokens_per_second"], 1))'
}
for dtype in $DTYPES; do
  for c in $CASES; do
    model=${c%%:*}; shape=${c#*:}; b=${shape%x*}; l=${shape#*x}
    base=$(tps "$BASELINE" "$model" "$dtype" "$b" "$l")
    this=$(tps "$BIN" "$model" "$dtype" "$b" "$l")
    ratio=$(/usr/bin/python3 -c "print(round($this / $base, 2))")
    echo "{\"model\":\"$model\",\"dtype\":\"$dtype\",\"batch\":$b,\"seq\":$l,\"baseline_tps\":$base,\"tps\":$this,\"speedup\":$ratio}" | tee -a "$OUT"
  done
done
