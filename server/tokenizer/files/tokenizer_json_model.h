#ifndef RELSERVE_SERVER_TOKENIZER_FILES_TOKENIZER_JSON_MODEL_H_
#define RELSERVE_SERVER_TOKENIZER_FILES_TOKENIZER_JSON_MODEL_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/tokenizer/files/tokenizer_config.h"
#include "server/tokenizer/files/tokenizer_json.h"
#include "server/tokenizer/models/byte_level_bpe_text_model.h"
#include "server/tokenizer/models/wordpiece_text_model.h"
#include "server/tokenizer/sentencepiece/sentencepiece_model_proto.h"
#include "server/tokenizer/descriptor/tokenizer_family_descriptor.h"

namespace relserve {

// What a family's slow tokenizer needs, built from a tokenizer.json: transformers' converters
// (convert_slow_tokenizer.py) run backwards, so that the same code tokenizes whichever file a
// model directory holds.

// Checks that tokenizer.json holds the family's kind of model (DeBERTa, T5, XLNet: Unigram;
// BERT, MPNet: WordPiece; RoBERTa: byte-level BPE) and no normalizer or pre-tokenizer the
// family's slow tokenizer has no switch for, then writes on top of *config what the file
// says: the switches its components stand for (do_lower_case, DeBERTa's split_by_punct,
// XLNet's keep_accents, BERT's strip_accents and tokenize_chinese_chars, RoBERTa's
// add_prefix_space), its added tokens with their flags, the unknown token of its model and the
// special tokens its post-processor places. INVALID_ARGUMENT naming `source`, the component
// and the family otherwise.
absl::Status ApplyTokenizerJson(const TokenizerJson& json, const TokenizerFamilyDescriptor& family,
                                const std::string& source, TokenizerConfig* config);

// The SentencePiece model of a Unigram tokenizer.json: its pieces and scores, with the types
// SentencePiece gave them recovered (the unknown piece; added special tokens are control
// pieces, other added tokens and pieces scored exactly 0 user-defined ones, as SentencePiece
// scores those; <0xXX> pieces are bytes when the model falls back to bytes), and the
// normalizer spec its normalizer and Metaspace stand for. XLNet's converter lowers the score
// of pieces ending in a digit and a comma by 100; that is undone, since XLNetTokenizer's own
// digit-comma rule follows.
absl::StatusOr<SentencePieceModelSpec> SentencePieceSpecFromJson(
    const TokenizerJson& json, const TokenizerFamilyDescriptor& family);

// WordPiece's vocabulary; INVALID_ARGUMENT when its ids are not 0..n-1.
absl::StatusOr<WordPieceVocab> WordPieceVocabFromJson(const TokenizerJson& json,
                                                      const std::string& source);
absl::StatusOr<ByteLevelBpeVocab> ByteLevelBpeVocabFromJson(const TokenizerJson& json,
                                                            const std::string& source);

}  // namespace relserve

#endif  // RELSERVE_SERVER_TOKENIZER_FILES_TOKENIZER_JSON_MODEL_H_
