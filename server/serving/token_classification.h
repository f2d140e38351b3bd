#ifndef RELSERVE_SERVER_SERVING_TOKEN_CLASSIFICATION_H_
#define RELSERVE_SERVER_SERVING_TOKEN_CLASSIFICATION_H_

// Token classification (named entities) as transformers 4.40.2's TokenClassificationPipeline
// answers it with a fast tokenizer: softmax over each token's logits, then the
// aggregation_strategy (none, simple, first, average, max) with the pipeline's word rules and
// B-/I- grouping, ignore_labels, and start/end as character offsets into the text. Texts
// longer than the model run in the pipeline's `stride` windows, or are refused.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/serving/input_encoder.h"
#include "server/serving/serving_types.h"

namespace relserve {

class InferenceBackend;
class Tokenizer;

enum class AggregationStrategy { kNone, kSimple, kFirst, kAverage, kMax };

// The pipeline's names: "none", "simple", "first", "average", "max" (any case, as
// AggregationStrategy[name.upper()] reads them). INVALID_ARGUMENT naming `field` otherwise.
absl::StatusOr<AggregationStrategy> ParseAggregationStrategy(const std::string& name, const std::string& field);
const char* AggregationStrategyName(AggregationStrategy strategy);

// One answer entry. With kNone: a token (`entity` its label, `index` its position in the
// sequence, special tokens counted, `word` the token as the vocabulary writes it); otherwise a
// group of tokens or words (`entity` the group's tag, served as `entity_group`; index -1; `word`
// the decoder's text of the group).
struct TokenEntity {
  std::string entity;
  double score = 0;
  int32_t index = -1;
  std::string word;
  int64_t start = 0;  // characters (Unicode code points) into the text, as Python counts them
  int64_t end = 0;
};

struct TokenClassifyRequest {
  std::string model;  // "" = the server's default model
  std::vector<std::string> texts;
  // The pipeline's default is kNone; the Hugging Face Inference API's (HTTP) is kSimple.
  AggregationStrategy aggregation_strategy = AggregationStrategy::kNone;
  std::optional<std::vector<std::string>> ignore_labels;  // unset: {"O"}
  // Tokens consecutive windows share for texts longer than the model (the pipeline's stride);
  // unset: such a text is refused. Needs an aggregation_strategy other than none.
  std::optional<int> stride;
};

struct TokenClassifyResult {
  std::string model;
  std::vector<std::vector<TokenEntity>> results;  // one list per text, in order
  Usage usage;
  Timing timing;
};

// A text's sequences: one when it fits `max_length` (special tokens included); otherwise, with
// a stride, the tokenizer's overflowing windows (each the template around a run of the text's
// tokens, consecutive runs sharing `stride` tokens), and without one INVALID_ARGUMENT naming
// `field`, the text's length, the limit and the `stride` parameter. `special` marks the
// template's tokens. INVALID_ARGUMENT for an empty text or a stride outside [0, room).
absl::StatusOr<std::vector<EncodedInput>> EncodeTokenClassificationText(const std::string& text,
                                                                         const std::string& field,
                                                                         const Tokenizer& tokenizer,
                                                                         const InferenceBackend& backend,
                                                                         int max_length, std::optional<int> stride);

// The pipeline's postprocess for one text: `windows` as EncodeTokenClassificationText made
// them, `logits[w]` the token logits of window w (tokens x labels, row-major). Entities of
// several windows are merged as aggregate_overlapping_entities does.
std::vector<TokenEntity> TokenEntities(const std::string& text, const std::vector<EncodedInput>& windows,
                                       const std::vector<const std::vector<float>*>& logits,
                                       const std::vector<std::string>& labels, const Tokenizer& tokenizer,
                                       AggregationStrategy strategy, const std::vector<std::string>& ignore_labels);

}  // namespace relserve

#endif  // RELSERVE_SERVER_SERVING_TOKEN_CLASSIFICATION_H_
