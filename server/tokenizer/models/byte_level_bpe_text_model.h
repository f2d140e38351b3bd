#ifndef RELSERVE_SERVER_TOKENIZER_MODELS_BYTE_LEVEL_BPE_TEXT_MODEL_H_
#define RELSERVE_SERVER_TOKENIZER_MODELS_BYTE_LEVEL_BPE_TEXT_MODEL_H_

#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "server/tokenizer/models/text_model.h"

namespace relserve {

// GPT-2's pre-tokenizer pattern, as RobertaTokenizer applies it (with the `regex` module):
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// The byte spans [begin, end) of the pieces of `text` (well-formed UTF-8).
std::vector<std::pair<size_t, size_t>> ByteLevelPreTokenize(std::string_view text);

// A byte-level BPE vocabulary: vocab.json (token -> id) and merges.txt (one merge per line,
// ranked by line, after a "#version" line), as RobertaTokenizer reads them.
class ByteLevelBpeVocab {
 public:
  // INVALID_ARGUMENT naming the file for contents transformers could not read.
  static absl::StatusOr<ByteLevelBpeVocab> Load(const std::string& vocab_path,
                                                const std::string& merges_path);
  static absl::StatusOr<ByteLevelBpeVocab> Parse(const std::string& vocab_json,
                                                 std::string_view merges,
                                                 const std::string& vocab_source);
  // From tokens with their ids (each in [0, 2^24)) and merges, highest priority first, as
  // tokenizer.json holds them.
  static ByteLevelBpeVocab FromParts(const std::vector<std::pair<std::string, int32_t>>& tokens,
                                     const std::vector<std::pair<std::string, std::string>>& merges);

  int size() const { return static_cast<int>(tokens_.size()); }
  int Find(const std::string& token) const;  // -1 when absent
  const std::string& Token(int id) const { return tokens_[static_cast<size_t>(id)]; }
  // The rank of merging `first` and `second`; -1 when they never merge.
  int Rank(const std::string& first, const std::string& second) const;

 private:
  std::vector<std::string> tokens_;  // by id; "" for ids the file skips
  std::unordered_map<std::string, int> ids_;
  std::unordered_map<std::string, int> ranks_;  // "first second" -> rank
};

// RobertaTokenizer._tokenize: each pre-tokenized piece's UTF-8 bytes are written as GPT-2's
// printable stand-ins (bytes_to_unicode: a space is "Ġ"), then merged pair by pair, the pair
// of lowest rank first, until no ranked pair is left; each result is a token of vocab.json.
class ByteLevelBpeTextModel : public TextModel {
 public:
  explicit ByteLevelBpeTextModel(ByteLevelBpeVocab vocab) : vocab_(std::move(vocab)) {}

  absl::StatusOr<std::vector<TokenSpan>> Tokenize(const MappedText& text) const override;
  int vocab_size() const override { return vocab_.size(); }
  int PieceToId(std::string_view piece) const override { return vocab_.Find(std::string(piece)); }
  std::string IdToPiece(int id) const override {
    return id >= 0 && id < vocab_.size() ? vocab_.Token(id) : std::string();
  }

 private:
  ByteLevelBpeVocab vocab_;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_TOKENIZER_MODELS_BYTE_LEVEL_BPE_TEXT_MODEL_H_
