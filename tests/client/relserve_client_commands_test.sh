#!/usr/bin/env bash
# Every relserve-client subcommand against a real relserve serving small models: the JSON
# each prints, the exit codes of RPC errors (1) and usage errors (2), and health.
bin="$1"; root="$2"
source "$(dirname "$0")/client_test_lib.sh"

make_model embedder --sentence-transformers   # mean pooling + Normalize
make_model plain                              # no Normalize module: --normalize matters
make_model reranker --labels 1
make_model classifier --labels 3
make_model nli --labels 3 --config '{"id2label": {"0": "contradiction", "1": "neutral", "2": "entailment"}, "label2id": {"contradiction": 0, "entailment": 2, "neutral": 1}}'
start_server server.log --model "embedder=$work/embedder" --model "plain=$work/plain" \
  --model "reranker=$work/reranker" --model "classifier=$work/classifier" --model "nli=$work/nli" \
  --model "ner=$root/tests/data/ner/ner_bert" --metrics-port -1
c=("$client" --target "127.0.0.1:$grpc_port")

# embed: dimensions, --normalize, --dimensions, tokens.
expect_exit 0 "${c[@]}" embed --model plain "text one" "text two"
check_json 'len(j["embeddings"]) == 2' 'all(len(e["values"]) == 32 for e in j["embeddings"])' \
  'abs(math.hypot(*j["embeddings"][0]["values"]) - 1) > 0.01' 'j["model"] == "plain"' \
  'j["usage"]["sequences"] == 2 and j["usage"]["tokens"] == sum(e["num_tokens"] for e in j["embeddings"])' \
  < "$work/out"
expect_exit 0 "${c[@]}" embed --model plain --normalize --request-id r-7 "text one" "text two"
check_json 'all(abs(math.hypot(*e["values"]) - 1) < 1e-4 for e in j["embeddings"])' 'j["request_id"] == "r-7"' \
  < "$work/out"
expect_exit 0 "${c[@]}" embed --dimensions 8 "text one"
check_json 'len(j["embeddings"][0]["values"]) == 8' 'abs(math.hypot(*j["embeddings"][0]["values"]) - 1) < 1e-4' \
  'j["model"] == "embedder"' < "$work/out"
expect_exit 0 "${c[@]}" embed --ids "1,5,6,2"
check_json 'j["embeddings"][0]["num_tokens"] == 4' < "$work/out"

# JSON lines on standard input, --batch-size lines per request.
printf '%s\n' '{"text": "first"}' '{"tokens": [1, 7, 8, 9, 2]}' '' '{"text": "q", "text_pair": "passage"}' \
  > "$work/lines.jsonl"
expect_exit 0 "${c[@]}" embed --batch-size 2 < "$work/lines.jsonl"
check_json 'len(j) == 2' '[len(r["embeddings"]) for r in j] == [2, 1]' 'j[0]["embeddings"][1]["num_tokens"] == 5' \
  < "$work/out"

# embed-tokens: ids and per-token states.
expect_exit 0 "${c[@]}" embed-tokens --ids "1 5 6 2"
check_json 'j["sequences"][0]["token_ids"] == [1, 5, 6, 2]' 'j["sequences"][0]["hidden_size"] == 32' \
  'len(j["sequences"][0]["values"]) == 4 * 32' < "$work/out"

# tokenize: the same ids as the engine's own tokenizer.
want=$(echo "hello world" | "$bin/relserve-model" tokenize --model "$work/embedder" | \
  /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["input_ids"])')
expect_exit 0 "${c[@]}" tokenize "hello world"
check_json "j['results'][0]['input_ids'] == $want" 'j["results"][0]["pieces"][0] == "[CLS]"' \
  'len(j["results"][0]["offset_begin"]) == len(j["results"][0]["input_ids"])' < "$work/out"
expect_exit 0 "${c[@]}" tokenize --pairs "a question" "an answer"
check_json '1 in j["results"][0]["token_type_ids"]' < "$work/out"

# rerank: best first, every document once, --return-documents, --top-n, standard input.
expect_exit 0 "${c[@]}" rerank --model reranker --query "what is relserve" --return-documents \
  "a server" "a river in spring" "relserve serves encoders"
check_json 'sorted(r["index"] for r in j["results"]) == [0, 1, 2]' \
  'all(a["score"] >= b["score"] for a, b in zip(j["results"], j["results"][1:]))' \
  'all(0 < r["score"] < 1 for r in j["results"])' \
  'all(r["document"] == ["a server", "a river in spring", "relserve serves encoders"][r["index"]] for r in j["results"])' \
  < "$work/out"
expect_exit 0 "${c[@]}" rerank --model reranker --query q --top-n 2 --raw-scores d1 d2 d3
check_json 'len(j["results"]) == 2' 'j["results"][0]["document"] == ""' < "$work/out"
echo '{"query": "q", "documents": ["d1", "d2"]}' | expect_exit 0 "${c[@]}" rerank --model reranker
check_json 'len(j["results"]) == 2' < "$work/out"

