#ifndef RELSERVE_SERVER_TOKENIZER_MODELS_XLM_ROBERTA_TEXT_MODEL_H_
#define RELSERVE_SERVER_TOKENIZER_MODELS_XLM_ROBERTA_TEXT_MODEL_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "server/tokenizer/models/text_model.h"
#include "server/tokenizer/sentencepiece/sentencepiece_model.h"

namespace relserve {

// SentencePiece with fairseq's ids, as XLMRobertaTokenizer reads sentencepiece.bpe.model:
// <s> 0, <pad> 1, </s> 2, <unk> 3, then every other piece at its SentencePiece id plus one
// (the model's own <unk>, <s> and </s> at 0-2 are shadowed); a piece SentencePiece does not
// know is <unk>; <mask> comes last, after the model's pieces. A piece both fairseq and the
// model have (<pad> in some models) answers with the larger id, as get_vocab() does.
class XlmRobertaTextModel : public TextModel {
 public:
  explicit XlmRobertaTextModel(std::unique_ptr<SentencePieceModel> model)
      : model_(std::move(model)) {}

  absl::StatusOr<std::vector<TokenSpan>> Tokenize(const MappedText& text) const override;
  // The four fairseq tokens, the SentencePiece model's pieces shifted by one, and <mask>.
  int vocab_size() const override { return mask_id() + 1; }
  int PieceToId(std::string_view piece) const override;
  std::string IdToPiece(int id) const override;

 private:
  int mask_id() const;

  static constexpr int kFairseqOffset = 1;
  static constexpr int kUnkId = 3;

  std::unique_ptr<SentencePieceModel> model_;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_TOKENIZER_MODELS_XLM_ROBERTA_TEXT_MODEL_H_
