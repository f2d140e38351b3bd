#ifndef RELSERVE_SERVER_TOKENIZER_ADDED_TOKENS_H_
#define RELSERVE_SERVER_TOKENIZER_ADDED_TOKENS_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "server/tokenizer/text/mapped_text.h"

namespace relserve {

// A token that text is split on before the vocabulary model sees it (transformers'
// AddedToken): the special tokens, and tokens added to a tokenizer after training.
struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool lstrip = false;       // eats the white space before it
  bool rstrip = false;       // eats the white space after it
  bool single_word = false;  // a token only where white space (or the text's end) borders it
  // Kept as written by the do_lower_case pass (special tokens, and normalized added ones).
  bool keeps_case = false;
  // One of the tokenizer's all_special_tokens (its special token roles and
  // additional_special_tokens), not merely an added token marked special.
  bool special = false;
};

// The added tokens of a tokenizer and the two passes of transformers' slow
// PreTrainedTokenizer.tokenize that use them. Immutable once built.
class AddedTokens {
 public:
  AddedTokens() = default;
  // A content that comes twice keeps its first entry. Empty contents are ignored.
  explicit AddedTokens(std::vector<AddedToken> tokens);

  bool empty() const { return tokens_.empty(); }
  const std::vector<AddedToken>& tokens() const { return tokens_; }
  // The token with exactly this content; nullptr when none.
  const AddedToken* Find(std::string_view content) const;

  // The do_lower_case pass: every character lower-cased on its own (Python's str.lower of one
  // character), except inside occurrences of the tokens that keep their case; at each
  // position the first of those tokens (in the order given) that matches is kept.
  MappedText LowercaseOutside(const MappedText& text) const;

  struct Segment {
    MappedText text;                    // the stretch of text, or the token as written
    const AddedToken* token = nullptr;  // nullptr: ordinary text for the vocabulary model
  };
  // Cuts text at every added token (the leftmost match first, the longest one at a place),
  // then, token by token, lets lstrip/rstrip eat the white space next to it and glues a
  // single_word token that a neighbour touches onto that neighbour as text. Empty stretches
  // are dropped.
  std::vector<Segment> Split(const MappedText& text) const;

 private:
  // A trie over the tokens' bytes: node 0 is the root.
  struct Node {
    std::map<unsigned char, int32_t> next;
    int32_t token = -1;  // index into tokens_ of the token ending here
  };
  // Length of the longest token starting at byte `at` of text, 0 when none.
  size_t LongestMatchAt(std::string_view text, size_t at, int32_t* token) const;

  std::vector<AddedToken> tokens_;
  std::vector<Node> trie_;
  std::vector<int32_t> keep_case_;  // indices into tokens_, in order
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_TOKENIZER_ADDED_TOKENS_H_
