#ifndef RELSERVE_SERVER_TOKENIZER_TEXT_MAPPED_TEXT_H_
#define RELSERVE_SERVER_TOKENIZER_TEXT_MAPPED_TEXT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace relserve {

// Text made from a caller's text by lowering, cleaning or normalizing it, which remembers for
// each of its bytes the bytes of the caller's text it came from, so that the tokens found in
// it can report spans of the original. Always well-formed UTF-8.
class MappedText {
 public:
  MappedText() = default;
  // `text` itself (well-formed UTF-8), its byte i standing for original byte base + i.
  static MappedText Identity(std::string_view text, int32_t base = 0);

  const std::string& text() const { return text_; }
  size_t size() const { return text_.size(); }
  bool empty() const { return text_.empty(); }

  // Appends c as coming from the original bytes [begin, end).
  void Append(char32_t c, int32_t begin, int32_t end);
  // Appends bytes [b, e) of `other` (whole characters) with their origins.
  void AppendRange(const MappedText& other, size_t b, size_t e);

  // The original bytes behind bytes [b, e): from the first one's start to the last one's end.
  // An empty range gives the empty span where byte b came from (the end for b == size()).
  std::pair<int32_t, int32_t> Span(size_t b, size_t e) const;
  // Bytes [b, e) (whole characters) as a text of their own, keeping their origins.
  MappedText Substr(size_t b, size_t e) const;

  // Calls f(c, b, e) for each character c, which occupies bytes [b, e) of text().
  template <typename F>
  void ForEachChar(F&& f) const;

 private:
  std::string text_;
  std::vector<int32_t> begins_;  // per byte of text_
  std::vector<int32_t> ends_;
  int32_t end_ = 0;  // the original position just past the text
};

// Unicode normalization forms, as unicodedata.normalize names them.
enum class NormalizationForm { kNfc, kNfd, kNfkd };

// `text` in the given normalization form. Each character of the result keeps the origin of the
// run of characters it was normalized with (a base character and its marks), so an accented
// letter written as two code points maps back to both.
MappedText Normalize(const MappedText& text, NormalizationForm form);

// Every character lower-cased on its own, as Python's str.lower() lowers a lone character.
MappedText LowercaseChars(const MappedText& text);

// The characters for which keep(c) is true.
template <typename Keep>
MappedText FilterChars(const MappedText& text, Keep&& keep);

// The pieces of text between runs of white space (str.split() with no argument).
std::vector<MappedText> SplitOnWhiteSpace(const MappedText& text);

char32_t DecodeUtf8At(std::string_view text, size_t* i);

template <typename F>
void MappedText::ForEachChar(F&& f) const {
  size_t i = 0;
  while (i < text_.size()) {
    const size_t b = i;
    const char32_t c = DecodeUtf8At(text_, &i);
    f(c, b, i);
  }
}

template <typename Keep>
MappedText FilterChars(const MappedText& text, Keep&& keep) {
  MappedText out;
  text.ForEachChar([&](char32_t c, size_t b, size_t e) {
    if (keep(c)) out.AppendRange(text, b, e);
  });
  return out;
}

}  // namespace relserve

#endif  // RELSERVE_SERVER_TOKENIZER_TEXT_MAPPED_TEXT_H_
