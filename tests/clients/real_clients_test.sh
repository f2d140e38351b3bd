#!/usr/bin/env bash
# The official client packages from npm against a running relserve (issue 21): installs the
# versions pinned in package.json / package-lock.json with `npm ci` into the build tree, serves
# the reference models of tests/data/reference (transformers 4.40.2's outputs) with the built
# relserve, and runs real_clients_test.mjs, which drives openai, @langchain/openai,
# @huggingface/inference, cohere-ai and @grpc/grpc-js against it and checks their numbers.
# Needs node >= 18 and npm (scripts/install-deps.sh installs Debian's) and npm's registry: without
# them the test fails, saying why.
# Arguments: the bin directory and the source root.
bin="$1"; root="$2"
source "$root/tests/client/client_test_lib.sh"
here="$root/tests/clients"
ref="$root/tests/data/reference"

# --- node and npm --------------------------------------------------------------------------------
for tool in node npm; do
  command -v "$tool" > /dev/null || {
    echo "FAILED: '$tool' is not on the PATH: this test runs the official clients from npm on Node.js >= 18"
    echo "        (scripts/install-deps.sh installs Debian's nodejs and npm)"
    exit 1
  }
done
node_version=$(node --version)
node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 18 ? 0 : 1)' || {
  echo "FAILED: node $node_version is too old: the pinned clients need Node.js >= 18"; exit 1
}

# --- the models ------------------------------------------------------------------------------------
# ref: transformers' DebertaV2Model of the reference set with the reference SentencePiece model
# (no sentence-transformers files: mean pooling, unnormalised unless asked); cls: the same backbone
# with its 3-label head (DebertaV2ForSequenceClassification); reranker: a random 1-label head.
for name in deberta_v3_like:ref deberta_v3_cls:cls; do
  mkdir -p "$work/${name#*:}"
  cp "$ref/${name%:*}/config.json" "$work/${name#*:}/"
  ln -s "$ref/${name%:*}/model.safetensors" "$work/${name#*:}/model.safetensors"
  cp "$ref/tokenizer/spm.model" "$work/${name#*:}/"
done
# nli: the same classifier with MNLI's label names, for zero-shot classification.
mkdir -p "$work/nli"
sed -e 's/LABEL_0/contradiction/g' -e 's/LABEL_1/neutral/g' -e 's/LABEL_2/entailment/g' \
  "$ref/deberta_v3_cls/config.json" > "$work/nli/config.json"
ln -s "$ref/deberta_v3_cls/model.safetensors" "$work/nli/model.safetensors"
cp "$ref/tokenizer/spm.model" "$work/nli/"
make_model reranker --labels 1
api_key="relserve-clients-test-key"
printf '%s\n' "$api_key" > "$work/keys"

start_server server.log --model "ref=$work/ref" --model "cls=$work/cls" --model "reranker=$work/reranker" \
  --model "nli=$work/nli" --model "colbert=$root/tests/data/colbert/colbert_pylate" \
  --metrics-port -1 --api-key-file "$work/keys"
server=$server_pid
grpc=$grpc_port
http_port=$(sed -n 's/.*HTTP on port \([0-9]*\).*/\1/p' "$work/server.log")
# A TEI endpoint serving the classifier alone (TEI serves one model; the Hugging Face client sends
# no model name), with --auto-truncate false: over-long inputs are refused there (OpenAI's 400).
start_server classifier.log --model "cls=$work/cls" --metrics-port -1 --api-key-file "$work/keys" --auto-truncate false
classifier=$server_pid
classifier_port=$(sed -n 's/.*HTTP on port \([0-9]*\).*/\1/p' "$work/classifier.log")
# An Inference API endpoint serving the NLI model alone (zero-shot classification at its root).
start_server nli.log --model "nli=$work/nli" --metrics-port -1 --api-key-file "$work/keys"
nli_server=$server_pid
nli_port=$(sed -n 's/.*HTTP on port \([0-9]*\).*/\1/p' "$work/nli.log")
# An Inference API endpoint serving a token classifier alone (named entities at its root):
# tests/data/ner's BERT model, whose pipeline answers are in ner_expected.json.
start_server ner.log --model "ner=$root/tests/data/ner/ner_bert" --metrics-port -1 --api-key-file "$work/keys"
ner_server=$server_pid
ner_grpc=$grpc_port
ner_port=$(sed -n 's/.*HTTP on port \([0-9]*\).*/\1/p' "$work/ner.log")
[ -n "$http_port" ] && [ -n "$classifier_port" ] && [ -n "$nli_port" ] && [ -n "$ner_port" ] || { echo "FAILED: no 'HTTP on port' in the logs"; cat "$work"/*.log; exit 1; }

# --- the clients, from npm's registry into the build tree ----------------------------------------
# scripts/install-test-packages.sh installs them there (scripts/test.sh runs it before CTest, with
# retries); a tree installed from this lock is reused. Otherwise the same script installs them
# here, one try of at most 240 s, inside this test's time limit, and says why where it cannot.
npm_dir="$(cd "$bin/.." && pwd)/tests/clients/npm"
if ! RETRIES=1 TRY_SECONDS=240 "$root/scripts/install-test-packages.sh" "$here" "$npm_dir" 2>&1; then
  echo "FAILED: the pinned clients (tests/clients/package-lock.json) could not be installed from npm's registry"
  echo "        into $npm_dir (above: npm's words)"
  exit 1
fi
cp "$here/real_clients_test.mjs" "$npm_dir/"
echo "clients: node $node_version, npm $(npm --version)"

# --- run them -------------------------------------------------------------------------------------
export no_proxy="127.0.0.1,localhost${no_proxy:+,$no_proxy}" NO_PROXY="127.0.0.1,localhost${NO_PROXY:+,$NO_PROXY}"
config=$(printf '{"url": "http://127.0.0.1:%s", "classifier_url": "http://127.0.0.1:%s", "nli_url": "http://127.0.0.1:%s", "ner_url": "http://127.0.0.1:%s", "ner_grpc": "127.0.0.1:%s", "grpc": "127.0.0.1:%s", "api_key": "%s", "proto": "%s", "reference": "%s", "colbert": "%s", "ner_expected": "%s"}' \
  "$http_port" "$classifier_port" "$nli_port" "$ner_port" "$ner_grpc" "$grpc" "$api_key" "$root/proto/relserve/v1/encoder.proto" "$ref" \
  "$root/tests/data/colbert" "$root/tests/data/ner/ner_expected.json")
# Each check prints "ok N" as it passes: where a client hangs, the last line says after what.
if ! timeout 240 node "$npm_dir/real_clients_test.mjs" "$config"; then
  echo "FAILED: the clients failed or ran past 240 s (above: the checks that passed); server log:"
  tail -n 30 "$work/server.log"
  exit 1
fi

stop_server "$ner_server"
stop_server "$nli_server"
stop_server "$classifier"
stop_server "$server"
echo "OK"
