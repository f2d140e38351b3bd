#ifndef RELSERVE_SERVER_TOKENIZER_MODELS_WORDPIECE_TEXT_MODEL_H_
#define RELSERVE_SERVER_TOKENIZER_MODELS_WORDPIECE_TEXT_MODEL_H_

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "server/tokenizer/models/text_model.h"

namespace relserve {

// A WordPiece vocabulary (vocab.txt): one token per line, its id the 0-based line number, as
// transformers' load_vocab reads it: \n, \r\n and \r all end a line, and a token listed twice
// answers with its last line.
class WordPieceVocab {
 public:
  // INVALID_ARGUMENT, naming `source` and the line, for text that is not UTF-8.
  static absl::StatusOr<WordPieceVocab> Parse(std::string_view contents, const std::string& source);
  // NOT_FOUND when the file is missing; INVALID_ARGUMENT for a directory or bad contents.
  static absl::StatusOr<WordPieceVocab> Load(const std::string& path);
  // Tokens by id.
  static WordPieceVocab FromTokens(std::vector<std::string> tokens);

  int size() const { return static_cast<int>(tokens_.size()); }
  int Find(const std::string& token) const;  // -1 when absent
  const std::string& Token(int id) const { return tokens_[static_cast<size_t>(id)]; }

 private:
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int> ids_;
};

// BertTokenizer's switches (tokenizer_config.json); MPNetTokenizer has the same.
struct WordPieceOptions {
  bool do_basic_tokenize = true;
  bool do_lower_case = true;
  // Unset: strip accents exactly when lower-casing, as the original BERT does.
  std::optional<bool> strip_accents;
  bool tokenize_chinese_chars = true;  // a CJK ideograph is a word of its own
  // Words kept whole: not lower-cased, accent-stripped or split at punctuation, and looked up
  // as they are instead of being cut into pieces.
  std::set<std::string> never_split;
  // Also kept whole by the basic tokenizer, but still cut into pieces (the special tokens).
  std::set<std::string> special_tokens;
  int max_input_chars_per_word = 100;  // longer words are the unknown token
};

// BERT's BasicTokenizer followed by its WordpieceTokenizer:
//   - characters NUL, U+FFFD and controls/format characters (categories C*) are dropped, other
//     white space becomes a space; CJK ideographs are set apart by spaces; NFC;
//   - each white-space separated word is lower-cased and/or stripped of accents (NFD, then
//     every Mn dropped), then split before and after each punctuation character;
//   - each word becomes its greedy longest-match-first pieces, "##" marking a piece that
//     continues a word; a word with a piece missing from the vocabulary, or longer than
//     max_input_chars_per_word characters, is one unknown token.
class WordPieceTextModel : public TextModel {
 public:
  WordPieceTextModel(WordPieceVocab vocab, WordPieceOptions options)
      : vocab_(std::move(vocab)), options_(std::move(options)) {}

  absl::StatusOr<std::vector<TokenSpan>> Tokenize(const MappedText& text) const override;
  int vocab_size() const override { return vocab_.size(); }
  int PieceToId(std::string_view piece) const override { return vocab_.Find(std::string(piece)); }
  std::string IdToPiece(int id) const override {
    return id >= 0 && id < vocab_.size() ? vocab_.Token(id) : std::string();
  }

 private:
  // The words of BasicTokenizer.tokenize.
  std::vector<MappedText> BasicWords(const MappedText& text) const;
  void AddPieces(const MappedText& word, std::vector<TokenSpan>* out) const;

  WordPieceVocab vocab_;
  WordPieceOptions options_;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_TOKENIZER_MODELS_WORDPIECE_TEXT_MODEL_H_