# classify: pairs, softmax over three labels, --top-k.
expect_exit 0 "${c[@]}" classify --model classifier --pairs "premise" "hypothesis" "a" "b"
check_json 'len(j["results"]) == 2' 'all(len(r["labels"]) == 3 and len(r["logits"]) == 3 for r in j["results"])' \
  'all(abs(sum(l["score"] for l in r["labels"]) - 1) < 1e-4 for r in j["results"])' \
  'all(a["score"] >= b["score"] for r in j["results"] for a, b in zip(r["labels"], r["labels"][1:]))' \
  < "$work/out"
expect_exit 0 "${c[@]}" classify --model classifier --top-k 1 "one text"
check_json 'len(j["results"][0]["labels"]) == 1' 'j["results"][0]["labels"][0]["label"].startswith("LABEL_")' \
  < "$work/out"

# zero-shot: every label once, best first; single-label scores sum to 1; texts from standard input.
expect_exit 0 "${c[@]}" zero-shot --model nli --labels "sports, politics,food" "the match ended in a draw"
check_json 'j["results"][0]["sequence"] == "the match ended in a draw"' \
  'sorted(l["label"] for l in j["results"][0]["labels"]) == ["food", "politics", "sports"]' \
  'abs(sum(l["score"] for l in j["results"][0]["labels"]) - 1) < 1e-4' \
  'all(a["score"] >= b["score"] for a, b in zip(j["results"][0]["labels"], j["results"][0]["labels"][1:]))' \
  'j["usage"]["sequences"] == 3' < "$work/out"
printf '%s\n' "first text" "second text" | expect_exit 0 "${c[@]}" zero-shot --model nli --labels a,b --multi-label \
  --template "It is about {}."
check_json 'len(j["results"]) == 2' 'all(0 < l["score"] < 1 for r in j["results"] for l in r["labels"])' < "$work/out"
expect_exit 1 "${c[@]}" zero-shot --model classifier --labels a,b "x"
check_json 'j["error"]["code"] == "FAILED_PRECONDITION"' '"entailment" in j["error"]["message"]' < "$work/err"
expect_exit 2 "${c[@]}" zero-shot --model nli "x"
# ner: the pipeline's entities (tests/data/ner/ner_expected.json, transformers' answers) for each
# strategy; the RPC's default is none; a model without the head is FAILED_PRECONDITION.
expected="$root/tests/data/ner/ner_expected.json"
text="Marie Curie worked at the University of Paris with Pierre Curie."
want='[x for t in json.load(open("'"$expected"'"))["models"]["ner_bert"]["texts"] if t["text"] == "'"$text"'" for x in t["expected"]'
expect_exit 0 "${c[@]}" ner --model ner --aggregation-strategy simple "$text"
check_json "[(e['entity'], e['word'], e['start'], e['end']) for e in j['results'][0]] == [(x['entity_group'], x['word'], x['start'], x['end']) for x in $want['simple']]]" \
  "all(abs(e['score'] - x['score']) < 1e-5 for e, x in zip(j['results'][0], $want['simple']]))" \
  'j["model"] == "ner"' < "$work/out"
echo "$text" | expect_exit 0 "${c[@]}" ner --model ner --ignore-labels ""
check_json "[(e['entity'], e['index'], e['word']) for e in j['results'][0] if e['entity'] != 'O'] == [(x['entity'], x['index'], x['word']) for x in $want['none']]]" \
  "len(j['results'][0]) == len(json.load(open('$expected'))['models']['ner_bert']['texts'][0]['input_ids']) - 2" < "$work/out"
expect_exit 0 "${c[@]}" ner --model ner "$text"
check_json "[(e['entity'], e['index'], e['word'], e['start'], e['end']) for e in j['results'][0]] == [(x['entity'], x['index'], x['word'], x['start'], x['end']) for x in $want['none']]]" < "$work/out"
expect_exit 1 "${c[@]}" ner --model plain "x"
check_json 'j["error"]["code"] == "FAILED_PRECONDITION"' '"token-classification head" in j["error"]["message"]' < "$work/err"
expect_exit 2 "${c[@]}" ner --model ner --aggregation-strategy mean "x"
# embed --whole-input: a text longer than the model, in windows.
long=$(printf 'word%d ' $(seq 1 700))
expect_exit 0 "${c[@]}" embed --model plain --whole-input "$long"
check_json 'j["embeddings"][0]["windows"] > 1' 'j["usage"]["tokens"] == j["embeddings"][0]["num_tokens"]' < "$work/out"
expect_exit 1 "${c[@]}" embed --model plain --sparse "x"
check_json 'j["error"]["code"] == "FAILED_PRECONDITION"' < "$work/err"

