#ifndef RELSERVE_SERVER_TOKENIZER_TOKENIZER_H_
#define RELSERVE_SERVER_TOKENIZER_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "server/tokenizer/special_tokens.h"
#include "server/tokenizer/tokenizer_family.h"
#include "server/tokenizer/truncation.h"

namespace relserve {

class SentencePieceModel;
struct SentencePieceSpan;

struct TokenizeOptions {
  int max_length = 0;    // total length including special tokens; 0 = the tokenizer's default
  bool truncate = true;  // false: over-long input is INVALID_ARGUMENT naming the lengths
  TruncationDirection direction = TruncationDirection::kRight;  // which end of a text is cut
};

struct Encoding {
  std::vector<int32_t> input_ids;
  std::vector<int32_t> token_type_ids;  // 0 for the first text, 1 for the second (DeBERTa pairs)
  std::vector<int32_t> attention_mask;  // all 1
  // Byte span [begin, end) in the text the token came from, as SentencePiece reports it: a
  // "▁word" piece covers the space before the word, a bare "▁" may cover nothing (begin == end).
  // (0, 0) for special tokens.
  std::vector<std::pair<int32_t, int32_t>> offsets;
  std::vector<int8_t> sequence_ids;  // -1 special token, 0 first text, 1 second text
  bool truncated = false;
  int32_t untruncated_length = 0;  // length with special tokens before truncation
};

// SentencePiece tokenization with the template of a model family, as transformers'
// DebertaV2Tokenizer and T5Tokenizer apply it:
//   DeBERTa: [CLS] a [SEP]    and  [CLS] a [SEP] b [SEP]  (token types 0 0 0 / 1 1)
//   T5:      a </s>           and  a </s> b </s>          (token types all 0)
// Text is passed to SentencePiece as is: strings like "[SEP]" inside it are ordinary text,
// never special tokens. Immutable after loading, so Encode may run on many threads at once.
class Tokenizer {
 public:
  // Loads from a Hugging Face model directory: spm.model (DeBERTa-v2/v3) or spiece.model (T5),
  // the family's usual name tried first; plus tokenizer_config.json (do_lower_case,
  // model_max_length, special tokens) and special_tokens_map.json where present. The default
  // max length is model_max_length from those files when they give a usable one, else
  // default_max_length; INVALID_ARGUMENT when neither is positive. NOT_FOUND when the
  // directory or the model file is missing; FAILED_PRECONDITION when the SentencePiece module
  // cannot be found (see sentencepiece_module.h).
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Load(const std::string& model_dir,
                                                         TokenizerFamily family,
                                                         int default_max_length);
  // Loads a given .model file with the family's default special tokens and no lower-casing.
  // default_max_length must be positive.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> LoadModelFile(const std::string& spm_path,
                                                                  TokenizerFamily family,
                                                                  int default_max_length);

  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;
  ~Tokenizer();

  // INVALID_ARGUMENT for invalid UTF-8 (naming the byte offset), a negative max_length, a
  // max_length too small for the special tokens, or over-long input with truncate == false.
  // Empty text is allowed. NUL bytes are ordinary characters (SentencePiece maps them to unk).
  absl::StatusOr<Encoding> Encode(std::string_view text, const TokenizeOptions& opts = {}) const;
  absl::StatusOr<Encoding> EncodePair(std::string_view a, std::string_view b,
                                      const TokenizeOptions& opts = {}) const;
  // Raw SentencePiece ids, no special tokens (what SentencePieceProcessor.encode(text,
  // out_type=int) returns), after the same UTF-8 check and lower-casing as Encode.
  absl::StatusOr<std::vector<int32_t>> EncodeRaw(std::string_view text) const;

  int vocab_size() const;
  int pad_id() const { return ids_.pad; }
  int unk_id() const { return ids_.unk; }
  int cls_id() const { return ids_.cls; }  // DeBERTa [CLS]; -1 for T5
  int sep_id() const { return ids_.sep; }  // DeBERTa [SEP]; -1 for T5
  int eos_id() const { return ids_.eos; }  // T5 </s>; for DeBERTa == sep_id
  int default_max_length() const { return default_max_length_; }
  TokenizerFamily family() const { return family_; }
  // Whether text is lower-cased before encoding (do_lower_case). Only ASCII A-Z are lowered,
  // so byte offsets stay valid; other scripts keep their case.
  bool lower_case() const { return lower_case_; }
  // Special tokens the template adds: DeBERTa 2 (pair 3), T5 1 (pair 2).
  int NumSpecialTokens(bool pair) const;
  // "" for an id outside the vocabulary.
  std::string IdToPiece(int id) const;

 private:
  Tokenizer(std::unique_ptr<SentencePieceModel> model, TokenizerFamily family,
            SpecialTokenIds ids, bool lower_case, int default_max_length);

  static absl::StatusOr<std::unique_ptr<Tokenizer>> Create(const std::string& spm_path,
                                                           TokenizerFamily family,
                                                           const SpecialTokenNames& names,
                                                           bool lower_case,
                                                           int default_max_length);

  // Validates and (if configured) lower-cases `text`, then runs SentencePiece on it.
  absl::StatusOr<std::vector<SentencePieceSpan>> Pieces(std::string_view text,
                                                        std::string_view what) const;
  absl::StatusOr<int> MaxLength(const TokenizeOptions& opts, bool pair) const;
  Encoding Assemble(const std::vector<SentencePieceSpan>& a,
                    const std::vector<SentencePieceSpan>* b, int max_length,
                    TruncationDirection direction) const;

  std::unique_ptr<SentencePieceModel> model_;
  TokenizerFamily family_;
  SpecialTokenIds ids_;
  bool lower_case_;
  int default_max_length_;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_TOKENIZER_TOKENIZER_H_
