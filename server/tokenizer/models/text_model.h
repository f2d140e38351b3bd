#ifndef RELSERVE_SERVER_TOKENIZER_MODELS_TEXT_MODEL_H_
#define RELSERVE_SERVER_TOKENIZER_MODELS_TEXT_MODEL_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "server/tokenizer/text/mapped_text.h"

namespace relserve {

// One token of a text: its id (-1: not in the vocabulary, the tokenizer's unknown token) and
// the bytes [begin, end) of the caller's text it stands for.
struct TokenSpan {
  int32_t id = -1;
  int32_t begin = 0;
  int32_t end = 0;
};

// The vocabulary model of a tokenizer family (SentencePiece, WordPiece, byte-level BPE) with
// the normalization its transformers tokenizer applies first: what _tokenize does to a
// stretch of text that holds no added token. Implementations are immutable once loaded, so
// Tokenize may run on many threads at once.
class TextModel {
 public:
  virtual ~TextModel() = default;

  // The tokens of `text`, their spans taken from its mapping to the caller's text.
  virtual absl::StatusOr<std::vector<TokenSpan>> Tokenize(const MappedText& text) const = 0;
  // Ids the vocabulary assigns lie in [0, vocab_size()).
  virtual int vocab_size() const = 0;
  // The id of exactly this token; -1 when the vocabulary lacks it.
  virtual int PieceToId(std::string_view piece) const = 0;
  // "" for an id outside the vocabulary.
  virtual std::string IdToPiece(int id) const = 0;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_TOKENIZER_MODELS_TEXT_MODEL_H_
