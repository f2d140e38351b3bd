#!/usr/bin/env bash
# Sets up, builds, and runs the engine on the bundled default model: a small DeBERTa-v3
# sentence-embedding model created with relserve-model (random weights, the bundled
# SentencePiece tokenizer), embedding a few sentences.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
BUILD_DIR=${BUILD_DIR:-build}
model="$BUILD_DIR/default-model"
if [ ! -f "$model/config.json" ]; then
  "$BUILD_DIR/bin/relserve-model" create --family deberta-v3 --hidden 256 --layers 4 --heads 4 \
    --intermediate 1024 --vocab-file models/default/spm.model --sentence-transformers --out "$model"
fi
"$BUILD_DIR/bin/relserve-model" info --model "$model"
printf 'relserve serves relative-attention encoders.\nDeBERTa and T5 encoders, batched by length.\nquery: what is disentangled attention?\tpassage: attention over content and relative position\n' \
  | "$BUILD_DIR/bin/relserve-model" tokenize --model "$model"
printf 'relserve serves relative-attention encoders.\nDeBERTa and T5 encoders, batched by length.\n' \
  | "$BUILD_DIR/bin/relserve-model" embed --model "$model" | cut -c1-160
