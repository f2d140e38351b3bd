#include "server/tokenizer/models/xlm_roberta_text_model.h"

#include <algorithm>
#include <array>

#include "server/util/status_macros.h"

namespace relserve {
namespace {

// fairseq_tokens_to_ids below <mask>, by id.
constexpr std::array<const char*, 4> kFairseqTokens = {"<s>", "<pad>", "</s>", "<unk>"};
constexpr char kMask[] = "<mask>";

}  // namespace

absl::StatusOr<std::vector<TokenSpan>> XlmRobertaTextModel::Tokenize(const MappedText& text) const {
  ASSIGN_OR_RETURN(const std::vector<SentencePieceSpan> pieces, model_->Encode(text.text()));
  // _convert_token_to_id: spm_id + 1, or the unknown token where SentencePiece answers 0.
  std::vector<TokenSpan> out;
  out.reserve(pieces.size());
  for (const SentencePieceSpan& piece : pieces) {
    const auto [begin, end] =
        text.Span(static_cast<size_t>(piece.begin), static_cast<size_t>(piece.end));
    out.push_back(TokenSpan{piece.id > 0 ? piece.id + kFairseqOffset : kUnkId, begin, end});
  }
  return out;
}

int XlmRobertaTextModel::mask_id() const { return model_->vocab_size() + kFairseqOffset; }

// get_vocab()'s answer, {convert_ids_to_tokens(i): i for i in range(vocab_size)}: of two ids
// with the same piece the larger wins. SentencePiece ids 0-2 land on fairseq ids 1-3, whose
// pieces are fairseq's.
int XlmRobertaTextModel::PieceToId(std::string_view piece) const {
  int best = -1;
  if (piece == kMask) best = mask_id();
  for (size_t fairseq = 0; fairseq < kFairseqTokens.size(); ++fairseq) {
    if (piece == kFairseqTokens[fairseq]) best = std::max(best, static_cast<int>(fairseq));
  }
  const int id = model_->PieceToId(piece);
  if (id >= 0 && id + kFairseqOffset >= static_cast<int>(kFairseqTokens.size())) {
    best = std::max(best, id + kFairseqOffset);
  }
  return best;
}

std::string XlmRobertaTextModel::IdToPiece(int id) const {
  if (id >= 0 && id < static_cast<int>(kFairseqTokens.size())) return kFairseqTokens[id];
  if (id == mask_id()) return kMask;
  return model_->IdToPiece(id - kFairseqOffset);
}

}  // namespace relserve
