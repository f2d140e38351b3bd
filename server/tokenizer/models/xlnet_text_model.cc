#include "server/tokenizer/models/xlnet_text_model.h"

#include <utility>

#include "server/tokenizer/text/unicode_chars.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // "▁", SentencePiece's space

bool StartsWithSpaceMark(std::string_view piece) { return piece.substr(0, 3) == kSpaceMark; }

// str.replace(quote + quote, '"').
MappedText ReplaceDoubled(const MappedText& text, char quote) {
  const std::string& s = text.text();
  if (s.find(std::string(2, quote)) == std::string::npos) return text;
  MappedText out;
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] == quote && i + 1 < s.size() && s[i + 1] == quote) {
      const auto [begin, end] = text.Span(i, i + 2);
      out.Append('"', begin, end);
      i += 2;
      continue;
    }
    const size_t b = i;
    unicode::DecodeUtf8(s, &i);
    out.AppendRange(text, b, i);
  }
  return out;
}

// ' '.join(text.strip().split()); a collapsed run maps to all of its white space.
MappedText CollapseSpaces(const MappedText& text) {
  MappedText out;
  bool seen_text = false, pending = false;
  size_t run_begin = 0, run_end = 0;
  text.ForEachChar([&](char32_t c, size_t b, size_t e) {
    if (unicode::IsPythonSpace(c)) {
      if (!seen_text) return;
      if (!pending) run_begin = b;
      pending = true;
      run_end = e;
      return;
    }
    if (pending) {
      const auto [begin, end] = text.Span(run_begin, run_end);
      out.Append(' ', begin, end);
      pending = false;
    }
    out.AppendRange(text, b, e);
    seen_text = true;
  });
  return out;
}

size_t CountChars(std::string_view s) {
  size_t n = 0;
  for (const char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

// The code point before the last one of s (at least two characters).
char32_t SecondToLastChar(std::string_view s) {
  size_t last = s.size() - 1;
  while (last > 0 && (static_cast<unsigned char>(s[last]) & 0xC0) == 0x80) --last;
  size_t prev = last - 1;
  while (prev > 0 && (static_cast<unsigned char>(s[prev]) & 0xC0) == 0x80) --prev;
  return unicode::DecodeUtf8(s, &prev);
}

}  // namespace

MappedText XlnetTextModel::Preprocess(const MappedText& text) const {
  MappedText out = options_.remove_space ? CollapseSpaces(text) : text;
  out = ReplaceDoubled(out, '`');
  out = ReplaceDoubled(out, '\'');
  if (!options_.keep_accents) {
    out = FilterChars(Normalize(out, NormalizationForm::kNfkd),
                      [](char32_t c) { return !unicode::IsCombining(c); });
  }
  if (options_.do_lower_case) out = LowercaseChars(out);
  return out;
}

absl::StatusOr<std::vector<TokenSpan>> XlnetTextModel::Tokenize(const MappedText& text) const {
  const MappedText processed = Preprocess(text);
  const std::string& s = processed.text();
  ASSIGN_OR_RETURN(std::vector<SentencePieceSpan> pieces, model_->Encode(s));
  const int32_t unk = model_->reserved_ids().unk;
  // The piece as a string, as SentencePiece's encode(out_type=str) gives it: an unknown piece
  // is the text it covers.
  auto piece_string = [&](const SentencePieceSpan& piece, std::string_view source) {
    if (piece.id != unk || piece.begin >= piece.end) return model_->IdToPiece(piece.id);
    return std::string(source.substr(static_cast<size_t>(piece.begin),
                                     static_cast<size_t>(piece.end - piece.begin)));
  };

  std::vector<TokenSpan> out;
  out.reserve(pieces.size());
  for (const SentencePieceSpan& piece : pieces) {
    const auto b = static_cast<size_t>(piece.begin), e = static_cast<size_t>(piece.end);
    const std::string str = piece_string(piece, s);
    if (CountChars(str) < 2 || str.back() != ',' || !unicode::IsPythonDigit(SecondToLastChar(str))) {
      const auto [begin, end] = processed.Span(b, e);
      out.push_back(TokenSpan{piece.id, begin, end});
      continue;
    }
    // The digit-comma rule.
    std::string stem = str.substr(0, str.size() - 1);
    for (size_t at = stem.find(kSpaceMark); at != std::string::npos; at = stem.find(kSpaceMark)) {
      stem.erase(at, kSpaceMark.size());
    }
    ASSIGN_OR_RETURN(std::vector<SentencePieceSpan> sub, model_->Encode(stem));
    struct Sub {
      std::string str;
      int32_t id;
      int32_t begin, end;  // bytes of stem
    };
    std::vector<Sub> subs;
    for (const SentencePieceSpan& p : sub) subs.push_back({piece_string(p, stem), p.id, p.begin, p.end});
    if (!StartsWithSpaceMark(str) && !subs.empty() && StartsWithSpaceMark(subs[0].str)) {
      if (subs[0].str.size() == kSpaceMark.size()) {
        subs.erase(subs.begin());
      } else {
        subs[0].str.erase(0, kSpaceMark.size());
        subs[0].id = model_->PieceToId(subs[0].str);
      }
    }
    // Spans: the stem is the piece's text after its leading spaces and before its ",", when
    // SentencePiece's normalization left that text as the piece shows it.
    size_t stem_begin = b;
    while (stem_begin < e && s[stem_begin] == ' ') ++stem_begin;
    const bool comma_last = e > stem_begin && s[e - 1] == ',';
    const size_t stem_end = comma_last ? e - 1 : e;
    const bool aligned = comma_last && stem_end - stem_begin == stem.size();
    for (const Sub& p : subs) {
      const auto [begin, end] =
          aligned ? processed.Span(stem_begin + static_cast<size_t>(p.begin),
                                   stem_begin + static_cast<size_t>(p.end))
                  : processed.Span(b, stem_end);
      out.push_back(TokenSpan{p.id, begin, end});
    }
    const auto [begin, end] = comma_last ? processed.Span(e - 1, e) : processed.Span(e, e);
    out.push_back(TokenSpan{model_->PieceToId(","), begin, end});
  }
  return out;
}

}  // namespace relserve
