#ifndef RELSERVE_SERVER_SERVING_ENCODER_SERVING_H_
#define RELSERVE_SERVER_SERVING_ENCODER_SERVING_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/metrics/server_metrics.h"
#include "server/serving/model_registry.h"
#include "server/serving/serving_types.h"
#include "server/serving/token_classification.h"

namespace relserve {

struct ServingLimits {
  int max_inputs_per_request = 256;      // inputs of Embed/EmbedTokens/Classify/Tokenize, documents of Rerank
  size_t max_response_bytes = 64 << 20;  // EmbedTokens answers larger than this are refused before computing
  // Whether over-long inputs are cut to the model's maximum in requests that do not say
  // (Truncation.truncate unset); a request's own choice wins (--auto-truncate, true by default
  // as TEI 1.9's).
  bool auto_truncate = true;
  // Whether Embed embeds over-long texts whole, in windows, in requests that do not say
  // (EmbedRequest.whole_input unset; --whole-input), and how many tokens consecutive windows
  // share (--window-overlap).
  bool whole_input = false;
  int window_overlap = 0;
  int max_windows_per_request = 4096;  // sequences one Embed request's inputs may become
  // Chunked rerank in requests that do not say (RerankRequest.chunk_documents unset;
  // --rerank-chunking), the most windows of one document (--max-chunks-per-doc, Cohere v1's
  // default 10) and the tokens consecutive windows share (--rerank-chunk-overlap). One Rerank
  // request's windows count against max_windows_per_request.
  bool rerank_chunking = false;
  int max_chunks_per_doc = 10;
  int rerank_chunk_overlap = 0;
};

// What relserve does for a call, whatever transport carried it: validation, tokenization,
// submission to the model's batcher, and what the outputs become (normalisation, dimensions,
// softmax or sigmoid by problem type, top-k, rerank order). The gRPC service and the HTTP
// routes are thin adapters over it.
//
// Errors are statuses (status_codes.h of each transport maps them): INVALID_ARGUMENT for bad
// input (naming the field and the limit), NOT_FOUND for an unknown model, FAILED_PRECONDITION
// for a model without the head or tokenizer the call needs, RESOURCE_EXHAUSTED for a full
// queue, DEADLINE_EXCEEDED and CANCELLED for calls that expired or went away while queued,
// UNAVAILABLE while stopping, INTERNAL for failed batches and non-finite outputs.
//
// The asynchronous calls answer `done` exactly once: on the calling thread when the request
// is refused before anything is queued, otherwise on a model worker thread. `registry` and
// `metrics` (may be null) outlive this object. Thread-safe.
class EncoderServing {
 public:
  template <typename T>
  using Done = std::function<void(absl::StatusOr<T>)>;

  EncoderServing(const ModelRegistry* registry, ServerMetrics* metrics, ServingLimits limits);

  void Embed(const EmbedRequest& request, const CallContext& call, Done<EmbedResult> done) const;
  void EmbedTokens(const EmbedTokensRequest& request, const CallContext& call, Done<EmbedTokensResult> done) const;
  void Rerank(const RerankRequest& request, const CallContext& call, Done<RerankResult> done) const;
  void Classify(const ClassifyRequest& request, const CallContext& call, Done<ClassifyResult> done) const;
  // Zero-shot classification (zero_shot.h): all pairs of the request go through the batcher
  // together. FAILED_PRECONDITION for a model without a classification head, a tokenizer or an
  // entailment label; INVALID_ARGUMENT for no texts or labels, an empty one, a template
  // without {} or more pairs than max_inputs_per_request.
  void ZeroShotClassify(const ZeroShotRequest& request, const CallContext& call, Done<ZeroShotResult> done) const;
  // Token classification (token_classification.h), as TokenClassificationPipeline answers it:
  // every text's windows go through the batcher together. FAILED_PRECONDITION, before anything
  // is queued, for a model without a token-classification head or a tokenizer;
  // INVALID_ARGUMENT for no texts, more than max_inputs_per_request, a stride with
  // aggregation_strategy none, or a text longer than the model without a stride.
  void ClassifyTokens(const TokenClassifyRequest& request, const CallContext& call,
                      Done<TokenClassifyResult> done) const;
  absl::StatusOr<TokenizeResult> Tokenize(const TokenizeRequest& request, const CallContext& call = {}) const;
  std::vector<ModelDescription> ListModels() const;
  // The model a request names ("" for the default; NOT_FOUND as for any call).
  absl::StatusOr<ModelDescription> DescribeModel(const std::string& name) const;
  // Text from token ids through the model's tokenizer (Tokenizer::Decode), one text per
  // sequence: FAILED_PRECONDITION for a model without a tokenizer, INVALID_ARGUMENT for more
  // sequences than max_inputs_per_request or an id outside the vocabulary (naming the sequence).
  absl::StatusOr<std::vector<std::string>> Decode(const std::string& model,
                                                  const std::vector<std::vector<int32_t>>& ids,
                                                  bool skip_special_tokens) const;
  const std::string& default_model() const { return registry_->default_model(); }

  const ServingLimits& limits() const { return limits_; }

 private:
  static ModelDescription Describe(const ServedModel& model);

  const ModelRegistry* registry_;
  ServerMetrics* metrics_;
  ServingLimits limits_;
};

// Scores from logits as the problem type asks: softmax (single-label), sigmoid (multi-label),
// the logits themselves (regression).
std::vector<float> ScoresFromLogits(const std::vector<float>& logits, ProblemType problem_type);

// Scores as text-embeddings-inference computes them, whatever the problem type: the sigmoid of
// a single logit, the softmax of several (ScoreRule::kLogitCount).
std::vector<float> TeiScoresFromLogits(const std::vector<float>& logits);

}  // namespace relserve

#endif  // RELSERVE_SERVER_SERVING_ENCODER_SERVING_H_
