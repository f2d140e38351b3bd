#ifndef RELSERVE_SERVER_TOKENIZER_FILES_TOKENIZER_CONFIG_H_
#define RELSERVE_SERVER_TOKENIZER_FILES_TOKENIZER_CONFIG_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "server/tokenizer/descriptor/special_token_names.h"
#include "server/tokenizer/descriptor/tokenizer_family_descriptor.h"

namespace relserve {

// How an added token matches text (transformers' AddedToken), where a file spells it out.
struct AddedTokenFlags {
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
  bool special = false;
  // Unset: the opposite of special, AddedToken's default.
  std::optional<bool> normalized;
  bool IsNormalized() const { return normalized.value_or(!special); }
};

// A token of added_tokens_decoder (tokenizer_config.json) or added_tokens.json.
struct AddedTokenEntry {
  std::string content;
  AddedTokenFlags flags;
};

// What a Hugging Face model directory says about its tokenizer beyond the vocabulary files.
struct TokenizerConfig {
  // Lower-case the text before encoding. The family's default: true for BERT and MPNet.
  bool do_lower_case = false;
  // Unset when the files give none, or give transformers' "no limit" sentinel (1e30).
  std::optional<int> model_max_length;
  SpecialTokenNames special_tokens;
  // The flags of special tokens written as AddedToken objects, and of every token of
  // added_tokens_decoder, by content. A special token written as a plain string is not here:
  // it matches as its tokenizer class makes it match.
  std::map<std::string, AddedTokenFlags> token_flags;
  // added_tokens_decoder, or where it is absent added_tokens.json: id -> token.
  std::map<int32_t, AddedTokenEntry> added_tokens;

  // BertTokenizer / MPNetTokenizer (WordPiece).
  bool do_basic_tokenize = true;
  std::optional<bool> strip_accents;  // unset: follow do_lower_case
  bool tokenize_chinese_chars = true;
  std::vector<std::string> never_split;
  int max_input_chars_per_word = 100;
  // DebertaV2Tokenizer: punctuation is cut out of the text before SentencePiece sees it.
  bool split_by_punct = false;
  // XLNetTokenizer.
  bool remove_space = true;
  bool keep_accents = false;
  // RobertaTokenizer: a space before the text, so its first word is encoded as any other
  // (default false). T5Tokenizer with legacy false: a "▁" before the text (default true).
  std::optional<bool> add_prefix_space;
  // T5Tokenizer: false for the behaviour transformers added in 4.31 (t5_text_model.h); unset
  // means true.
  bool legacy = true;
  // T5Tokenizer: how many <extra_id_N> tokens follow the SentencePiece vocabulary.
  int extra_ids = 100;
};

// The family's defaults: its tokenizer class's lower-casing and special token names, no max
// length.
TokenizerConfig DefaultTokenizerConfig(const TokenizerFamilyDescriptor& family);

// Applies the keys relserve uses from a parsed tokenizer_config.json or special_tokens_map.json
// on top of *config: do_lower_case, model_max_length, the special tokens (pad, unk, cls, sep,
// eos, mask, bos: each a string or an AddedToken {"content": ...} object;
// additional_special_tokens a list of those), added_tokens_decoder, and the switches of the
// fields above. INVALID_ARGUMENT, naming `what` and the key, for a value of the wrong type.
absl::Status ApplyTokenizerConfigJson(const nlohmann::json& json, const std::string& what,
                                      TokenizerConfig* config);

// The special tokens as tokenizer_config.json and special_tokens_map.json write them (the keys
// ApplyTokenizerConfigJson reads): each role that has a token as "<role>_token": "<token>",
// additional_special_tokens where there are any.
nlohmann::json SpecialTokensJson(const SpecialTokenNames& names);

// The family's defaults, then <model_dir>/tokenizer_config.json, then
// <model_dir>/special_tokens_map.json (which wins for special tokens, as in transformers),
// then, when tokenizer_config.json has no added_tokens_decoder, <model_dir>/added_tokens.json
// ({"token": id}); each only where the file exists.
absl::StatusOr<TokenizerConfig> ReadTokenizerConfig(const std::string& model_dir,
                                                    const TokenizerFamilyDescriptor& family);

}  // namespace relserve

#endif  // RELSERVE_SERVER_TOKENIZER_FILES_TOKENIZER_CONFIG_H_
