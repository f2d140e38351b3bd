#ifndef RELSERVE_SERVER_TOKENIZER_DESCRIPTOR_TOKENIZER_FAMILY_DESCRIPTOR_H_
#define RELSERVE_SERVER_TOKENIZER_DESCRIPTOR_TOKENIZER_FAMILY_DESCRIPTOR_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/tokenizer/descriptor/special_token_names.h"
#include "server/tokenizer/descriptor/tokenizer_family.h"
#include "server/tokenizer/models/text_model.h"
#include "server/tokenizer/sentencepiece/sentencepiece_c_api.h"
#include "server/tokenizer/sentencepiece/sentencepiece_module.h"
#include "server/tokenizer/text/mapped_text.h"

namespace relserve {

// What a descriptor's hooks are handed, from files/ (the readers of a model directory's
// tokenizer files), which reads descriptors: named here, not included.
struct TokenizerConfig;
struct TokenizerFiles;
struct TokenizerJson;

// The kind of vocabulary model a tokenizer.json holds (TokenizerJson::ModelType).
enum class VocabModelType { kUnigram, kWordPiece, kBpe };

// A family's text model, and the ids its SentencePiece model reserved for special roles
// (-1 each where it has none, or is no SentencePiece model).
struct LoadedTextModel {
  std::unique_ptr<TextModel> model;
  RelserveSpmReservedIds reserved{-1, -1, -1, -1};
};

// Builds the family's text model from its vocabulary files, or from tokenizer.json where json
// is not null (files.tokenizer_json is then its path), with the switches of config; a
// SentencePiece model is loaded through the module `sentencepiece` says.
using TextModelFactory = absl::StatusOr<LoadedTextModel> (*)(const TokenizerFiles& files,
                                                            const TokenizerJson* json,
                                                            const TokenizerConfig& config,
                                                            const SentencePieceModuleOptions& sentencepiece);

// What a family's slow tokenizer does around its text model beyond the switches of its
// descriptor, made once per tokenizer from its config: T5Tokenizer with legacy=False
// (families/t5_family.cc) reads "▁" in the text as a space, puts a "▁" before the text and drops
// that "▁" again before a special token.
class FamilyTextRules {
 public:
  virtual ~FamilyTextRules() = default;
  // A non-empty text (lowered where the tokenizer lowers) before it is split on added tokens.
  virtual MappedText BeforeSplit(const MappedText& text) const = 0;
  // The text's tokens after the split: whether the first came from the text model, and whether
  // the second is a special added token.
  virtual void AfterSplit(bool first_from_model, bool second_is_special,
                          std::vector<TokenSpan>* tokens) const = 0;
};

// The rules for a tokenizer of this config over this text model; null where there are none.
using TextRulesFactory = std::unique_ptr<FamilyTextRules> (*)(const TokenizerConfig& config,
                                                              const TextModel& model);

// Text from the tokens of ids (pieces, added tokens as their content), as the `tokenizers`
// library's decoder of the family's tokenizer.json writes it (models/token_decoders.h).
using TokenDecoderFunction = std::string (*)(const std::vector<std::string>& tokens);

// One item of a family's template: a text, or the token of a special role.
enum class TemplateRole { kFirstText, kSecondText, kCls, kSep, kEos };
struct FamilyTemplateItem {
  TemplateRole role = TemplateRole::kFirstText;
  int32_t type_id = 0;
  // TemplatePiece::unless_text_ends_with_it (T5Tokenizer's _add_eos_if_not_present).
  bool unless_text_ends_with_it = false;
};

// The ids DeBERTa's and T5's SentencePiece roles fall back on (ResolveSpecialTokenIds);
// -1 for a role the family does not resolve this way.
struct SentencePieceRoleDefaults {
  int32_t pad = 0;
  int32_t cls = -1;
  int32_t sep = -1;
  int32_t eos = -1;  // -1: the sep token ends a sequence
  int32_t unk = -1;
};

// Everything that sets one tokenizer family apart: the files it reads, its defaults, its
// template and padding, the tokenizer.json components it accepts, how its text model is built
// and how ids are decoded. One per family (families/); the tokenizer's factory looks it up
// (Describe, families/tokenizer_families.h) and hands it to every reader.
struct TokenizerFamilyDescriptor {
  TokenizerFamily family = TokenizerFamily::kBert;
  // For messages; a C string, as Debian's Abseil cannot StrCat a std::string_view.
  const char* name = "";
  // transformers' tokenizer classes (without "Fast") that stand for the family
  // (tokenizer_class.h).
  std::vector<std::string> tokenizer_classes;

