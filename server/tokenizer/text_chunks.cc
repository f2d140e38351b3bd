#include "server/tokenizer/text_chunks.h"

#include "server/tokenizer/text/unicode_chars.h"

#include <algorithm>
#include <utility>

namespace relserve {
namespace {

// A character no tokenizer's normalizer turns into a space, drops or joins to its neighbour:
// not white space of any kind (Python's, Unicode's separators, SentencePiece's own "▁"), not
// a control or format character (a zero-width space), not a combining mark.
bool IsPlain(char32_t c) {
  return c > 0x20 && c != 0x7f && c != 0x2581 && !unicode::IsPythonSpace(c) && !unicode::IsBertWhitespace(c) &&
         !unicode::IsBertControl(c) && !unicode::IsCombining(c) && !unicode::IsNonspacingMark(c);
}

// A single space between two plain characters (b is the space).
bool IsCut(std::string_view text, size_t b) {
  if (b == 0 || b + 1 >= text.size() || !IsCutSpace(text[b])) return false;
  if (IsCutSpace(text[b + 1]) || IsCutSpace(text[b - 1])) return false;
  size_t after = b + 1;
  if (!IsPlain(unicode::DecodeUtf8(text, &after))) return false;
  size_t before = b - 1;
  while (before > 0 && (static_cast<unsigned char>(text[before]) & 0xC0) == 0x80) --before;
  return IsPlain(unicode::DecodeUtf8(text, &before));
}

// The largest cut strictly before p; npos when there is none.
size_t CutBefore(std::string_view text, size_t p) {
  return p == 0 ? std::string::npos : CutAtOrBefore(text, p - 1);
}

}  // namespace

bool IsCutSpace(char c) { return c == ' '; }

size_t CutAtOrBefore(std::string_view text, size_t p) {
  if (text.empty()) return std::string::npos;
  for (size_t b = std::min(p, text.size() - 1); b > 0; --b) {
    if (IsCut(text, b)) return b;
  }
  return std::string::npos;
}

size_t CutAtOrAfter(std::string_view text, size_t p) {
  for (size_t b = std::max<size_t>(p, 1); b < text.size(); ++b) {
    if (IsCut(text, b)) return b;
  }
  return std::string::npos;
}

TextChunk ForwardChunk(std::string_view text, size_t keep_begin, size_t begin, size_t chunk_bytes) {
  TextChunk c;
  c.begin = begin;
  c.end = text.size();
  c.keep_begin = keep_begin;
  if (text.size() - keep_begin <= chunk_bytes) return c;
  // Kept up to a cut at least chunk_bytes on, tokenized up to the cut after the
  // next word.
  const size_t keep_end = CutAtOrAfter(text, keep_begin + chunk_bytes);
  if (keep_end == std::string::npos) return c;
  const size_t end = CutAtOrAfter(text, keep_end + 1);
  if (end == std::string::npos) return c;
  c.end = end;
  c.keep_end = keep_end;
  c.last = false;
  return c;
}

std::pair<size_t, size_t> NextForward(std::string_view text, const TextChunk& chunk) {
  // The next chunk starts one word before what it keeps: at the cut before keep_end.
  const size_t begin = CutBefore(text, chunk.keep_end);
  return {chunk.keep_end, begin == std::string::npos ? 0 : begin};
}

TextChunk BackwardChunk(std::string_view text, size_t keep_end, size_t end, size_t chunk_bytes) {
  TextChunk c;
  c.begin = 0;
  c.end = end;
  c.keep_begin = 0;
  c.keep_end = keep_end;
  const size_t kept_to = keep_end == std::string::npos ? text.size() : keep_end;
  if (kept_to <= chunk_bytes) return c;
  // Kept from a cut at least chunk_bytes back, tokenized from the cut before the
  // word before it.
  const size_t keep_begin = CutAtOrBefore(text, kept_to - chunk_bytes);
  if (keep_begin == std::string::npos) return c;
  const size_t begin = CutBefore(text, keep_begin);
  if (begin == std::string::npos) return c;
  c.begin = begin;
  c.keep_begin = keep_begin;
  c.last = false;
  return c;
}

std::pair<size_t, size_t> NextBackward(std::string_view text, const TextChunk& chunk) {
  // The next chunk ends one word after what it keeps: at the cut after keep_begin.
  const size_t end = CutAtOrAfter(text, chunk.keep_begin + 1);
  return {chunk.keep_begin, end == std::string::npos ? text.size() : end};
}

}  // namespace relserve
