#!/usr/bin/env bash
# The HTTP API called by real clients over loopback: curl (the README's examples) and Python's
# requests (http_requests_test.py), against a relserve started as users start it; the
# embeddings equal the gRPC API's (relserve-client) and the offline engine's (relserve-model).
# Arguments: the bin directory and the source root.
bin="$1"; root="$2"
source "$root/tests/client/client_test_lib.sh"

make_model embedder --sentence-transformers
make_model reranker --labels 1
start_server server.log --model "embedder=$work/embedder" --model "reranker=$work/reranker" --metrics-port -1
http_port=$(sed -n 's/.*HTTP on port \([0-9]*\).*/\1/p' "$work/server.log")
[ -n "$http_port" ] || { echo "FAILED: no 'HTTP on port' in the log"; cat "$work/server.log"; exit 1; }
url="http://127.0.0.1:$http_port"

# curl: the README's examples, status and shape.
curl -sS -f "$url/health" -o /dev/null
curl -sS -f "$url/embed" -H 'Content-Type: application/json' -d '{"inputs": ["What is relserve?"]}' \
  | check_json 'len(j) == 1 and len(j[0]) == 32' 'abs(math.hypot(*j[0]) - 1) < 1e-4'
curl -sS -f "$url/v1/embeddings" -H 'Content-Type: application/json' \
  -d '{"model": "embedder", "input": "What is relserve?"}' \
  | check_json 'j["object"] == "list" and j["model"] == "embedder"' 'j["data"][0]["index"] == 0' \
               'len(j["data"][0]["embedding"]) == 32' 'j["usage"]["prompt_tokens"] == j["usage"]["total_tokens"] > 0'
curl -sS -f "$url/v1/rerank" -H 'Content-Type: application/json' \
  -d '{"model": "reranker", "query": "what is relserve?", "documents": ["a model server", "soup"], "top_n": 1}' \
  | check_json 'len(j["results"]) == 1' '0 <= j["results"][0]["relevance_score"] <= 1'
code=$(curl -sS -o "$work/err.json" -w '%{http_code}' "$url/embed" -d '{"inputs": [}')
[ "$code" = 400 ] || { echo "FAILED: malformed JSON answered $code"; exit 1; }
check_json 'j["error_type"] == "Validation"' '"not valid JSON" in j["error"]' < "$work/err.json"
code=$(curl -sS -o "$work/err.json" -w '%{http_code}' "$url/v1/embeddings" -d '{"input": "x", "model": "nope"}')
[ "$code" = 404 ] || { echo "FAILED: unknown model answered $code"; exit 1; }
check_json 'j["error"]["param"] == "model"' 'j["error"]["type"] == "not_found_error"' < "$work/err.json"

# The same text over gRPC and offline.
text="What is relserve?"
"$bin/relserve-client" embed --target "127.0.0.1:$grpc_port" --model embedder --normalize "$text" > "$work/grpc.json"
echo "$text" | "$bin/relserve-model" embed --model "$work/embedder" > "$work/offline.json"

# Python requests: every route.
/usr/bin/python3 "$root/tests/http_api/http_requests_test.py" "$url" "$work/grpc.json" "$work/offline.json"

stop_server "$server_pid"
echo "OK"
