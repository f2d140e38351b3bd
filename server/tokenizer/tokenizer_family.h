#ifndef RELSERVE_SERVER_TOKENIZER_TOKENIZER_FAMILY_H_
#define RELSERVE_SERVER_TOKENIZER_TOKENIZER_FAMILY_H_

#include <optional>
#include <string_view>

namespace relserve {

// Which model family's vocabulary files, special tokens and template a tokenizer follows.
enum class TokenizerFamily {
  kDeberta,  // DeBERTa-v2/v3, SentencePiece:  [CLS] a [SEP] (b [SEP])
  kT5,       // T5, SentencePiece:              a </s> (b </s>)
  kBert,     // BERT, WordPiece:                [CLS] a [SEP] (b [SEP])
  kMpnet,    // MPNet, WordPiece:               <s> a </s> (</s> b </s>)
  kXlnet,    // XLNet, SentencePiece:           a <sep> (b <sep>) <cls>, padded on the left
  kRoberta,  // RoBERTa, byte-level BPE:        <s> a </s> (</s> b </s>)
};

// A C string: Debian's Abseil cannot StrCat a std::string_view.
inline const char* TokenizerFamilyName(TokenizerFamily family) {
  switch (family) {
    case TokenizerFamily::kDeberta: return "DeBERTa";
    case TokenizerFamily::kT5: return "T5";
    case TokenizerFamily::kBert: return "BERT";
    case TokenizerFamily::kMpnet: return "MPNet";
    case TokenizerFamily::kXlnet: return "XLNet";
    case TokenizerFamily::kRoberta: return "RoBERTa";
  }
  return "unknown";
}

// The tokenizer family of a config.json `model_type`, as transformers' AutoTokenizer pairs
// them; nullopt for a model type without one here.
inline std::optional<TokenizerFamily> TokenizerFamilyForModelType(std::string_view model_type) {
  if (model_type == "deberta-v2") return TokenizerFamily::kDeberta;
  if (model_type == "t5" || model_type == "mt5") return TokenizerFamily::kT5;
  if (model_type == "bert") return TokenizerFamily::kBert;
  if (model_type == "mpnet") return TokenizerFamily::kMpnet;
  if (model_type == "xlnet") return TokenizerFamily::kXlnet;
  if (model_type == "roberta") return TokenizerFamily::kRoberta;
  return std::nullopt;
}

}  // namespace relserve

#endif  // RELSERVE_SERVER_TOKENIZER_TOKENIZER_FAMILY_H_