# models
expect_exit 0 "${c[@]}" models
check_json '[m["name"] for m in j["models"]] == ["embedder", "plain", "reranker", "classifier", "nli", "ner"]' \
  'j["default_model"] == "embedder"' 'j["models"][3]["labels"] == ["LABEL_0", "LABEL_1", "LABEL_2"]' \
  'j["models"][5]["token_labels"][1] == "B-PER"' 'j["models"][5]["labels"] == []' < "$work/out"

# RPC errors: exit 1, the status code name and message on stderr as JSON.
expect_exit 1 "${c[@]}" embed --model nope "x"
check_json 'j["error"]["code"] == "NOT_FOUND"' '"nope" in j["error"]["message"]' < "$work/err"
expect_exit 1 "${c[@]}" classify --model embedder "x"
check_json 'j["error"]["code"] == "FAILED_PRECONDITION"' < "$work/err"
expect_exit 1 "${c[@]}" embed --truncate=false --ids "$(seq -s, 1 600)"
check_json 'j["error"]["code"] == "INVALID_ARGUMENT"' < "$work/err"
# Unsaid, the server's --auto-truncate (true by default, as TEI 1.9's) cuts.
expect_exit 0 "${c[@]}" embed --ids "$(seq -s, 1 600)"
check_json 'j["embeddings"][0]["truncated"] is True' < "$work/out"
expect_exit 0 "${c[@]}" embed --truncate --ids "$(seq -s, 1 600)"
check_json 'j["embeddings"][0]["truncated"] is True' < "$work/out"

# Usage errors: exit 2.
expect_exit 2 "${c[@]}" embed --top-n 1 "x"
check_json 'j["error"]["code"] == "INVALID_ARGUMENT"' '"--top-n" in j["error"]["message"]' < "$work/err"
echo '{"text": ' | expect_exit 2 "${c[@]}" embed
check_json '"line 1" in j["error"]["message"]' < "$work/err"
expect_exit 2 "${c[@]}" frobnicate
# Text that is not UTF-8 is a usage error naming the argument, and nothing is sent.
expect_exit 2 "${c[@]}" embed "fine" $'\xff\xfe'
grep -q 'argument 2: invalid UTF-8 at byte offset 0' "$work/err" || { echo "FAILED: $(cat "$work/err")"; exit 1; }
expect_exit 2 "${c[@]}" rerank --model reranker --query $'\xc3' "doc"
grep -q -- '--query: invalid UTF-8' "$work/err" || { echo "FAILED: $(cat "$work/err")"; exit 1; }
expect_exit 0 "${c[@]}" --help
grep -q "embed-tokens" "$work/out"

# health: overall, per model, unknown service, quiet.
expect_exit 0 "${c[@]}" health
check_json 'j == {"service": "", "status": "SERVING"}' < "$work/out"
expect_exit 0 "${c[@]}" health --service reranker --quiet
expect_no_output
expect_exit 1 "${c[@]}" health --service no-such-model
check_json 'j["error"]["code"] == "NOT_FOUND"' < "$work/err"

# A stopped server: health 1 (quietly and quickly), RPCs UNAVAILABLE.
stop_server "$server_pid"
start=$(date +%s%N)
expect_exit 1 "${c[@]}" health --quiet
expect_no_output
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
[ "$elapsed_ms" -lt 3000 ] || { echo "FAILED: health on a closed port took ${elapsed_ms} ms"; exit 1; }
expect_exit 1 "${c[@]}" models
check_json 'j["error"]["code"] == "UNAVAILABLE"' < "$work/err"

# A server that needs an API key: calls without it fail (exit 1, UNAUTHENTICATED), with
# --api-key or RELSERVE_API_KEY they pass (bench too); health needs none.
start_server keyed.log --model "embedder=$work/embedder" --metrics-port -1 --api-key "client-test-key"
k=("$client" --target "127.0.0.1:$grpc_port")
expect_exit 1 "${k[@]}" models
check_json 'j["error"]["code"] == "UNAUTHENTICATED"' '"missing API key" in j["error"]["message"]' < "$work/err"
expect_exit 1 "${k[@]}" embed --api-key wrong-key "x"
check_json 'j["error"]["code"] == "UNAUTHENTICATED"' 'j["error"]["message"] == "invalid API key"' < "$work/err"
expect_exit 0 "${k[@]}" embed --api-key client-test-key "x"
check_json 'len(j["embeddings"]) == 1' < "$work/out"
RELSERVE_API_KEY=client-test-key expect_exit 0 "${k[@]}" models
expect_exit 0 "${k[@]}" health
RELSERVE_API_KEY=client-test-key expect_exit 0 "${k[@]}" bench --requests 4 --warmup 0 --concurrency 2 --quiet \
  --lengths fixed:8
check_json 'j["requests"] == 4' 'j["errors"] == {}' < "$work/out"
stop_server "$server_pid"
echo "relserve-client commands: passed"
