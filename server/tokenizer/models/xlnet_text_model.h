#ifndef RELSERVE_SERVER_TOKENIZER_MODELS_XLNET_TEXT_MODEL_H_
#define RELSERVE_SERVER_TOKENIZER_MODELS_XLNET_TEXT_MODEL_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "server/tokenizer/models/text_model.h"
#include "server/tokenizer/sentencepiece/sentencepiece_model.h"

namespace relserve {

// XLNetTokenizer's switches (tokenizer_config.json).
struct XlnetTextOptions {
  bool do_lower_case = false;
  bool remove_space = true;   // strip the text and collapse white-space runs to one space
  bool keep_accents = false;  // false: NFKD, then drop every combining character
};

// SentencePiece as XLNetTokenizer._tokenize uses it: preprocess_text (the options above, and
// `` and '' read as "), the model, then the digit-comma rule: a piece longer than one
// character that ends in a digit and "," is encoded again without its "," and its "▁"s, and
// "," follows as a piece of its own; a "▁" the new first piece gained is taken off again when
// the original piece had none.
class XlnetTextModel : public TextModel {
 public:
  XlnetTextModel(std::unique_ptr<SentencePieceModel> model, XlnetTextOptions options)
      : model_(std::move(model)), options_(options) {}

  absl::StatusOr<std::vector<TokenSpan>> Tokenize(const MappedText& text) const override;
  int vocab_size() const override { return model_->vocab_size(); }
  int PieceToId(std::string_view piece) const override { return model_->PieceToId(piece); }
  std::string IdToPiece(int id) const override { return model_->IdToPiece(id); }

  const SentencePieceModel& model() const { return *model_; }
  // preprocess_text, with the origin of every character kept.
  MappedText Preprocess(const MappedText& text) const;

 private:
  std::unique_ptr<SentencePieceModel> model_;
  XlnetTextOptions options_;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_TOKENIZER_MODELS_XLNET_TEXT_MODEL_H_
