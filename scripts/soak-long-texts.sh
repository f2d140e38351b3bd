#!/usr/bin/env bash
# Resident memory under long texts (docs/PERFORMANCE.md, "Memory of long texts"): relserve on a
# tiny DeBERTa model, CALLS calls (default 100) of each kind below, one after the other, with the
# server's resident size (VmRSS of /proc/PID/status) after start-up, after each kind, and 10 s
# after the last. Prints "phase rss_mib peak_mib" lines, also written to ${OUT:-soak-long-texts.tsv}.
#   scripts/soak-long-texts.sh                  (after scripts/build.sh)
#   CALLS=20 TEXT_BYTES=4000000 SERVER_FLAGS="--max-message-bytes 16000000" scripts/soak-long-texts.sh
# The kinds, TEXT_BYTES of text each (default 1,000,000; the body limit, --max-message-bytes,
# defaults to 2,000,000):
#   http_embed_cut       POST /embed, truncate true (answered 200)
#   http_embed_refused   POST /embed, truncate false (refused 413)
#   http_tokenize        POST /tokenize (every token: answered, or refused past --max-response-bytes)
#   http_rerank          POST /rerank, the long text as the query beside 64 short documents
#   grpc_embed_cut       Embed over gRPC (relserve-client), truncate true
#   grpc_embed_refused   Embed over gRPC, truncate false
# SERVER_ENV: the server's environment; SERVER_FLAGS: more relserve flags.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
BIN="$BUILD_DIR/bin"
OUT=${OUT:-soak-long-texts.tsv}
CALLS=${CALLS:-100}
TEXT_BYTES=${TEXT_BYTES:-1000000}
HTTP_PORT=${HTTP_PORT:-18461}
GRPC_PORT=${GRPC_PORT:-50461}
work=$(mktemp -d)
trap 'kill -TERM "${pid:-}" 2> /dev/null || true; rm -rf "$work"' EXIT

"$BIN/relserve-model" create --family deberta-v3 --hidden 32 --layers 2 --heads 2 --intermediate 64 \
  --vocab-file models/default/spm.model --out "$work/model" > /dev/null
"$BIN/relserve-model" create --family deberta-v3 --hidden 32 --layers 2 --heads 2 --intermediate 64 --labels 1 \
  --vocab-file models/default/spm.model --out "$work/reranker" > /dev/null
env ${SERVER_ENV:-} "$BIN/relserve" --model "m=$work/model" --model "r=$work/reranker" --grpc-address "127.0.0.1:$GRPC_PORT" \
  --http-address "127.0.0.1:$HTTP_PORT" --metrics-port -1 ${SERVER_FLAGS:-} > "$work/log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do
  curl -sf "http://127.0.0.1:$HTTP_PORT/health" > /dev/null 2>&1 && break
  kill -0 "$pid" 2> /dev/null || { echo "relserve exited:" >&2; cat "$work/log" >&2; exit 1; }
  sleep 0.2
done

# A text of TEXT_BYTES bytes: words of several lengths, as prose has.
python3 - "$TEXT_BYTES" "$work" <<'EOF'
import json, sys
n, work = int(sys.argv[1]), sys.argv[2]
words = ["the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "tokenization", "of", "texts"]
parts, size, i = [], 0, 0
while size < n:
    w = words[i % len(words)] + (", " if i % 13 == 12 else " ")
    parts.append(w); size += len(w); i += 1
text = "".join(parts)[:n]
json.dump({"model": "m", "inputs": text, "truncate": True}, open(f"{work}/embed_cut.json", "w"))
json.dump({"model": "m", "inputs": text, "truncate": False}, open(f"{work}/embed_refused.json", "w"))
json.dump({"model": "m", "inputs": text}, open(f"{work}/tokenize.json", "w"))
json.dump({"model": "r", "query": text, "texts": [f"document {k}" for k in range(64)], "truncate": True},
          open(f"{work}/rerank.json", "w"))
with open(f"{work}/grpc.jsonl", "w") as f:
    f.write(json.dumps({"text": text}) + "\n")
EOF

rss() { awk '/^VmRSS:/ { printf "%.0f", $2 / 1024 }' "/proc/$pid/status"; }
hwm() { awk '/^VmHWM:/ { printf "%.0f", $2 / 1024 }' "/proc/$pid/status"; }
echo "# relserve ${SERVER_ENV:-} ${SERVER_FLAGS:-}; $CALLS calls of $TEXT_BYTES bytes per kind" | tee "$OUT"
echo "start $(rss) $(hwm)" | tee -a "$OUT"
http() {  # path body-file: prints the status
  curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' --data-binary "@$work/$2" \
    "http://127.0.0.1:$HTTP_PORT$1"
}
phase() {  # name, then the command for one call; prints the statuses seen
  local name=$1
  shift
  local codes
  codes=$(for _ in $(seq 1 "$CALLS"); do "$@"; echo; done | sort | uniq -c | awk '{ printf "%s%sx%s", sep, $2, $1; sep = "," }')
  echo "$name $(rss) $(hwm) $codes" | tee -a "$OUT"
}
grpc() {  # truncate flag
  if "$BIN/relserve-client" embed --target "127.0.0.1:$GRPC_PORT" --model m "--truncate=$1" < "$work/grpc.jsonl" \
    > /dev/null 2>&1; then echo -n ok; else echo -n refused; fi
}
phase http_embed_cut http /embed embed_cut.json
phase http_embed_refused http /embed embed_refused.json
phase http_tokenize http /tokenize tokenize.json
phase http_rerank http /rerank rerank.json
phase grpc_embed_cut grpc true
phase grpc_embed_refused grpc false
sleep 10
echo "after_10s $(rss) $(hwm)" | tee -a "$OUT"
