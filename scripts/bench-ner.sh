#!/usr/bin/env bash
# The token-classification benchmark of docs/PERFORMANCE.md: named entities for a batch of texts
# (POST /token-classification, simple and first) against the same texts' plain forward (POST
# /embed on the same model: the same tokens through the same encoder, pooled instead of
# classified per token), alternating A B A B (scripts/bench_ner.py). The model (random weights,
# DeBERTa-v3-small sizes: hidden 768, 6 layers, 12 heads; DebertaV2ForTokenClassification with
# CoNLL's 9 labels; the bundled SentencePiece tokenizer) is created under $MODELS on first use.
# THREADS compute threads (default: the CPUs); ROUNDS pairs (default 5).
#   scripts/bench-ner.sh          (after scripts/build.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
BIN="$BUILD_DIR/bin"
MODELS=${MODELS:-$BUILD_DIR/bench-models}
ROUNDS=${ROUNDS:-5}
spm=tests/data/reference/tokenizer/spm.model
labels='{"0": "O", "1": "B-PER", "2": "I-PER", "3": "B-ORG", "4": "I-ORG", "5": "B-LOC", "6": "I-LOC", "7": "B-MISC", "8": "I-MISC"}'
[ -f "$MODELS/ner-deberta-v3-small/config.json" ] || "$BIN/relserve-model" create --family deberta-v3 --hidden 768 \
  --layers 6 --heads 12 --intermediate 3072 --vocab-file "$spm" --out "$MODELS/ner-deberta-v3-small" \
  --config "{\"architectures\": [\"DebertaV2ForTokenClassification\"], \"id2label\": $labels}"
log=$(mktemp)
"$BIN/relserve" --model "ner=$MODELS/ner-deberta-v3-small" --grpc-address 127.0.0.1:0 --http-address 127.0.0.1:0 \
  --metrics-port -1 ${THREADS:+--threads-per-worker $THREADS} --warmup false > /dev/null 2> "$log" &
pid=$!
trap 'kill $pid 2> /dev/null; wait $pid 2> /dev/null; rm -f "$log"' EXIT
port=""
for _ in $(seq 1 240); do
  port=$(sed -n 's/.*HTTP on port \([0-9]*\).*/\1/p' "$log")
  [ -n "$port" ] && break
  kill -0 $pid 2> /dev/null || { cat "$log"; exit 1; }
  sleep 0.5
done
[ -n "$port" ] || { echo "relserve did not start:"; cat "$log"; exit 1; }
echo "# $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); $(grep -m1 'CPUs' "$log" | sed 's/.*INFO //')"
/usr/bin/python3 scripts/bench_ner.py "http://127.0.0.1:$port" "$ROUNDS"
