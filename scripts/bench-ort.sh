#!/usr/bin/env bash
# ONNX Runtime as the anchor beside relserve, on the same weights: base-sized DeBERTa-v3 and T5
# encoders made by relserve-model create (random weights, real sizes), exported to ONNX with
# transformers 4.40.2's own modeling code (scripts/ort/export_onnx.py: torch.onnx.export, opset 14,
# float32, dynamic batch and sequence; the backbone DebertaV2Model / T5EncoderModel, output
# last_hidden_state: the DeBERTa-v3-base directory is a 3-label classifier, its pooler and
# classifier are left out of the ONNX file) and run by npm's onnxruntime-node (CPU provider,
# graphOptimizationLevel 'all', intraOpNumThreads=THREADS, interOp 1; scripts/ort/run_ort.mjs).
# For each model x shape (SHAPES, batch x length, random token ids, full attention mask) x relserve
# dtype (DTYPES; ORT always runs float32), it alternates the two, ORT then relserve-model bench
# (--no-gemm), PAIRS times, each run a separate process with 1 warm-up batch and ITERS timed ones,
# and writes one JSON line per case to ${OUT:-bench-ort.jsonl}: the per-pair median ms per batch of
# both, the per-pair ratio relserve tokens/s / ORT tokens/s (= ORT ms / relserve ms; above 1:
# relserve is faster) and the medians over the pairs, with the export's parity (max |ORT -
# transformers| on a 2 x 300 batch, checked before every run).
# Run it on an otherwise idle machine: ORT's intra-op threads spin while they wait, so other load on
# the cores slows ORT far more than relserve (seen here: ORT 2-3x slower on t5-base 1x128 while other
# processes ran, relserve unchanged); ORT_SPIN=0 turns the spinning off
# (session.intra_op.allow_spinning 0).
# Not measured: ORT's own int8 (dynamic quantization is onnxruntime's Python quantizer, which needs
# the pip package onnxruntime; only Debian and npm are reachable here), so int8 compares relserve's
# --dtype int8 against ORT float32.
# Needs: Debian's python3-torch 1.13 and python3-onnx (apt-get install -y --no-install-recommends
# python3-torch python3-onnx python3-numpy python3-packaging python3-filelock python3-regex
# python3-tqdm python3-yaml python3-requests python3-sentencepiece), Node 18+ with npm (the script
# installs scripts/ort/package.json's onnxruntime-node into build/ort-node with --ignore-scripts), and
# for the first export only, TRANSFORMERS_SRC: a checkout of huggingface/transformers at tag v4.40.2.
# Without one, ORT_MODELING=plain (the default when TRANSFORMERS_SRC is unset) exports the same
# backbones from scripts/ort/plain_modeling.py (transformers 4.40.2's operations in plain PyTorch),
# after checking that code against transformers' own answers in tests/data/reference (within 1e-4,
# every export); each line's export_modeling says which code made the ONNX file.
#   git clone --branch v4.40.2 --depth 1 https://github.com/huggingface/transformers /tmp/transformers-v4.40.2
#   TRANSFORMERS_SRC=/tmp/transformers-v4.40.2 scripts/bench-ort.sh      (after scripts/build.sh)
#   PAIRS=1 SHAPES=1x128 DTYPES=float32 ORT_MODELS=t5-base scripts/bench-ort.sh     (a quick look)
# A full default run (2 models x 3 shapes x 3 dtypes x 3 pairs, 108 runs) takes about 45 minutes on 2
# cores, most of it in 8x512 (about 12 s a batch for either model); the first export about a minute more.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
BIN="$BUILD_DIR/bin/relserve-model"
MODELS=${MODELS:-$BUILD_DIR/bench-models}
ONNX_DIR=${ONNX_DIR:-$BUILD_DIR/ort}
export ORT_NODE_DIR=${ORT_NODE_DIR:-$BUILD_DIR/ort-node}
OUT=${OUT:-bench-ort.jsonl}
THREADS=${THREADS:-2}
PAIRS=${PAIRS:-3}
SHAPES=${SHAPES:-"1x128 8x128 8x512"}
DTYPES=${DTYPES:-"float32 bfloat16 int8"}
ORT_MODELS=${ORT_MODELS:-"deberta-v3-base t5-base"}
ITERS=${ITERS:-}                        # timed batches per run; default: about 2048 tokens, at least 3
export ORT_SPIN=${ORT_SPIN:-1}          # 0: ORT's intra-op threads do not spin while waiting
PYTHON=${PYTHON:-/usr/bin/python3}      # Debian's python3 (python3-torch), not a pyenv one
if [ -n "${TRANSFORMERS_SRC:-}" ]; then ORT_MODELING=${ORT_MODELING:-transformers}; else ORT_MODELING=${ORT_MODELING:-plain}; fi

