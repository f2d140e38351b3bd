#ifndef RELSERVE_SERVER_TOKENIZER_MODELS_T5_TEXT_MODEL_H_
#define RELSERVE_SERVER_TOKENIZER_MODELS_T5_TEXT_MODEL_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "server/tokenizer/models/text_model.h"
#include "server/tokenizer/sentencepiece/sentencepiece_model.h"

namespace relserve {

// T5Tokenizer._tokenize with legacy=False, over a SentencePiece model loaded without its dummy
// prefix: a stretch of text that starts with a space or "▁" is encoded behind the unknown
// token's text, whose pieces are then dropped, so that SentencePiece keeps the leading space
// as "▁" instead of stripping it; any other stretch is encoded as it is (no "▁" added). The
// stretch after a special token written in the text therefore starts a word only where a space
// precedes it.
class T5TextModel : public TextModel {
 public:
  // `unk_token`: the unknown token's text (T5's "<unk>").
  static absl::StatusOr<std::unique_ptr<T5TextModel>> Create(
      std::unique_ptr<SentencePieceModel> model, const std::string& unk_token);

  absl::StatusOr<std::vector<TokenSpan>> Tokenize(const MappedText& text) const override;
  int vocab_size() const override { return model_->vocab_size(); }
  int PieceToId(std::string_view piece) const override { return model_->PieceToId(piece); }
  std::string IdToPiece(int id) const override { return model_->IdToPiece(id); }

 private:
  T5TextModel(std::unique_ptr<SentencePieceModel> model, std::string unk_token, size_t unk_length)
      : model_(std::move(model)), unk_token_(std::move(unk_token)), unk_length_(unk_length) {}

  std::unique_ptr<SentencePieceModel> model_;
  std::string unk_token_;
  size_t unk_length_;  // unk_token_length: the pieces of unk_token_ alone
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_TOKENIZER_MODELS_T5_TEXT_MODEL_H_
