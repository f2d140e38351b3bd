#!/usr/bin/env bash
# Runs client/python/relserve_example.py (Debian's python3-grpcio) against a real relserve
# serving two small models, and checks what it prints.
set -euo pipefail
bin="$1"; root="$2"
work="$(mktemp -d)"
pid=""
cleanup() { [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
spm="$root/tests/data/reference/tokenizer/spm.model"
"$bin/relserve-model" create --family deberta-v3 --hidden 32 --layers 2 --heads 4 --intermediate 64 \
  --vocab-file "$spm" --sentence-transformers --out "$work/embedder" > /dev/null
"$bin/relserve-model" create --family deberta-v3 --hidden 32 --layers 2 --heads 4 --intermediate 64 \
  --vocab-file "$spm" --labels 1 --out "$work/reranker" > /dev/null
: > "$work/server.log"
"$bin/relserve" --model "embedder=$work/embedder" --model "reranker=$work/reranker" \
  --grpc-address 127.0.0.1:0 --http-address 127.0.0.1:0 --metrics-port -1 --warmup false > /dev/null 2> "$work/server.log" &
pid=$!
port=""
for _ in $(seq 1 600); do
  port=$(sed -n 's/.*serving [0-9]* model(s) on port \([0-9]*\).*/\1/p' "$work/server.log")
  [ -n "$port" ] && break
  kill -0 "$pid" || { cat "$work/server.log"; exit 1; }
  sleep 0.1
done
[ -n "$port" ] || { echo "server did not start"; cat "$work/server.log"; exit 1; }
"$root/client/python/generate.sh" "$work/gen"
out=$(PYTHONPATH="$work/gen" /usr/bin/python3 "$root/client/python/relserve_example.py" --target "127.0.0.1:$port")
echo "$out"
/usr/bin/python3 - "$out" <<'PY'
import json, sys
out = json.loads(sys.argv[1])
assert [m["name"] for m in out["models"]] == ["embedder", "reranker"], out["models"]
assert out["embed"]["dimensions"] == [32, 32], out["embed"]
assert out["embed"]["tokens"] > 4
assert len(out["rerank"]) == 2 and out["rerank"][0]["score"] >= out["rerank"][1]["score"]
assert all(0.0 < r["score"] < 1.0 for r in out["rerank"])
assert out["unknown_model_error"]["code"] == "NOT_FOUND", out
print("python example: 1 passed, 0 failed")
PY
kill -TERM "$pid"; wait "$pid"; pid=""
