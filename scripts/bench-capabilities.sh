#!/usr/bin/env bash
# The capabilities benchmark of docs/PERFORMANCE.md: zero-shot classification with 10 labels, an
# 8k-token document embedded whole, and SPLADE's sparse output against the same model's dense
# one, each against a baseline doing the same model work another way, alternating A B A B
# (scripts/bench_capabilities.py). Models (random weights, real sizes) are created under
# $MODELS on first use: an NLI DeBERTa-v3-small (hidden 768, 6 layers; 3 labels named
# contradiction, neutral, entailment), a DeBERTa-v3-xsmall embedder (hidden 384, 12 layers) with
# the bundled SentencePiece tokenizer, and a BERT-base BertForMaskedLM (SPLADE's backbone and head,
# vocabulary 30522). THREADS compute threads (default: the CPUs); ROUNDS pairs (default 5).
#   scripts/bench-capabilities.sh          (after scripts/build.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
BIN="$BUILD_DIR/bin"
MODELS=${MODELS:-$BUILD_DIR/bench-models}
ROUNDS=${ROUNDS:-5}
spm=tests/data/reference/tokenizer/spm.model
[ -f "$MODELS/nli-deberta-v3-small/config.json" ] || "$BIN/relserve-model" create --family deberta-v3 --hidden 768 \
  --layers 6 --heads 12 --intermediate 3072 --vocab-file "$spm" --labels 3 --out "$MODELS/nli-deberta-v3-small" \
  --config '{"id2label": {"0": "contradiction", "1": "neutral", "2": "entailment"}, "label2id": {"contradiction": 0, "entailment": 2, "neutral": 1}}'
[ -f "$MODELS/deberta-v3-xsmall-spm/config.json" ] || "$BIN/relserve-model" create --family deberta-v3 --hidden 384 \
  --layers 12 --heads 6 --intermediate 1536 --vocab-file "$spm" --out "$MODELS/deberta-v3-xsmall-spm"
[ -f "$MODELS/splade-bert-base/config.json" ] || "$BIN/relserve-model" create --family bert --hidden 768 --layers 12 \
  --heads 12 --intermediate 3072 --vocab 30522 --out "$MODELS/splade-bert-base" \
  --config '{"architectures": ["BertForMaskedLM"]}'
log=$(mktemp)
"$BIN/relserve" --model "nli=$MODELS/nli-deberta-v3-small" --model "embedder=$MODELS/deberta-v3-xsmall-spm" \
  --model "splade=$MODELS/splade-bert-base" --grpc-address 127.0.0.1:0 --http-address 127.0.0.1:0 --metrics-port -1 \
  ${THREADS:+--threads-per-worker $THREADS} --warmup false > /dev/null 2> "$log" &
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
/usr/bin/python3 scripts/bench_capabilities.py "http://127.0.0.1:$port" "$ROUNDS"
