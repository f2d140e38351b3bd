#include "server/tokenizer/files/tokenizer_json_model.h"

#include <map>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/tokenizer/text/unicode_chars.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

using ModelType = TokenizerJson::ModelType;

const char* ModelTypeName(ModelType type) {
  switch (type) {
    case ModelType::kUnigram: return "Unigram";
    case ModelType::kWordPiece: return "WordPiece";
    case ModelType::kBpe: return "BPE";
  }
  return "unknown";
}

bool Has(const TokenizerJson& json, const char* type) {
  for (const TokenizerJson::Component& component : json.components) {
    if (component.type == type) return true;
  }
  return false;
}

// XLNetConverter.vocab: check_number_comma(piece) is false for a piece of two or more
// characters that ends in a digit and a comma.
bool EndsInDigitComma(const std::string& piece) {
  std::vector<char32_t> chars;
  for (size_t i = 0; i < piece.size();) chars.push_back(unicode::DecodeUtf8(piece, &i));
  return chars.size() >= 2 && chars.back() == U',' &&
         unicode::IsPythonDigit(chars[chars.size() - 2]);
}

bool IsBytePiece(const std::string& piece) {
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); };
  return piece.size() == 6 && piece.compare(0, 3, "<0x") == 0 && hex(piece[3]) && hex(piece[4]) &&
         piece[5] == '>';
}

// The special tokens the post-processor places, by the role they play in the family's
// template, when its single template has the family's shape.
void ApplyTemplateRoles(const TokenizerJson::Template& t, const TokenizerFamilyDescriptor& family,
                        SpecialTokenNames* names) {
  const std::vector<FamilyTemplateItem>& shape = family.single_template;
  if (t.single.size() != shape.size()) return;
  for (size_t i = 0; i < shape.size(); ++i) {
    const bool text = shape[i].role == TemplateRole::kFirstText ||
                      shape[i].role == TemplateRole::kSecondText;
    if (text != (t.single[i].sequence >= 0)) return;
  }
  for (size_t i = 0; i < shape.size(); ++i) {
    const std::string& name = t.single[i].name;
    switch (shape[i].role) {
      case TemplateRole::kFirstText:
      case TemplateRole::kSecondText: break;
      case TemplateRole::kCls: names->cls = name; break;
      case TemplateRole::kSep:
        names->sep = name;
        if (family.sep_is_eos) names->eos = name;
        break;
      case TemplateRole::kEos: names->eos = name; break;
    }
  }
}

}  // namespace

absl::Status ApplyTokenizerJson(const TokenizerJson& json, const TokenizerFamilyDescriptor& descriptor,
                                const std::string& source, TokenizerConfig* config) {
  const ModelType wanted = descriptor.json_model;
  if (json.model_type != wanted) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": holds a ", ModelTypeName(json.model_type), " model, but a ",
        descriptor.name, " tokenizer reads a ", ModelTypeName(wanted), " model"));
  }
  const std::set<std::string>& allowed = descriptor.json_components;
  for (const TokenizerJson::Component& component : json.components) {
    if (allowed.count(component.type) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": ", component.place, " is a ", component.type, ", which the ",
          descriptor.name, " tokenizer has no counterpart for (it reads ",
          absl::StrJoin(allowed, ", "), ")"));
    }
  }
  SpecialTokenNames& names = config->special_tokens;
  switch (wanted) {
    case ModelType::kUnigram:
      if (!json.metaspace) {
        return absl::InvalidArgumentError(absl::StrCat(
            source, ": a Unigram tokenizer without a Metaspace pre-tokenizer; SentencePiece "
                    "models mark spaces with \"\xe2\x96\x81\""));
      }
      if (descriptor.has_legacy) {
        // _get_prepend_scheme: "first" is T5Tokenizer's legacy=False with add_prefix_space,
        // "never" without it.
        config->legacy = json.prepend_scheme == "always";
        if (!config->legacy) config->add_prefix_space = json.prepend_scheme == "first";
      } else if (json.prepend_scheme == "first") {
        return absl::InvalidArgumentError(absl::StrCat(
            source, ": Metaspace's prepend_scheme \"first\" is T5's (legacy=false); the ",
            descriptor.name, " tokenizer has \"always\" and \"never\""));
      }
      if (json.replace_quotes && !descriptor.replaces_quotes) {
        return absl::InvalidArgumentError(absl::StrCat(
            source, ": its normalizer replaces `` and '' by \", which XLNet's tokenizer does and the ",
            descriptor.name, " tokenizer does not"));
      }
      config->do_lower_case = json.lowercase;
      config->split_by_punct = json.split_on_punctuation;
      if (descriptor.has_keep_accents) config->keep_accents = !json.nfkd_strip_accents;
      names.unk = json.unigram_vocab[static_cast<size_t>(json.unk_id)].first;
      break;
    case ModelType::kWordPiece:
      if (!Has(json, "BertNormalizer") || !json.bert_pre_tokenizer) {
        return absl::InvalidArgumentError(absl::StrCat(
            source, ": a WordPiece tokenizer needs a BertNormalizer and a BertPreTokenizer, "
                    "as BertTokenizer cleans and splits text"));
      }
      config->do_basic_tokenize = true;
      config->do_lower_case = json.lowercase;
      config->strip_accents = json.strip_accents;
      config->tokenize_chinese_chars = json.handle_chinese_chars;
      config->max_input_chars_per_word = json.max_input_chars_per_word;
      names.unk = json.unk_token;
      break;
    case ModelType::kBpe:
      if (!json.byte_level) {
        return absl::InvalidArgumentError(absl::StrCat(
            source, ": a BPE tokenizer without a ByteLevel pre-tokenizer; relserve reads "
                    "byte-level BPE (RoBERTa's)"));
      }
      config->add_prefix_space = json.add_prefix_space;
      if (!json.unk_token.empty()) names.unk = json.unk_token;
      break;
  }
  for (const auto& [id, entry] : json.added_tokens) {
    config->token_flags[entry.content] = entry.flags;
    config->added_tokens[id] = entry;
  }
  if (json.post_processor.has_value()) ApplyTemplateRoles(*json.post_processor, descriptor, &names);
  return absl::OkStatus();
}

