#include "server/tokenizer/models/t5_text_model.h"

#include "server/tokenizer/text/unicode_chars.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

constexpr std::string_view kSpiece = "\xe2\x96\x81";  // "▁"

}  // namespace

absl::StatusOr<std::unique_ptr<T5TextModel>> T5TextModel::Create(
    std::unique_ptr<SentencePieceModel> model, const std::string& unk_token) {
  ASSIGN_OR_RETURN(const std::vector<SentencePieceSpan> pieces, model->Encode(unk_token));
  return std::unique_ptr<T5TextModel>(new T5TextModel(std::move(model), unk_token, pieces.size()));
}

absl::StatusOr<std::vector<TokenSpan>> T5TextModel::Tokenize(const MappedText& text) const {
  const std::string& s = text.text();
  const bool leading_space = (!s.empty() && s[0] == ' ') || s.compare(0, kSpiece.size(), kSpiece) == 0;
  MappedText input;
  size_t skip = 0;
  if (leading_space) {
    // 1. Encode "<unk>" + text; 2. drop the unknown token's pieces (all of them only when
    // there are that many).
    const auto [origin, unused] = text.Span(0, 0);
    size_t i = 0;
    while (i < unk_token_.size()) input.Append(unicode::DecodeUtf8(unk_token_, &i), origin, origin);
    input.AppendRange(text, 0, text.size());
    skip = unk_length_;
  } else {
    input = text;
  }
  ASSIGN_OR_RETURN(const std::vector<SentencePieceSpan> pieces, model_->Encode(input.text()));
  if (pieces.size() < skip) skip = 0;
  std::vector<TokenSpan> out;
  out.reserve(pieces.size() - skip);
  for (size_t k = skip; k < pieces.size(); ++k) {
    const SentencePieceSpan& piece = pieces[k];
    const auto [begin, end] =
        input.Span(static_cast<size_t>(piece.begin), static_cast<size_t>(piece.end));
    out.push_back(TokenSpan{piece.id, begin, end});
  }
  return out;
}

}  // namespace relserve