[ -x "$BIN" ] || { echo "bench-ort.sh: $BIN not found: run scripts/build.sh first" >&2; exit 2; }
command -v node > /dev/null || { echo "bench-ort.sh: node (and npm) needed" >&2; exit 2; }

# onnxruntime-node, at the version scripts/ort/package.json pins.
pinned=$("$PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))["dependencies"]["onnxruntime-node"])' \
  scripts/ort/package.json)
installed=$("$PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))["version"])' \
  "$ORT_NODE_DIR/node_modules/onnxruntime-node/package.json" 2> /dev/null || true)
if [ "$installed" != "$pinned" ]; then
  echo "installing onnxruntime-node $pinned into $ORT_NODE_DIR" >&2
  mkdir -p "$ORT_NODE_DIR"
  cp scripts/ort/package.json "$ORT_NODE_DIR/package.json"
  (cd "$ORT_NODE_DIR" && npm install --ignore-scripts --no-audit --no-fund --loglevel=error >&2)
fi

make_model() {  # name -> creates $MODELS/name with relserve-model create unless it exists
  [ -f "$MODELS/$1/config.json" ] && return
  case $1 in
    deberta-v3-base) "$BIN" create --family deberta-v3 --vocab 128100 --labels 3 --out "$MODELS/$1" > /dev/null ;;
    t5-base) "$BIN" create --family t5 --vocab 32128 --out "$MODELS/$1" > /dev/null ;;
    *) echo "bench-ort.sh: no $MODELS/$1 and no recipe to create it" >&2; exit 2 ;;
  esac
}

mkdir -p "$ONNX_DIR"
declare -A PARITY
for model in $ORT_MODELS; do
  make_model "$model"
  onnx="$ONNX_DIR/$model.$ORT_MODELING.onnx"
  if [ ! -s "$onnx" ] || [ "$MODELS/$model/model.safetensors" -nt "$onnx" ] || [ scripts/ort/export_onnx.py -nt "$onnx" ] ||
     [ scripts/ort/plain_modeling.py -nt "$onnx" ]; then
    echo "exporting $MODELS/$model to $onnx" >&2
    "$PYTHON" -c 'import torch, onnx' 2> /dev/null || {
      echo "bench-ort.sh: $PYTHON lacks torch or onnx: apt-get install -y --no-install-recommends python3-torch python3-onnx python3-numpy python3-packaging python3-filelock python3-regex python3-tqdm python3-yaml python3-requests python3-sentencepiece" >&2
      exit 2
    }
    rm -f "$onnx"
    checks=()
    [ "$ORT_MODELING" = plain ] && checks=(--check-reference tests/data/reference/deberta_v3_like tests/data/reference/t5_v1_0)
    THREADS=$THREADS "$PYTHON" scripts/ort/export_onnx.py --modeling "$ORT_MODELING" "${checks[@]}" \
      --model "$MODELS/$model" --out "$onnx.tmp" >&2
    mv "$onnx.tmp.check.json" "$onnx.check.json"
    mv "$onnx.tmp" "$onnx"
  fi
  # Parity of the exported graph with transformers, every time (a few seconds).
  check=$(node scripts/ort/run_ort.mjs --onnx "$onnx" --check "$onnx.check.json" --threads "$THREADS") || {
    echo "bench-ort.sh: $onnx does not match transformers: $check" >&2; exit 1; }
  echo "parity $model: $check" >&2
  PARITY[$model]=$check
