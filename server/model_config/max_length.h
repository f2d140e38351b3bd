#ifndef RELSERVE_SERVER_MODEL_CONFIG_MAX_LENGTH_H_
#define RELSERVE_SERVER_MODEL_CONFIG_MAX_LENGTH_H_

#include <string>

#include "absl/status/statusor.h"
#include "server/model_config/model_config.h"
#include "server/model_config/sentence_transformers_config.h"

namespace relserve {

// The longest input a model takes, special tokens included, and where that number comes from
// (for the load log: "max_seq_length 384 in .../sentence_bert_config.json", "as asked; ...").
struct MaxLength {
  int tokens = 0;
  std::string source;
};

// The model's own maximum, cut to sentence-transformers' max_seq_length where the model has one
// (SentenceTransformer.encode and TEI cut there), then to `requested` (0: not asked); a request
// may ask for less, never more (INVALID_ARGUMENT naming the limit). The engine and the
// tokenizer beside it cut at the same length.
absl::StatusOr<MaxLength> ResolveMaxLength(const ModelConfig& config, const SentenceTransformersConfig& st,
                                           int requested);

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_CONFIG_MAX_LENGTH_H_
