#ifndef RELSERVE_SERVER_HTTP_API_TEI_API_H_
#define RELSERVE_SERVER_HTTP_API_TEI_API_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "server/serving/serving_types.h"

namespace relserve {

// text-embeddings-inference's routes (/embed, /rerank, /predict, /tokenize, /info), with its
// field names, types and defaults, converted to and from the serving layer's types. TEI's
// requests name no model: they go to the default model, unless they carry relserve's `model`.

// /embed: {inputs, normalize (default true), truncate, truncation_direction, dimensions}
// -> [[float, ...], ...]
absl::StatusOr<EmbedRequest> ParseTeiEmbed(const nlohmann::json& body);
// TEI's POST /similarity: {"inputs": {"source_sentence", "sentences": [..]}, "parameters":
// {"truncate", "truncation_direction", "prompt_name"}} as one embedding request of the source
// sentence followed by the sentences, normalised.
absl::StatusOr<EmbedRequest> ParseTeiSimilarity(const nlohmann::json& body);
// The cosine similarity of the first embedding with each of the others (TEI's answer: [float]).
nlohmann::json TeiSimilarityJson(const EmbedResult& result);
nlohmann::json TeiEmbedJson(const EmbedResult& result);

// /embed_sparse: {inputs, truncate, truncation_direction, prompt_name, model} -> for each input
// [{index, value}, ...]: the model's sparse vector (a SPLADE masked-LM head or bge-m3's
// sparse_linear), ids ascending, weights > 0 only. A model without a sparse head: 424.
absl::StatusOr<EmbedRequest> ParseTeiEmbedSparse(const nlohmann::json& body);
nlohmann::json TeiEmbedSparseJson(const EmbedResult& result);

// relserve's /embed_multi_vector, in /embed_all's shape: {inputs, truncate, truncation_direction,
// prompt_name or input_type, model} -> [[[float]]], ColBERT-style token vectors for each input.
// With bge-m3's colbert_linear: the projected, normalised vectors of every token after the first
// (MultiVectorJson); with a ColBERT checkpoint: each text as a query or a document
// (prompt_name / input_type "query", "document", ...; PyLate's default, a query), the vectors
// its MaxSim scores; without a projection the route answers every token's last hidden state,
// L2-normalised (NormalizedTokenStatesJson).
absl::StatusOr<EmbedRequest> ParseMultiVector(const nlohmann::json& body);
nlohmann::json MultiVectorJson(const EmbedResult& result);
nlohmann::json NormalizedTokenStatesJson(const EmbedTokensResult& result);

// /rerank: {query, texts, truncate, truncation_direction, raw_scores, return_text}
// -> [{index, score, text?}, ...], best first.
absl::StatusOr<RerankRequest> ParseTeiRerank(const nlohmann::json& body);
nlohmann::json TeiRerankJson(const RerankResult& result);

// /predict: {inputs: "text" | ["a", "b"] (a pair) | [["a"], ["a", "b"], ...], truncate,
// truncation_direction, raw_scores} -> [{score, label}, ...] for one input, an array of those
// for a batch; every label, best first.
struct TeiPredictRequest {
  ClassifyRequest classify;
  bool batch = false;
};
absl::StatusOr<TeiPredictRequest> ParseTeiPredict(const nlohmann::json& body);
nlohmann::json TeiPredictJson(const ClassifyResult& result, bool batch);

// /tokenize: {inputs: "text" | ["text", ...], add_special_tokens (default true)}
// -> [[{id, text, special, start, stop}, ...], ...]; start and stop are byte offsets into the
// input, null for special tokens: those the tokenizer's template adds ([CLS], [SEP], </s>), as
// the serving layer marks them (Tokenized.special; a piece such as "▁" may also cover no bytes,
// and is not special).
struct TeiTokenizeRequest {
  TokenizeRequest tokenize;
  bool add_special_tokens = true;
};
absl::StatusOr<TeiTokenizeRequest> ParseTeiTokenize(const nlohmann::json& body);
std::string TeiTokenizeText(const TokenizeRequest& request, const TokenizeResult& result, bool add_special_tokens);

// /info: TEI's Info of the default model, with the server's limits.
struct ServerLimitsInfo {
  int max_input_length = 0;  // of the model
  int64_t max_batch_tokens = 0;
  int max_batch_requests = 0;
  int max_client_batch_size = 0;
  int max_concurrent_requests = 0;
  bool auto_truncate = true;  // --auto-truncate
  std::string version;
};
nlohmann::json TeiInfoJson(const ModelDescription& model, const ServerLimitsInfo& limits);

// relserve's extension of TEI's routes: `model` names one of the models served (TEI serves
// one); absent or null, the default model.
absl::Status ReadTeiModel(const nlohmann::json& body, std::string* model);

// /embed_all: {inputs, truncate, truncation_direction, model} -> [[[float]]]: for each input
// the last hidden state of every token, special tokens included (TEI's raw per-token output).
absl::StatusOr<EmbedTokensRequest> ParseTeiEmbedAll(const nlohmann::json& body);
nlohmann::json TeiEmbedAllJson(const EmbedTokensResult& result);

// /decode: {ids: [id, ...] | [[id, ...], ...], skip_special_tokens (default true), model}
// -> [text, ...], one text per sequence (one for a single sequence too, as TEI answers).
struct TeiDecodeRequest {
  std::vector<std::vector<int32_t>> ids;
  bool skip_special_tokens = true;
  std::string model;
};
absl::StatusOr<TeiDecodeRequest> ParseTeiDecode(const nlohmann::json& body);

// What TEI's x-compute-characters counts for an input: its characters (a pair's two texts),
// or its number of token ids.
int64_t CountCharacters(const Input& input);
// TEI's response headers of a computing route: x-compute-time and x-total-time (both the
// call's time on the server, `compute`, as TEI writes both), x-compute-characters,
// x-compute-tokens, x-tokenization-time, x-queue-time and x-inference-time (the serving layer's
// Timing: the request's tokenization, and the longest wait and batch of its sequences, where TEI
// averages over a batch's inputs), times in whole milliseconds (TEI's as_millis).
std::vector<std::pair<std::string, std::string>> TeiComputeHeaders(int64_t characters, int64_t tokens,
                                                                   const Timing& timing, absl::Duration compute);

// {"error": message, "error_type": "Validation" | "Empty" | ...}
nlohmann::json TeiErrorJson(const absl::Status& status, int http_status);

}  // namespace relserve

#endif  // RELSERVE_SERVER_HTTP_API_TEI_API_H_
