#ifndef RELSERVE_SERVER_TOKENIZER_TEXT_UNICODE_CHARS_H_
#define RELSERVE_SERVER_TOKENIZER_TEXT_UNICODE_CHARS_H_

#include <cstddef>
#include <string>
#include <string_view>

// Character classes and case mapping as transformers' Python tokenizers see them (Python's
// str methods and unicodedata), answered from ICU's Unicode tables.
namespace relserve::unicode {

// The code point starting at text[*i], which must be well-formed UTF-8; advances *i past it.
char32_t DecodeUtf8(std::string_view text, size_t* i);
void AppendUtf8(char32_t c, std::string* out);

// str.isspace(): the characters str.split() and str.strip() treat as white space.
bool IsPythonSpace(char32_t c);
// str.isdigit(): decimal digits and other digits (superscripts, circled digits...).
bool IsPythonDigit(char32_t c);
// Python's str.lower() of c on its own: full case mapping, so U+0130 gives two characters;
// a lone capital sigma gives σ (the final-sigma rule needs a preceding letter). Writes 1 or 2
// code points to out and returns how many.
int Lowercase(char32_t c, char32_t out[2]);

// BERT's BasicTokenizer (transformers' _is_whitespace, _is_control, _is_punctuation,
// _is_chinese_char):
// space, \t, \n, \r and category Zs.
bool IsBertWhitespace(char32_t c);
// every category C* (Cc, Cf, Cs, Co, Cn) except \t, \n and \r.
bool IsBertControl(char32_t c);
// the ASCII non-alphanumeric symbols ($, +, ^, ` ... count too) and every category P*.
bool IsBertPunctuation(char32_t c);
// the CJK Unified Ideographs blocks and compatibility ideographs (not kana or hangul).
bool IsCjkIdeograph(char32_t c);

// Category Mn (nonspacing mark), what BERT's accent stripping drops after NFD.
bool IsNonspacingMark(char32_t c);
// unicodedata.combining(c) != 0, what XLNet's accent stripping drops after NFKD.
bool IsCombining(char32_t c);

}  // namespace relserve::unicode

#endif  // RELSERVE_SERVER_TOKENIZER_TEXT_UNICODE_CHARS_H_
