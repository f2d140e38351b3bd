#include "server/tokenizer/text/mapped_text.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/stringpiece.h>

#include <algorithm>

#include "server/tokenizer/text/unicode_chars.h"

namespace relserve {
namespace {

const icu::Normalizer2* Normalizer(NormalizationForm form) {
  // ICU's instances are process-wide singletons built from data linked into libicudata; they
  // cannot fail to load once the library is there.
  UErrorCode status = U_ZERO_ERROR;
  switch (form) {
    case NormalizationForm::kNfc: return icu::Normalizer2::getNFCInstance(status);
    case NormalizationForm::kNfd: return icu::Normalizer2::getNFDInstance(status);
    case NormalizationForm::kNfkd: return icu::Normalizer2::getNFKDInstance(status);
  }
  return nullptr;
}

}  // namespace

char32_t DecodeUtf8At(std::string_view text, size_t* i) { return unicode::DecodeUtf8(text, i); }

MappedText MappedText::Identity(std::string_view text, int32_t base) {
  MappedText out;
  out.text_.assign(text.data(), text.size());
  out.begins_.resize(text.size());
  out.ends_.resize(text.size());
  // A multi-byte character maps as a whole, so any byte of it stands for all of it.
  size_t i = 0;
  while (i < text.size()) {
    const size_t b = i;
    unicode::DecodeUtf8(text, &i);
    for (size_t k = b; k < i; ++k) {
      out.begins_[k] = base + static_cast<int32_t>(b);
      out.ends_[k] = base + static_cast<int32_t>(i);
    }
  }
  out.end_ = base + static_cast<int32_t>(text.size());
  return out;
}

void MappedText::Append(char32_t c, int32_t begin, int32_t end) {
  unicode::AppendUtf8(c, &text_);
  begins_.resize(text_.size(), begin);  // the new bytes only
  ends_.resize(text_.size(), end);
  end_ = end;
}

void MappedText::AppendRange(const MappedText& other, size_t b, size_t e) {
  if (b >= e) return;
  text_.append(other.text_, b, e - b);
  begins_.insert(begins_.end(), other.begins_.begin() + static_cast<std::ptrdiff_t>(b),
                 other.begins_.begin() + static_cast<std::ptrdiff_t>(e));
  ends_.insert(ends_.end(), other.ends_.begin() + static_cast<std::ptrdiff_t>(b),
               other.ends_.begin() + static_cast<std::ptrdiff_t>(e));
  end_ = other.ends_[e - 1];
}

std::pair<int32_t, int32_t> MappedText::Span(size_t b, size_t e) const {
  if (b >= e) {
    const int32_t at = b < begins_.size() ? begins_[b] : end_;
    return {at, at};
  }
  // Normalization keeps the order of the runs it maps, so first and last bound the span; the
  // min/max guards a mark that canonical reordering moved.
  return {std::min(begins_[b], begins_[e - 1]), std::max(ends_[b], ends_[e - 1])};
}

MappedText MappedText::Substr(size_t b, size_t e) const {
  MappedText out;
  out.AppendRange(*this, b, e);
  out.end_ = e > b ? ends_[e - 1] : Span(b, b).first;
  return out;
}

MappedText Normalize(const MappedText& text, NormalizationForm form) {
  const icu::Normalizer2* normalizer = Normalizer(form);
  UErrorCode status = U_ZERO_ERROR;
  const std::string& s = text.text();
  if (normalizer == nullptr ||
      normalizer->isNormalizedUTF8(icu::StringPiece(s.data(), static_cast<int32_t>(s.size())),
                                   status) ||
      U_FAILURE(status)) {
    return text;
  }
  // Normalize run by run, a run starting at each character the form never combines with what
  // precedes it: what a run becomes depends on nothing outside it.
  MappedText out;
  std::string normalized;
  size_t run_begin = 0;
  auto flush = [&](size_t run_end) {
    if (run_end <= run_begin) return;
    normalized.clear();
    icu::StringByteSink<std::string> sink(&normalized);
    UErrorCode run_status = U_ZERO_ERROR;
    normalizer->normalizeUTF8(
        0, icu::StringPiece(s.data() + run_begin, static_cast<int32_t>(run_end - run_begin)), sink,
        nullptr, run_status);
    if (U_FAILURE(run_status)) normalized.assign(s, run_begin, run_end - run_begin);
    if (s.compare(run_begin, run_end - run_begin, normalized) == 0) {
      // A run the form leaves as it is keeps each character's own span, as it does when the
      // whole text is normalized already: a character's span never depends on text elsewhere.
      out.AppendRange(text, run_begin, run_end);
      run_begin = run_end;
      return;
    }
    const auto [begin, end] = text.Span(run_begin, run_end);
    size_t i = 0;
    while (i < normalized.size()) out.Append(unicode::DecodeUtf8(normalized, &i), begin, end);
    run_begin = run_end;
  };
  text.ForEachChar([&](char32_t c, size_t b, size_t) {
    if (b > run_begin && normalizer->hasBoundaryBefore(static_cast<UChar32>(c))) flush(b);
  });
  flush(s.size());
  return out;
}

MappedText LowercaseChars(const MappedText& text) {
  MappedText out;
  text.ForEachChar([&](char32_t c, size_t b, size_t e) {
    char32_t lowered[2];
    const int n = unicode::Lowercase(c, lowered);
    if (n == 1 && lowered[0] == c) {
      out.AppendRange(text, b, e);
      return;
    }
    const auto [begin, end] = text.Span(b, e);
    for (int k = 0; k < n; ++k) out.Append(lowered[k], begin, end);
  });
  return out;
}

std::vector<MappedText> SplitOnWhiteSpace(const MappedText& text) {
  std::vector<MappedText> out;
  size_t start = 0;
  bool in_word = false;
  text.ForEachChar([&](char32_t c, size_t b, size_t) {
    const bool space = unicode::IsPythonSpace(c);
    if (space && in_word) out.push_back(text.Substr(start, b));
    if (!space && !in_word) start = b;
    in_word = !space;
  });
  if (in_word) out.push_back(text.Substr(start, text.size()));
  return out;
}

}  // namespace relserve
