#include "server/tokenizer/sentencepiece_text_model.h"

#include "server/util/status_macros.h"

namespace relserve {

absl::StatusOr<std::vector<TokenSpan>> SentencePieceTextModel::Tokenize(
    const MappedText& text) const {
  std::vector<SentencePieceSpan> pieces;
  if (ascii_lower_case_) {
    std::string lowered = text.text();
    for (char& c : lowered) {
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
    ASSIGN_OR_RETURN(pieces, model_->Encode(lowered));
  } else {
    ASSIGN_OR_RETURN(pieces, model_->Encode(text.text()));
  }
  std::vector<TokenSpan> out;
  out.reserve(pieces.size());
  for (const SentencePieceSpan& piece : pieces) {
    const auto [begin, end] =
        text.Span(static_cast<size_t>(piece.begin), static_cast<size_t>(piece.end));
    out.push_back(TokenSpan{piece.id, begin, end});
  }
  return out;
}

}  // namespace relserve