  // Vocabulary files in a model directory, the usual name first (tokenizer_files.h); where
  // needs_every_vocab_file, the vocabulary is made of all of them (RoBERTa's vocab.json and
  // merges.txt: TokenizerFiles::vocab and ::merges), else the first that is there.
  std::vector<std::string> vocab_files;
  bool needs_every_vocab_file = false;

  // The defaults of the family's tokenizer class (tokenizer_config.h).
  SpecialTokenNames special_tokens;
  bool do_lower_case = false;
  // Whether the class has a do_lower_case attribute at all: transformers lowers nothing for
  // one that has none (T5Tokenizer, XLMRobertaTokenizer), whatever the files say.
  bool has_do_lower_case = true;
  // Whether text is lowered by the class's basic tokenizer, so that do_basic_tokenize false
  // leaves it as it is (BertTokenizer, MPNetTokenizer).
  bool lowers_in_basic_tokenizer = false;
  // RobertaTokenizer's add_prefix_space: a space before text that starts with none.
  bool has_add_prefix_space = false;
  // T5Tokenizer's legacy switch (t5_text_model.h), and its add_prefix_space with legacy false;
  // in tokenizer.json, Metaspace's prepend_scheme.
  bool has_legacy = false;
  // XLNetTokenizer's keep_accents (tokenizer.json: NFKD and StripAccents) and its replacement
  // of `` and '' by " .
  bool has_keep_accents = false;
  bool replaces_quotes = false;
  // XLNet's tokenizer.json converter lowers the score of pieces that end in a digit and a
  // comma by 100 (SentencePieceSpecFromJson undoes it).
  bool lowers_digit_comma_scores = false;

  // Set for the families whose pad, unk, cls, sep and eos ids follow their SentencePiece
  // model (DeBERTa, T5; ResolveSpecialTokenIds); the others take the ids of their tokens.
  std::optional<SentencePieceRoleDefaults> sentencepiece_roles;
  // The mask token, handed as a plain string, eats the white space before it (MPNet, XLNet,
  // RoBERTa, XLM-RoBERTa).
  bool mask_strips_left = false;
  // T5Tokenizer's <extra_id_N> tokens after the vocabulary (TokenizerConfig::extra_ids).
  bool has_extra_ids = false;

  // The template of the slow tokenizer (FamilyTemplate): around one text and around a pair.
  std::vector<FamilyTemplateItem> single_template;
  std::vector<FamilyTemplateItem> pair_template;
  // Whether the sep token of the template is the eos token too (eos_token == sep_token).
  bool sep_is_eos = false;
  // Whether the family's models read token type ids.
  bool uses_token_types = false;

  // Padding: on the left (XLNet) or the right, with this token type id.
  bool pads_left = false;
  int32_t pad_token_type_id = 0;

  // tokenizer.json: the kind of model it must hold, and the normalizers and pre-tokenizers
  // that stand for a switch (or a fixed step) of the family's slow tokenizer (transformers'
  // converters write no others).
  VocabModelType json_model = VocabModelType::kUnigram;
  std::set<std::string> json_components;

  TextModelFactory load_text_model = nullptr;
  TokenDecoderFunction decode = nullptr;
  // Unset for a family whose slow tokenizer does nothing around its text model.
  TextRulesFactory text_rules = nullptr;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_TOKENIZER_DESCRIPTOR_TOKENIZER_FAMILY_DESCRIPTOR_H_