done

: > "$OUT"
for model in $ORT_MODELS; do
  onnx="$ONNX_DIR/$model.$ORT_MODELING.onnx"
  vocab=$("$PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))["vocab_size"])' "$MODELS/$model/config.json")
  for shape in $SHAPES; do
    batch=${shape%x*}; len=${shape#*x}
    iters=${ITERS:-$(( (2048 + batch * len - 1) / (batch * len) ))}; [ "$iters" -lt 3 ] && iters=3
    for dtype in $DTYPES; do
      runs=()
      for pair in $(seq "$PAIRS"); do
        ort=$(node scripts/ort/run_ort.mjs --onnx "$onnx" --batch "$batch" --seq "$len" --iters "$iters" --warmup 1 \
              --threads "$THREADS" --vocab "$vocab")
        rel=$("$BIN" bench --model "$MODELS/$model" --batch "$batch" --seq "$len" --iters "$iters" --warmup 1 \
              --dtype "$dtype" --threads "$THREADS" --no-gemm)
        runs+=("$ort" "$rel")
        echo "$model $shape $dtype pair $pair: ort $(echo "$ort" | "$PYTHON" -c 'import json,sys; print(round(json.load(sys.stdin)["ms_per_batch_median"], 1))') ms," \
             "relserve $(echo "$rel" | "$PYTHON" -c 'import json,sys; print(round(json.load(sys.stdin)["ms_per_batch_median"], 1))') ms" >&2
      done
      printf '%s\n' "${runs[@]}" | "$PYTHON" -c '
import json, statistics, sys
model, shape, dtype, threads, onnx, parity, modeling = sys.argv[1:8]
lines = [json.loads(l) for l in sys.stdin if l.strip()]
ort, rel = lines[0::2], lines[1::2]
tokens = ort[0]["batch"] * ort[0]["seq"]
ort_ms = [r["ms_per_batch_median"] for r in ort]
rel_ms = [r["ms_per_batch_median"] for r in rel]
ratio = [o / r for o, r in zip(ort_ms, rel_ms)]  # relserve tokens/s over ORT tokens/s, pair by pair
parity = json.loads(parity)
med = statistics.median
print(json.dumps({
    "model": model, "shape": shape, "batch": ort[0]["batch"], "seq": ort[0]["seq"], "dtype": dtype,
    "ort_dtype": "float32", "threads": int(threads), "iters": ort[0]["iters"], "pairs": len(ratio),
    "ort_ms_median": round(med(ort_ms), 3), "relserve_ms_median": round(med(rel_ms), 3),
    "ort_tokens_per_second": round(tokens / med(ort_ms) * 1000, 1),
    "relserve_tokens_per_second": round(tokens / med(rel_ms) * 1000, 1),
    "ratio_median": round(med(ratio), 3),
    "ort_ms": [round(x, 3) for x in ort_ms], "relserve_ms": [round(x, 3) for x in rel_ms],
    "ratio": [round(x, 3) for x in ratio],
    "onnxruntime_node": ort[0]["onnxruntime_node"], "ort_spinning": ort[0]["spinning"], "onnx": onnx, "onnx_outputs": "last_hidden_state",
    "export_max_abs_diff": parity.get("last_hidden_state_max_abs_diff"), "export_modeling": modeling,
    "relserve_openblas_kernels": rel[0].get("openblas_kernels"),
}))' "$model" "$shape" "$dtype" "$THREADS" "$onnx" "${PARITY[$model]}" "$ORT_MODELING" | tee -a "$OUT"
    done
  done
done
