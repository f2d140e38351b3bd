#ifndef RELSERVE_SERVER_TOKENIZER_TEXT_CHUNKS_H_
#define RELSERVE_SERVER_TOKENIZER_TEXT_CHUNKS_H_

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

namespace relserve {

// Where a long text may be cut so that its pieces, tokenized one by one, give exactly the
// tokens of the whole: the tokenizers relserve serves never make a token across a
// space (WordPiece and byte-level BPE split on it before their vocabulary sees the text;
// SentencePiece vocabularies whose pieces carry "▁" only in front cannot either), so a
// piece's tokens agree with the whole text's everywhere except in the word at each of its
// ends, where the start and end of a text are treated differently (a dummy "▁", a trailing
// space dropped). Each chunk is therefore tokenized with one extra word on either side, and
// only the tokens that start inside its kept range are the text's.
//
// A "cut" is a single space (U+0020) between two plain characters: neither white space of any
// kind (a tab, a line break, U+3000, SentencePiece's own "▁"), nor a control or format
// character, nor a combining mark, which a normalizer could turn into a space, drop or join to
// the space. There the next word's token starts (SentencePiece's "▁word" covers the space,
// byte-level BPE's " word" too) and the word before ends, in every family. Texts without such
// spaces (scripts written without them) are read whole.

// One piece of the text: tokenize text[begin, end) and keep the tokens whose start (in the
// whole text) lies in [keep_begin, keep_end). `last`: no more pieces in this direction.
struct TextChunk {
  size_t begin = 0;
  size_t end = 0;
  size_t keep_begin = 0;
  size_t keep_end = std::string::npos;  // npos: to the end of the text, its end included
  bool last = true;
};

bool IsCutSpace(char c);

// The largest cut at or before `p`; npos when there is none.
size_t CutAtOrBefore(std::string_view text, size_t p);
// The smallest cut at or after `p`; npos when there is none.
size_t CutAtOrAfter(std::string_view text, size_t p);

// The chunks of a text walked from its start. The first call passes keep_begin = begin = 0;
// each next one passes the previous chunk's NextForward(). A chunk keeps at least
// `chunk_bytes` bytes of text unless it is the last (a text without white space is one chunk).
TextChunk ForwardChunk(std::string_view text, size_t keep_begin, size_t begin, size_t chunk_bytes);
// The (keep_begin, begin) of the chunk after `chunk`, walking forward.
std::pair<size_t, size_t> NextForward(std::string_view text, const TextChunk& chunk);

// The same walked from the end. The first call passes keep_end = npos and end = text.size();
// each next one passes the previous chunk's NextBackward().
TextChunk BackwardChunk(std::string_view text, size_t keep_end, size_t end, size_t chunk_bytes);
std::pair<size_t, size_t> NextBackward(std::string_view text, const TextChunk& chunk);

}  // namespace relserve

#endif  // RELSERVE_SERVER_TOKENIZER_TEXT_CHUNKS_H_