absl::StatusOr<SentencePieceModelSpec> SentencePieceSpecFromJson(
    const TokenizerJson& json, const TokenizerFamilyDescriptor& family) {
  using PieceType = SentencePieceModelSpec::PieceType;
  std::map<int32_t, const AddedTokenEntry*> added;
  for (const auto& [id, entry] : json.added_tokens) added[id] = &entry;

  SentencePieceModelSpec spec;
  spec.pieces.reserve(json.unigram_vocab.size());
  for (size_t i = 0; i < json.unigram_vocab.size(); ++i) {
    const auto& [piece, score] = json.unigram_vocab[i];
    SentencePieceModelSpec::Piece out;
    out.piece = piece;
    double restored = score;
    if (family.lowers_digit_comma_scores && EndsInDigitComma(piece)) restored += 100.0;
    out.score = static_cast<float>(restored);
    auto token = added.find(static_cast<int32_t>(i));
    const bool is_added = token != added.end() && token->second->content == piece;
    if (static_cast<int>(i) == json.unk_id) {
      out.type = PieceType::kUnknown;
    } else if (is_added && token->second->flags.special) {
      out.type = PieceType::kControl;
    } else if (json.byte_fallback && IsBytePiece(piece)) {
      out.type = PieceType::kByte;
    } else if (is_added || out.score == 0.0f) {
      out.type = PieceType::kUserDefined;
    }
    spec.pieces.push_back(std::move(out));
  }
  spec.unk_piece = json.unigram_vocab[static_cast<size_t>(json.unk_id)].first;
  spec.byte_fallback = json.byte_fallback;
  spec.precompiled_charsmap = json.precompiled_charsmap;
  spec.normalizer_name = spec.precompiled_charsmap.empty() ? "identity" : "nmt_nfkc";
  // "first" (T5's legacy=False) loads the model without its dummy prefix too: T5TextModel and
  // the tokenizer place the "▁" themselves.
  spec.add_dummy_prefix = json.prepend_scheme == "always";
  spec.remove_extra_whitespaces = json.collapse_spaces;
  spec.escape_whitespaces = true;
  return spec;
}

absl::StatusOr<WordPieceVocab> WordPieceVocabFromJson(const TokenizerJson& json,
                                                      const std::string& source) {
  std::vector<std::string> tokens(json.vocab.size());
  std::vector<bool> seen(json.vocab.size(), false);
  for (const auto& [token, id] : json.vocab) {
    const auto index = static_cast<size_t>(id);
    if (index >= tokens.size() || seen[index]) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": model.vocab gives \"", token, "\" the id ", id,
          "; a WordPiece vocabulary of ", tokens.size(), " tokens has each id in [0, ",
          tokens.size(), ") once"));
    }
    seen[index] = true;
    tokens[index] = token;
  }
  return WordPieceVocab::FromTokens(std::move(tokens));
}

absl::StatusOr<ByteLevelBpeVocab> ByteLevelBpeVocabFromJson(const TokenizerJson& json,
                                                            const std::string& source) {
  if (json.vocab.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": model.vocab is empty"));
  }
  return ByteLevelBpeVocab::FromParts(json.vocab, json.merges);
}

}  // namespace relserve
