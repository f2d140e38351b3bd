#ifndef RELSERVE_SERVER_HTTP_TEI_API_H_
#define RELSERVE_SERVER_HTTP_TEI_API_H_

#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "server/serving/serving_types.h"

namespace relserve {

// text-embeddings-inference's routes (/embed, /rerank, /predict, /tokenize, /info), with its
// field names, types and defaults, converted to and from the serving layer's types. TEI's
// requests name no model: they go to the default model.

// /embed: {inputs, normalize (default true), truncate, truncation_direction, dimensions}
// -> [[float, ...], ...]
absl::StatusOr<EmbedRequest> ParseTeiEmbed(const nlohmann::json& body);
nlohmann::json TeiEmbedJson(const EmbedResult& result);

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
// input, null for special tokens: those the tokenizer's template adds ([CLS], [SEP], </s>), whose
// ids are `special_ids` (a piece such as "▁" may also cover no bytes, and is not special).
struct TeiTokenizeRequest {
  TokenizeRequest tokenize;
  bool add_special_tokens = true;
};
absl::StatusOr<TeiTokenizeRequest> ParseTeiTokenize(const nlohmann::json& body);
nlohmann::json TeiTokenizeJson(const TokenizeRequest& request, const TokenizeResult& result, bool add_special_tokens,
                               const std::set<int32_t>& special_ids);

// /info: TEI's Info of the default model, with the server's limits.
struct ServerLimitsInfo {
  int max_input_length = 0;  // of the model
  int64_t max_batch_tokens = 0;
  int max_batch_requests = 0;
  int max_client_batch_size = 0;
  int max_concurrent_requests = 0;
  bool auto_truncate = false;  // --auto-truncate
  std::string version;
};
nlohmann::json TeiInfoJson(const ModelDescription& model, const ServerLimitsInfo& limits);

// {"error": message, "error_type": "Validation" | "Empty" | ...}
nlohmann::json TeiErrorJson(const absl::Status& status, int http_status);

}  // namespace relserve

#endif  // RELSERVE_SERVER_HTTP_TEI_API_H_
