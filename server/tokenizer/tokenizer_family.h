#ifndef RELSERVE_SERVER_TOKENIZER_TOKENIZER_FAMILY_H_
#define RELSERVE_SERVER_TOKENIZER_TOKENIZER_FAMILY_H_

namespace relserve {

// Which model family's special tokens and template a tokenizer follows.
enum class TokenizerFamily {
  kDeberta,  // DeBERTa-v2/v3: [CLS] a [SEP] (b [SEP])
  kT5,       // T5: a </s> (b </s>)
  kBert,     // BERT, ELECTRA (WordPiece vocab.txt): [CLS] a [SEP] (b [SEP])
  kRoberta,  // RoBERTa, XLM-RoBERTa: <s> a </s> (</s> b </s>)
  kMpnet,    // MPNet: <s> a </s> (</s> b </s>)
  kXlnet,    // XLNet, SentencePiece:           a <sep> (b <sep>) <cls>, padded on the left
};

// A C string: Debian's Abseil cannot StrCat a std::string_view.
inline const char* TokenizerFamilyName(TokenizerFamily family) {
  return family == TokenizerFamily::kDeberta ? "DeBERTa" : "T5";
}

}  // namespace relserve

#endif  // RELSERVE_SERVER_TOKENIZER_TOKENIZER_FAMILY_H_
