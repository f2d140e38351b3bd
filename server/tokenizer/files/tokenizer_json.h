#ifndef RELSERVE_SERVER_TOKENIZER_FILES_TOKENIZER_JSON_H_
#define RELSERVE_SERVER_TOKENIZER_FILES_TOKENIZER_JSON_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "server/tokenizer/descriptor/tokenizer_family_descriptor.h"
#include "server/tokenizer/files/tokenizer_config.h"

namespace relserve {

// A special token of a template as tokenizer.json names it: its name and ids.
struct TokenizerJsonTemplateItem {
  int sequence = -1;         // -1: special token; 0: $A; 1: $B
  std::string name;          // a special token's name
  std::vector<int32_t> ids;  // a special token's ids
  int32_t type_id = 0;
};

// What relserve reads from tokenizer.json, the file in which the `tokenizers` library keeps a
// fast tokenizer: its vocabulary model, what its normalizer and pre-tokenizer do (as the
// switches of the slow tokenizers that transformers' converters turn into these components),
// its added tokens and its post-processor. Parsing refuses every component whose behaviour
// the slow tokenizers cannot reproduce, naming it, rather than tokenizing differently.
struct TokenizerJson {
  using ModelType = VocabModelType;
  ModelType model_type = ModelType::kUnigram;

  // Unigram: the pieces with their scores, by id; the unknown piece's id; byte fallback.
  std::vector<std::pair<std::string, double>> unigram_vocab;
  int unk_id = -1;
  bool byte_fallback = false;
  // WordPiece and BPE: token -> id, in the file's order.
  std::vector<std::pair<std::string, int32_t>> vocab;
  std::string unk_token;  // WordPiece; BPE's when it has one
  int max_input_chars_per_word = 100;
  // BPE: the merges, highest priority first.
  std::vector<std::pair<std::string, std::string>> merges;

  // Normalizer.
  bool lowercase = false;             // Lowercase, or BertNormalizer's lowercase
  std::optional<bool> strip_accents;  // BertNormalizer's (null: follows lowercase)
  bool handle_chinese_chars = true;   // BertNormalizer's
  bool nfkd_strip_accents = false;    // NFKD followed by StripAccents (XLNet without keep_accents)
  // Replace " {2,}", or a WhitespaceSplit pre-tokenizer: SentencePiece's remove_extra_whitespaces.
  bool collapse_spaces = false;
  bool replace_quotes = false;        // Replace `` and '' by " (XLNet)
  std::string precompiled_charsmap;   // Precompiled's, decoded; empty when none
  // Pre-tokenizer.
  bool metaspace = false;             // Metaspace: SentencePiece's "▁" for spaces
  std::string prepend_scheme = "always";  // Metaspace's: always, first or never
  bool split_on_punctuation = false;  // Punctuation, behaviour Isolated (DeBERTa split_by_punct)
  bool bert_pre_tokenizer = false;    // BertPreTokenizer
  bool byte_level = false;            // ByteLevel (GPT-2's pattern and byte stand-ins)
  bool add_prefix_space = false;      // ByteLevel's

  // Every normalizer and pre-tokenizer, Sequences flattened: its place in the file
  // ("pre_tokenizer.pretokenizers[1]") and its type, so that a family can refuse those its
  // slow tokenizer has no counterpart for.
  struct Component {
    std::string place;
    std::string type;
  };
  std::vector<Component> components;

  // added_tokens: id -> token and flags.
  std::vector<std::pair<int32_t, AddedTokenEntry>> added_tokens;

  // The post-processor; unset when tokenizer.json has none (no special tokens are added).
  struct Template {
    std::vector<TokenizerJsonTemplateItem> single;
    std::vector<TokenizerJsonTemplateItem> pair;
  };
  std::optional<Template> post_processor;
};

// Reads tokenizer.json as written by the `tokenizers` library (format "1.0"). Accepted:
//   model           Unigram, WordPiece (prefix "##"), BPE (byte-level, no prefix or suffix)
//   normalizer      Sequence of Lowercase, Strip, Precompiled, NFKD, StripAccents,
//                   Replace (" {2,}" by " " or "▁"; `` and '' by "), BertNormalizer (cleaning
//                   text), or null
//   pre_tokenizer   Sequence of Metaspace ("▁"), WhitespaceSplit, Punctuation (Isolated),
//                   BertPreTokenizer, ByteLevel (with its regex), or null
//   post_processor  TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel, a
//                   Sequence of those, or null
// INVALID_ARGUMENT naming `source`, the component's place ("normalizer.normalizers[1]") and its
// type for anything else, and for missing or mistyped fields.
absl::StatusOr<TokenizerJson> ParseTokenizerJson(const nlohmann::json& json,
                                                 const std::string& source);
// NOT_FOUND when the file is missing.
absl::StatusOr<TokenizerJson> ReadTokenizerJson(const std::string& path);

}  // namespace relserve

#endif  // RELSERVE_SERVER_TOKENIZER_FILES_TOKENIZER_JSON_H_
