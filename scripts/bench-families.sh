#!/usr/bin/env bash
# The families benchmark of docs/PERFORMANCE.md: base-sized models of every family made by
# relserve-model create (BERT with absolute, relative_key and relative_key_query positions,
# XLNet, MPNet, beside DeBERTa-v3 and T5), tokens/s at batch x length shapes in float32 and
# bfloat16, each against this machine's matmul throughput measured in the same process.
# Writes JSON lines to ${OUT:-bench-families.jsonl}.
#   scripts/bench-families.sh            (after scripts/build.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
BIN="$BUILD_DIR/bin/relserve-model"
MODELS=${MODELS:-$BUILD_DIR/bench-models}
OUT=${OUT:-bench-families.jsonl}
THREADS=${THREADS:-$(nproc)}
ITERS=${ITERS:-3}
SHAPES=${SHAPES:-"8x128 8x512"}
DTYPES=${DTYPES:-"float32 bfloat16"}
: > "$OUT"
make() {  # name, create arguments...
  local name=$1; shift
  [ -f "$MODELS/$name/config.json" ] || "$BIN" create "$@" --out "$MODELS/$name" > /dev/null
}
make deberta-v3-base --family deberta-v3 --vocab 128100
make t5-base --family t5 --vocab 32128
make bert-base --family bert --vocab 30522
make bert-base-relative-key --family bert --vocab 30522 --position-embedding-type relative_key
make bert-base-relative-key-query --family bert --vocab 30522 --position-embedding-type relative_key_query
make xlnet-base --family xlnet --vocab 32000
make mpnet-base --family mpnet --vocab 30527
for model in ${FAMILY_MODELS:-bert-base bert-base-relative-key bert-base-relative-key-query xlnet-base mpnet-base deberta-v3-base t5-base}; do
  for dtype in $DTYPES; do
    for shape in $SHAPES; do
      b=${shape%x*}; l=${shape#*x}
      line=$("$BIN" bench --model "$MODELS/$model" --batch "$b" --seq "$l" --iters "$ITERS" --warmup 1 \
             --dtype "$dtype" --threads "$THREADS")
      echo "{\"model\":\"$model\",${line#\{}" | tee -a "$OUT"
    done
  done
done
