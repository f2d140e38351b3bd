#ifndef RELSERVE_SERVER_TOKENIZER_TRUNCATION_H_
#define RELSERVE_SERVER_TOKENIZER_TRUNCATION_H_

namespace relserve {

// How many tokens of each text survive truncation.
struct TruncatedLengths {
  int first = 0;
  int second = 0;
};

// transformers' "longest_first" (PreTrainedTokenizerBase.truncate_sequences): while the texts
// hold more than `budget` tokens, drop a token of the first text if it is longer than
// the second, otherwise of the second. Ties therefore cut the second text. For a single text
// pass second = 0. Which end of each text loses the tokens is FirstKeptToken's business.
// Requires first, second, budget >= 0.
TruncatedLengths TruncateLongestFirst(int first, int second, int budget);

// Which text of a pair loses tokens: transformers' truncation strategies "longest_first" (the
// default) and "only_first" (the zero-shot-classification pipeline: only the premise is cut,
// the hypothesis is kept whole).
enum class PairTruncation { kLongestFirst, kOnlyFirst };

// "only_first": the first text keeps what the budget leaves after the whole second text (none
// if the second alone fills it; the caller refuses that case).
TruncatedLengths TruncateOnlyFirst(int first, int second, int budget);

// Which end of a text loses its tokens: kRight its last ones (transformers' default
// truncation_side "right"), kLeft its first ones (truncation_side "left", TEI's
// truncation_direction "Left": the end of a long text is kept). Only text tokens are dropped;
// the family's template ([CLS] ... [SEP], ... </s>) is built around what is kept.
enum class TruncationDirection { kRight, kLeft };

// The index of the first token kept when `kept` of a text's `length` tokens survive: 0 from
// the right, length - kept from the left. Requires 0 <= kept <= length.
int FirstKeptToken(int length, int kept, TruncationDirection direction);

}  // namespace relserve

#endif  // RELSERVE_SERVER_TOKENIZER_TRUNCATION_H_
