#ifndef RELSERVE_SERVER_TOKENIZER_TRUNCATION_H_
#define RELSERVE_SERVER_TOKENIZER_TRUNCATION_H_

namespace relserve {

// How many tokens of each text survive truncation.
struct TruncatedLengths {
  int first = 0;
  int second = 0;
};

// transformers' "longest_first" (PreTrainedTokenizerBase.truncate_sequences): while the texts
// hold more than `budget` tokens, drop the last token of the first text if it is longer than
// the second, otherwise of the second. Ties therefore cut the second text. For a single text
// pass second = 0: it is then cut from the end. Tokens are always dropped from the end.
// Requires first, second, budget >= 0.
TruncatedLengths TruncateLongestFirst(int first, int second, int budget);

}  // namespace relserve

#endif  // RELSERVE_SERVER_TOKENIZER_TRUNCATION_H_
