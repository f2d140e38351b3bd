#ifndef RELSERVE_SERVER_SERVING_INPUT_ENCODER_H_
#define RELSERVE_SERVER_SERVING_INPUT_ENCODER_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "server/backend/inference_backend.h"
#include "server/serving/serving_types.h"
#include "server/tokenizer/tokenizer.h"

namespace relserve {

// One request input turned into a sequence the batcher can run.
struct EncodedInput {
  SequenceInput sequence;
  std::vector<std::pair<int32_t, int32_t>> offsets;  // per token; (0, 0) for specials and id inputs
  // Per token of a text input: true for the special tokens the tokenizer's template added
  // ([CLS], [SEP], </s>), false for the text's own tokens (a special token written in the text
  // included). Empty for token-id inputs.
  std::vector<bool> special;
  bool truncated = false;
};

struct InputLimits {
  static TokenizeOptions Refusing(int max_length) {
    TokenizeOptions o;
    o.max_length = max_length;
    o.truncate = false;
    return o;
  }

  // The model's (or the server's) longest sequence and how an input longer than that is cut (or
  // refused): the tokenizer's own options, which token-id inputs follow too.
  TokenizeOptions truncation = Refusing(512);
  // Tokenize only (TokenizeRequest.whole_text): every token, past max_length too, and no check
  // against the model (the sequence is never run).
  bool whole_text = false;
};

// Tokenizes (or checks) one Input for a model. Errors are INVALID_ARGUMENT naming
// `field` (e.g. "inputs[3]") and the limit that was crossed; FAILED_PRECONDITION when text
// arrives for a model without a tokenizer.
absl::StatusOr<EncodedInput> EncodeInput(const Input& input, const std::string& field, const Tokenizer* tokenizer,
                                         const InferenceBackend& backend, const InputLimits& limits);

// A query/document pair for Rerank.
absl::StatusOr<EncodedInput> EncodePair(const std::string& first, const std::string& second, const std::string& field,
                                        const Tokenizer* tokenizer, const InferenceBackend& backend,
                                        const InputLimits& limits);

// A text that takes part in many pairs (Rerank's query, a zero-shot premise or hypothesis),
// tokenized once, only as far as a pair can keep (Tokenizer::TokenizeForPairs). Errors name
// `field`; an empty text is refused as EncodePair refuses it.
absl::StatusOr<Tokenizer::PairText> TokenizePairText(const std::string& text, const std::string& field,
                                                      const Tokenizer* tokenizer, const InputLimits& limits);
// The pair of two texts tokenized by TokenizePairText under the same limits: what EncodePair
// gives for the texts.
absl::StatusOr<EncodedInput> EncodeTokenizedPair(const Tokenizer::PairText& first, const Tokenizer::PairText& second,
                                                 const std::string& field, const Tokenizer& tokenizer,
                                                 const InferenceBackend& backend, const InputLimits& limits);

}  // namespace relserve

#endif  // RELSERVE_SERVER_SERVING_INPUT_ENCODER_H_
