#ifndef RELSERVE_SERVER_SERVING_SERVING_TYPES_H_
#define RELSERVE_SERVER_SERVING_SERVING_TYPES_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "server/backend/inference_backend.h"
#include "server/backend/model_types.h"
#include "server/tokenizer/truncation.h"

namespace relserve {

// The requests and results of the serving layer: plain values, the same for every transport
// (gRPC and HTTP adapters convert their messages to and from these).

// One input: a text, a text pair (cross-encoders), or token ids.
struct Input {
  enum class Kind { kEmpty, kText, kPair, kTokens };
  Kind kind = Kind::kEmpty;
  std::string text;                     // kText
  std::string first, second;            // kPair
  std::vector<int32_t> ids;             // kTokens
  std::vector<int32_t> token_type_ids;  // kTokens; empty = all 0

  static Input Text(std::string t) {
    Input i;
    i.kind = Kind::kText;
    i.text = std::move(t);
    return i;
  }
  static Input Pair(std::string a, std::string b) {
    Input i;
    i.kind = Kind::kPair;
    i.first = std::move(a);
    i.second = std::move(b);
    return i;
  }
  static Input Tokens(std::vector<int32_t> ids, std::vector<int32_t> types = {}) {
    Input i;
    i.kind = Kind::kTokens;
    i.ids = std::move(ids);
    i.token_type_ids = std::move(types);
    return i;
  }
};

// When a call must be answered by, and whether its client is gone.
struct CallContext {
  absl::Time deadline = absl::InfiniteFuture();
  std::shared_ptr<const std::atomic<bool>> cancelled;  // may be null
};

// What a request says about over-long inputs: whether to cut them to the model's maximum
// instead of refusing them (unset: the server's --auto-truncate), and from which end of each
// text (TruncationDirection: right by default, as transformers and TEI).
struct Truncation {
  std::optional<bool> truncate;
  TruncationDirection direction = TruncationDirection::kRight;
};

struct Usage {
  int64_t tokens = 0;  // tokens computed, special tokens included
  int32_t sequences = 0;
};

struct Timing {
  absl::Duration tokenize;
  absl::Duration queue;      // longest wait of one of the request's sequences for a batch
  absl::Duration inference;  // longest batch the request's sequences ran in
  absl::Duration total;
};

struct EmbedRequest {
  std::string model;  // empty: the default model
  std::vector<Input> inputs;
  bool normalize = false;
  Truncation truncation;
  int dimensions = 0;  // > 0: keep the first k values, then renormalise
  // sentence-transformers' encode(prompt_name=...): the model's prompt of that name goes before
  // each text. Empty: the model's default_prompt_name, if it has one.
  std::string prompt_name;
  // Whether `dimensions` renormalises the kept values when `normalize` is false: yes for gRPC
  // and OpenAI (Matryoshka truncation), no for TEI's /embed, which only normalises when asked.
  bool dimensions_renormalize = true;
  std::string request_id;
  // Texts longer than the model's maximum embedded whole, in windows whose pooled vectors are
  // averaged (long_input.h). Unset: the server's default (ServingLimits::whole_input).
  std::optional<bool> whole_input;
  // Tokens a window repeats from the one before; unset: ServingLimits::window_overlap.
  std::optional<int> window_overlap;
  bool return_sparse = false;        // also the model's sparse vector (ModelInfo::sparse_kind)
  bool return_multi_vector = false;  // also its multi-vector token vectors (ModelInfo::multi_vector_kind)
};
struct Embedding {
  std::vector<float> values;
  int32_t num_tokens = 0;  // tokens computed for the input, every window's
  bool truncated = false;
  int32_t windows = 1;     // windows the input was embedded in
  std::vector<std::pair<int32_t, float>> sparse;  // return_sparse: (id, weight > 0), ids ascending
  std::vector<float> multi_vector;                // return_multi_vector: multi_vector_count x multi_vector_dim
  int32_t multi_vector_count = 0;
  int32_t multi_vector_dim = 0;
};
struct EmbedResult {
  std::string model;
  std::vector<Embedding> embeddings;
  Usage usage;
  Timing timing;
  std::string request_id;
};

struct EmbedTokensRequest {
  std::string model;
  std::vector<Input> inputs;
  Truncation truncation;
};
struct TokenStates {
  std::vector<int32_t> token_ids;
  std::vector<std::pair<int32_t, int32_t>> offsets;  // byte offsets per token; (0, 0) for specials
  int32_t hidden_size = 0;
  std::vector<float> values;  // num_tokens x hidden_size, row-major
  bool truncated = false;
};
struct EmbedTokensResult {
  std::string model;
  std::vector<TokenStates> sequences;
  Usage usage;
  Timing timing;
};

struct RerankRequest {
  std::string model;
  std::string query;
  std::vector<std::string> documents;
  int top_n = 0;  // > 0: only the best n
  bool return_documents = false;
  Truncation truncation;
  bool raw_scores = false;
  // Cohere v2's max_tokens_per_doc: each document cut to its first this many tokens before it
  // is paired with the query (0: not cut).
  int max_tokens_per_doc = 0;
  // Chunked rerank (a cross-encoder's long documents): a document that does not fit beside the
  // query is scored in windows of query + a run of its tokens, and its score is the largest of
  // its windows' (EncodePairWindows). Unset: the server's default (ServingLimits).
  std::optional<bool> chunk_documents;
  std::optional<int> max_chunks_per_doc;  // windows per document at most (Cohere v1's name)
  std::optional<int> chunk_overlap;       // tokens a window repeats from the one before
};
struct RerankHit {
  int32_t index = 0;  // the document's position in the request
  float score = 0;
  std::string document;  // when return_documents
  int32_t windows = 1;   // the windows the document was scored in (chunked rerank)
};
struct RerankResult {
  std::string model;
  std::vector<RerankHit> results;  // best first
  bool chunked = false;            // documents were chunked: each hit's `windows` says how
  Usage usage;
  Timing timing;
};

// What Classify's scores are without raw_scores.
enum class ScoreRule {
  kProblemType,  // by the model's problem type: softmax, sigmoid (multi-label), the logits (regression)
  kLogitCount,   // TEI's /predict: softmax over several logits, the sigmoid of a single one
};

struct ClassifyRequest {
  std::string model;
  std::vector<Input> inputs;
  Truncation truncation;
  bool raw_scores = false;
  int top_k = 0;  // > 0: only the k best labels per input
  ScoreRule score_rule = ScoreRule::kProblemType;
};
struct LabelScore {
  std::string label;
  int32_t index = 0;
  float score = 0;
};
struct Classification {
  std::vector<LabelScore> labels;  // best first
  std::vector<float> logits;       // in label-index order
};
struct ClassifyResult {
  std::string model;
  std::vector<Classification> results;
  Usage usage;
  Timing timing;
};

// Zero-shot classification with an NLI model (zero_shot.h): each text against every candidate
// label's hypothesis.
struct ZeroShotRequest {
  std::string model;
  std::vector<std::string> sequences;
  std::vector<std::string> candidate_labels;
  std::string hypothesis_template;  // empty: "This example is {}."
  bool multi_label = false;
  // Only the text (the premise) is cut, never the hypothesis; unset truncate cuts, as the
  // pipeline always does.
  Truncation truncation;
};
struct ZeroShotClassification {
  std::string sequence;
  // Every candidate label, best first; index is the label's position in candidate_labels.
  std::vector<LabelScore> labels;
};
struct ZeroShotResult {
  std::string model;
  std::vector<ZeroShotClassification> results;
  Usage usage;
  Timing timing;
};

struct TokenizeRequest {
  std::string model;
  std::vector<Input> inputs;
  Truncation truncation;
  // Every token of a text, however long: no truncation, no refusal past the model's maximum
  // length (TEI's /tokenize, which chunkers count tokens with). `truncation` is then unused.
  bool whole_text = false;
};
struct Tokenized {
  std::vector<int32_t> input_ids;
  std::vector<int32_t> token_type_ids;
  std::vector<std::pair<int32_t, int32_t>> offsets;
  std::vector<std::string> pieces;  // empty for models without a tokenizer
  // Per token: added by the tokenizer's template ([CLS], [SEP], </s>), not by the text. All
  // false for token-id inputs.
  std::vector<bool> special;
  bool truncated = false;
};
struct TokenizeResult {
  std::string model;
  std::vector<Tokenized> results;
};

// A served model as ListModels, TEI's /info and the routes that pick a pipeline describe it: the
// backend's ModelInfo (inference_backend.h) as served, and what serving adds. In `info`, serving
// states three words in the backend's place: max_length (the length requests are cut at,
// ServedModel::max_length), device (every device a copy runs on, "cuda:0,cuda:1") and
// has_tokenizer (a tokenizer serves it).
struct ModelDescription {
  ModelInfo info;
  std::string name;
  std::string model_id;              // what --model gave (a Hub id or a directory); may be empty
  std::vector<std::string> aliases;  // other names requests may use
  std::string entailment_label;      // the NLI label zero-shot classification reads; "" for none

  bool has_classifier() const { return !info.labels.empty(); }
  // sentence-transformers: how embeddings compare ("cosine", "dot", "euclidean", "manhattan";
  // "cosine", the library's default, where the model does not say) and its prompts' names.
  std::string similarity_fn_name() const {
    return info.similarity_fn_name.empty() ? "cosine" : info.similarity_fn_name;
  }
  std::vector<std::string> prompt_names() const {
    std::vector<std::string> names;
    for (const auto& [prompt, text] : info.prompts) names.push_back(prompt);
    return names;
  }
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_SERVING_SERVING_TYPES_H_
