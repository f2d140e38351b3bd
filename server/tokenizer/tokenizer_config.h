#ifndef RELSERVE_SERVER_TOKENIZER_TOKENIZER_CONFIG_H_
#define RELSERVE_SERVER_TOKENIZER_TOKENIZER_CONFIG_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "server/tokenizer/special_tokens.h"
#include "server/tokenizer/tokenizer_family.h"

namespace relserve {

// What a Hugging Face model directory says about its tokenizer beyond the SentencePiece model.
struct TokenizerConfig {
  // Lower-case the text before encoding. Only ASCII letters are lowered (see Tokenizer).
  bool do_lower_case = false;
  // Unset when the files give none, or give transformers' "no limit" sentinel (1e30).
  std::optional<int> model_max_length;
  SpecialTokenNames special_tokens;
};

// The family's defaults: no lower-casing, no max length, the usual special token names.
TokenizerConfig DefaultTokenizerConfig(TokenizerFamily family);

// Applies the keys relserve uses from a parsed tokenizer_config.json or special_tokens_map.json
// (do_lower_case, model_max_length, pad/unk/cls/sep/eos_token, each token a string or an
// {"content": ...} object) on top of *config. INVALID_ARGUMENT, naming `what`, for a value of
// the wrong type.
absl::Status ApplyTokenizerConfigJson(const nlohmann::json& json, const std::string& what,
                                      TokenizerConfig* config);

// The family's defaults, then <model_dir>/tokenizer_config.json, then
// <model_dir>/special_tokens_map.json (which wins for special tokens, as in transformers),
// each only where the file exists.
absl::StatusOr<TokenizerConfig> ReadTokenizerConfig(const std::string& model_dir,
                                                    TokenizerFamily family);

}  // namespace relserve

#endif  // RELSERVE_SERVER_TOKENIZER_TOKENIZER_CONFIG_H_
