#ifndef RELSERVE_SERVER_MODEL_FAMILIES_MODEL_TOKENIZER_H_
#define RELSERVE_SERVER_MODEL_FAMILIES_MODEL_TOKENIZER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/model_config/model_config.h"
#include "server/model_config/sentence_transformers_config.h"
#include "server/tokenizer/tokenizer.h"

namespace relserve {

// A model directory's tokenizer, loaded beside its engine (torch-free).
struct ModelTokenizer {
  std::unique_ptr<Tokenizer> tokenizer;  // null: the model takes token ids only
  // Why there is none where that is not a missing file: a tokenizer_class relserve has no
  // tokenizer for (ByT5's, say).
  std::string no_tokenizer_reason;
};

// The tokenizer the model's family names (or tokenizer_config.json's tokenizer_class), cutting at
// `max_length` by default, lowering every text where sentence-transformers' Transformer module
// says do_lower_case, with SentencePiece's code from the module `sentencepiece` says. No files:
// no tokenizer, not an error; files that are there but unreadable or malformed are an error
// naming them.
absl::StatusOr<ModelTokenizer> LoadModelTokenizer(const std::string& dir, const ModelConfig& config,
                                                  const SentenceTransformersConfig& st, int max_length,
                                                  const SentencePieceModuleOptions& sentencepiece);

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_FAMILIES_MODEL_TOKENIZER_H_
