#ifndef RELSERVE_SERVER_HTTP_API_HF_INFERENCE_API_H_
#define RELSERVE_SERVER_HTTP_API_HF_INFERENCE_API_H_

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "server/serving/serving_types.h"

namespace relserve {

// The Hugging Face Inference API's zero-shot-classification task (what
// @huggingface/inference's zeroShotClassification and huggingface_hub's
// InferenceClient.zero_shot_classification send), answered as transformers'
// ZeroShotClassificationPipeline returns it.

// {"inputs": "text" | ["text", ...], "parameters": {"candidate_labels": ["a", "b"] | "a, b",
// "hypothesis_template": "This example is {}.", "multi_label": false}, "model": optional}.
// candidate_labels as one string are split on commas and stripped, as the pipeline does;
// "multi_class" is the pipeline's old name of multi_label. Other parameters are ignored, as
// the pipeline ignores arguments it does not take.
struct ZeroShotHttpRequest {
  ZeroShotRequest zero_shot;
  bool batch = false;  // inputs was an array: the answer is an array
};
absl::StatusOr<ZeroShotHttpRequest> ParseZeroShot(const nlohmann::json& body);

// Whether a body asks for zero-shot classification: it carries candidate_labels in parameters
// (TEI's POST / serves an NLI model's zero-shot calls there).
bool HasCandidateLabels(const nlohmann::json& body);

// {"sequence": text, "labels": [best first], "scores": [...]} per text; an array of those when
// the request's inputs was an array.
nlohmann::json ZeroShotJson(const ZeroShotResult& result, bool batch);

}  // namespace relserve

#endif  // RELSERVE_SERVER_HTTP_API_HF_INFERENCE_API_H_
