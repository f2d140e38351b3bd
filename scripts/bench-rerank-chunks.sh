#!/usr/bin/env bash
# Chunked rerank against the same windows sent by hand: one relserve process serving a
# cross-encoder (a small DeBERTa-v3: hidden 128, 2 layers, 2 heads, intermediate 512, random
# weights, one label, the reference SentencePiece vocabulary, max length 512: a small model, so
# that whatever the chunking costs beyond the model shows), DOCS documents of about DOC_TOKENS tokens each and one query.
#   chunked: POST /v2/rerank {"chunk_documents": true}: the server cuts each document into
#            windows of the query + a run of the document and scores each document by its best;
#   by hand: the client cuts the same runs itself (from /tokenize's offsets) and sends every
#            window as a document of one POST /v1/rerank without chunking, then takes the best
#            score per document itself.
# Each side runs REPEAT times after one warm-up, alternating; prints the median and the tokens
# each side computed (both from `usage`), and appends one JSON line to OUT.
#   scripts/bench-rerank-chunks.sh              (after scripts/build.sh)
#   DOCS=4 DOC_TOKENS=600 REPEAT=2 scripts/bench-rerank-chunks.sh    (a short check)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
BIN="$BUILD_DIR/bin"
MODELS=${MODELS:-$BUILD_DIR/bench-models}
MODEL=${MODEL:-$MODELS/deberta-v3-tiny-reranker}
OUT=${OUT:-bench-rerank-chunks.jsonl}
DOCS=${DOCS:-20}
DOC_TOKENS=${DOC_TOKENS:-2000}
REPEAT=${REPEAT:-5}
HTTP_PORT=${HTTP_PORT:-8162}
GRPC_PORT=${GRPC_PORT:-50162}

for b in relserve relserve-model; do
  [ -x "$BIN/$b" ] || { echo "bench-rerank-chunks: $BIN/$b not found; run scripts/build.sh" >&2; exit 2; }
done
[ -f "$MODEL/config.json" ] || "$BIN/relserve-model" create --family deberta-v3 --hidden 128 --layers 2 --heads 2 \
  --intermediate 512 --labels 1 --vocab-file tests/data/reference/tokenizer/spm.model --out "$MODEL" > /dev/null

log="$OUT.server.log"
"$BIN/relserve" --model "reranker=$MODEL" --grpc-address "127.0.0.1:$GRPC_PORT" \
  --http-address "127.0.0.1:$HTTP_PORT" --metrics-port -1 --max-inputs-per-request 1024 \
  --max-windows-per-request 4096 --max-chunks-per-doc 100 --http-request-timeout 0 ${SERVER_FLAGS:-} > "$log" 2>&1 &
pid=$!
trap 'kill -TERM $pid 2> /dev/null || true' EXIT
for _ in $(seq 1 240); do
  grep -q "serving" "$log" && break
  kill -0 "$pid" 2> /dev/null || { cat "$log" >&2; exit 1; }
  sleep 0.5
done

python3 - "$HTTP_PORT" "$DOCS" "$DOC_TOKENS" "$REPEAT" "$OUT" <<'PY'
import json, statistics, sys, time, random
import requests
port, docs, doc_tokens, repeat, out = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
url = f"http://127.0.0.1:{port}"
words = ["token", "relative", "attention", "model", "server", "window", "query", "document", "score", "batch"]
rng = random.Random(7)
def tokens(text):
    r = requests.post(f"{url}/tokenize", json={"inputs": text, "add_special_tokens": False})
    r.raise_for_status()
    return r.json()[0]
query = "which window of this long report talks about relative attention?"
documents = []
for d in range(docs):
    text = " ".join(rng.choice(words) + str(rng.randrange(100)) for _ in range(doc_tokens // 3))
    while len(tokens(text)) < doc_tokens:
        text += " " + " ".join(rng.choice(words) + str(rng.randrange(100)) for _ in range(doc_tokens // 10))
    documents.append(text[:tokens(text)[doc_tokens - 1]["stop"]])  # exactly its first doc_tokens tokens
info = requests.get(f"{url}/info").json()
max_length = info["max_input_length"]
q = len(tokens(query))
room = max_length - 3 - q  # [CLS] query [SEP] run [SEP]
# The runs the server makes, cut by hand from the byte offsets: runs of `room` tokens, no overlap.
windows, owner = [], []
for i, text in enumerate(documents):
    t = tokens(text)
    for start in range(0, len(t), room):
        run = t[start:start + room]
        windows.append(text[run[0]["start"]:run[-1]["stop"]])
        owner.append(i)
def chunked():
    r = requests.post(f"{url}/v2/rerank", json={"model": "reranker", "query": query, "documents": documents,
                                                 "chunk_documents": True, "max_tokens_per_doc": 1 << 20})
    r.raise_for_status()
    j = r.json()
    return {h["index"]: h["relevance_score"] for h in j["results"]}, j["meta"]["tokens"]["input_tokens"], \
        sum(h["windows"] for h in j["results"])
def by_hand():
    r = requests.post(f"{url}/v1/rerank", json={"model": "reranker", "query": query, "documents": windows})
    r.raise_for_status()
    j = r.json()
    best = {}
    for h in j["results"]:
        i = owner[h["index"]]
        best[i] = max(best.get(i, -1.0), h["relevance_score"])
    return best, j["usage"]["total_tokens"], len(windows)
times = {"chunked": [], "by_hand": []}
results = {}
for rnd in range(repeat + 1):
    for name, fn in (("chunked", chunked), ("by_hand", by_hand)):
        t0 = time.perf_counter()
        results[name] = fn()
        if rnd > 0:
            times[name].append(time.perf_counter() - t0)
(cs, ct, cw), (hs, ht, hw) = results["chunked"], results["by_hand"]
worst = max(abs(cs[i] - hs[i]) for i in cs)
line = {"docs": docs, "doc_tokens": [len(tokens(t)) for t in documents][:3], "max_length": max_length, "windows": [cw, hw],
        "tokens": [ct, ht], "median_s": [statistics.median(times["chunked"]), statistics.median(times["by_hand"])],
        "all_s": times, "largest_score_difference": worst}
print(f"{docs} documents of {doc_tokens} tokens, windows of {max_length}: chunked {cw} windows, {ct} tokens, "
      f"median {line['median_s'][0]:.3f} s; by hand {hw} windows, {ht} tokens, median {line['median_s'][1]:.3f} s; "
      f"ratio {line['median_s'][0] / line['median_s'][1]:.3f}; largest score difference {worst:.2e}")
with open(out, "a") as f:
    f.write(json.dumps(line) + "\n")
PY
