#include "server/tokenizer/models/sentencepiece_text_model.h"

#include "server/tokenizer/text/unicode_chars.h"
#include "server/util/status_macros.h"

namespace relserve {

absl::Status SentencePieceTextModel::EncodeInto(const MappedText& text,
                                                std::vector<TokenSpan>* out) const {
  ASSIGN_OR_RETURN(const std::vector<SentencePieceSpan> pieces, model_->Encode(text.text()));
  out->reserve(out->size() + pieces.size());
  for (const SentencePieceSpan& piece : pieces) {
    const auto [begin, end] =
        text.Span(static_cast<size_t>(piece.begin), static_cast<size_t>(piece.end));
    out->push_back(TokenSpan{piece.id, begin, end});
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<TokenSpan>> SentencePieceTextModel::Tokenize(
    const MappedText& text) const {
  std::vector<TokenSpan> out;
  if (!split_by_punct_) {
    RETURN_IF_ERROR(EncodeInto(text, &out));
    return out;
  }
  // SPMTokenizer._run_split_on_punc: a punctuation character is a word of its own, and the
  // characters between (spaces included) one word; each word is encoded on its own.
  std::vector<MappedText> words;
  size_t start = 0;
  bool in_word = false;
  text.ForEachChar([&](char32_t c, size_t b, size_t e) {
    if (unicode::IsBertPunctuation(c)) {
      if (in_word) words.push_back(text.Substr(start, b));
      words.push_back(text.Substr(b, e));
      in_word = false;
    } else if (!in_word) {
      start = b;
      in_word = true;
    }
  });
  if (in_word) words.push_back(text.Substr(start, text.size()));
  for (const MappedText& word : words) RETURN_IF_ERROR(EncodeInto(word, &out));
  return out;
}

}  // namespace relserve
