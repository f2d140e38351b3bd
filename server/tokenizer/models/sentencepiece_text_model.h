#ifndef RELSERVE_SERVER_TOKENIZER_MODELS_SENTENCEPIECE_TEXT_MODEL_H_
#define RELSERVE_SERVER_TOKENIZER_MODELS_SENTENCEPIECE_TEXT_MODEL_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "server/tokenizer/models/text_model.h"
#include "server/tokenizer/sentencepiece/sentencepiece_model.h"

namespace relserve {

// SentencePiece as DebertaV2Tokenizer and T5Tokenizer use it: the text (lower-cased before,
// where the tokenizer lowers) goes to the model as it is.
class SentencePieceTextModel : public TextModel {
 public:
  // split_by_punct: DebertaV2Tokenizer's switch, each punctuation character (BERT's
  // definition) encoded on its own and the stretches between them separately.
  explicit SentencePieceTextModel(std::unique_ptr<SentencePieceModel> model,
                                  bool split_by_punct = false)
      : model_(std::move(model)), split_by_punct_(split_by_punct) {}

  absl::StatusOr<std::vector<TokenSpan>> Tokenize(const MappedText& text) const override;
  int vocab_size() const override { return model_->vocab_size(); }
  int PieceToId(std::string_view piece) const override { return model_->PieceToId(piece); }
  std::string IdToPiece(int id) const override { return model_->IdToPiece(id); }

  const SentencePieceModel& model() const { return *model_; }

 private:
  absl::Status EncodeInto(const MappedText& text, std::vector<TokenSpan>* out) const;

  std::unique_ptr<SentencePieceModel> model_;
  bool split_by_punct_;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_TOKENIZER_MODELS_SENTENCEPIECE_TEXT_MODEL_H_
