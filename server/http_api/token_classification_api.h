#ifndef RELSERVE_SERVER_HTTP_API_TOKEN_CLASSIFICATION_API_H_
#define RELSERVE_SERVER_HTTP_API_TOKEN_CLASSIFICATION_API_H_

// The Hugging Face Inference API's token-classification task (what @huggingface/inference's
// tokenClassification and huggingface_hub's InferenceClient.token_classification send),
// answered as transformers' TokenClassificationPipeline returns it.

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "server/serving/token_classification.h"

namespace relserve {

// {"inputs": "text" | ["text", ...], "parameters": {"aggregation_strategy": "simple",
// "ignore_labels": ["O"], "stride": 16}, "model": optional}. aggregation_strategy defaults to
// "simple", as the Inference API serves the task (the pipeline's own default is "none");
// ignore_labels to ["O"]; without stride a text longer than the model is refused. Other
// parameters are ignored, as the pipeline ignores arguments it does not take.
struct TokenClassificationHttpRequest {
  TokenClassifyRequest request;
  bool batch = false;  // inputs was an array: the answer is an array of lists
};
absl::StatusOr<TokenClassificationHttpRequest> ParseTokenClassification(const nlohmann::json& body);

// The pipeline's list per text: {"entity", "score", "index", "word", "start", "end"} per token
// for aggregation none, {"entity_group", "score", "word", "start", "end"} per group otherwise;
// a list of those lists when the request's inputs was an array.
nlohmann::json TokenClassificationJson(const TokenClassifyResult& result, AggregationStrategy strategy, bool batch);

}  // namespace relserve

#endif  // RELSERVE_SERVER_HTTP_API_TOKEN_CLASSIFICATION_API_H_
