#include "server/tokenizer/text/unicode_chars.h"

#include <unicode/uchar.h>

#include <cstdint>

namespace relserve::unicode {

char32_t DecodeUtf8(std::string_view text, size_t* i) {
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(text[*i + k]); };
  const uint8_t lead = byte(0);
  char32_t c;
  size_t length;
  if (lead < 0x80) {
    c = lead;
    length = 1;
  } else if (lead < 0xE0) {
    c = lead & 0x1F;
    length = 2;
  } else if (lead < 0xF0) {
    c = lead & 0x0F;
    length = 3;
  } else {
    c = lead & 0x07;
    length = 4;
  }
  for (size_t k = 1; k < length; ++k) c = (c << 6) | (byte(k) & 0x3F);
  *i += length;
  return c;
}

void AppendUtf8(char32_t c, std::string* out) {
  if (c < 0x80) {
    out->push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (c >> 6)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (c >> 12)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (c >> 18)));
    out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

bool IsPythonSpace(char32_t c) {
  // Python's definition: bidirectional class WS, B or S, or category Zs. The list is closed:
  // no character has joined it since Unicode 6.
  switch (c) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D:
    case 0x1C: case 0x1D: case 0x1E: case 0x1F: case 0x20:
    case 0x85: case 0xA0: case 0x1680:
    case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

bool IsPythonDigit(char32_t c) {
  if (c >= '0' && c <= '9') return true;
  if (c < 0x80) return false;
  const int type = u_getIntPropertyValue(static_cast<UChar32>(c), UCHAR_NUMERIC_TYPE);
  return type == U_NT_DECIMAL || type == U_NT_DIGIT;
}

int Lowercase(char32_t c, char32_t out[2]) {
  if (c < 0x80) {
    out[0] = (c >= 'A' && c <= 'Z') ? c + ('a' - 'A') : c;
    return 1;
  }
  // The one unconditional lowercase mapping of SpecialCasing.txt longer than a character.
  if (c == 0x130) {
    out[0] = 'i';
    out[1] = 0x307;
    return 2;
  }
  out[0] = static_cast<char32_t>(u_tolower(static_cast<UChar32>(c)));
  return 1;
}

bool IsBertWhitespace(char32_t c) {
  if (c == ' ' || c == '\t' || c == '\n' || c == '\r') return true;
  if (c < 0x80) return false;
  return u_charType(static_cast<UChar32>(c)) == U_SPACE_SEPARATOR;
}

bool IsBertControl(char32_t c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  switch (u_charType(static_cast<UChar32>(c))) {
    case U_CONTROL_CHAR:
    case U_FORMAT_CHAR:
    case U_SURROGATE:
    case U_PRIVATE_USE_CHAR:
    case U_UNASSIGNED:
      return true;
    default:
      return false;
  }
}

bool IsBertPunctuation(char32_t c) {
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
      (c >= 123 && c <= 126)) {
    return true;
  }
  if (c < 0x80) return false;
  switch (u_charType(static_cast<UChar32>(c))) {
    case U_DASH_PUNCTUATION:
    case U_START_PUNCTUATION:
    case U_END_PUNCTUATION:
    case U_CONNECTOR_PUNCTUATION:
    case U_OTHER_PUNCTUATION:
    case U_INITIAL_PUNCTUATION:
    case U_FINAL_PUNCTUATION:
      return true;
    default:
      return false;
  }
}

bool IsCjkIdeograph(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

bool IsNonspacingMark(char32_t c) {
  return c >= 0x300 && u_charType(static_cast<UChar32>(c)) == U_NON_SPACING_MARK;
}

bool IsCombining(char32_t c) {
  return c >= 0x300 && u_getCombiningClass(static_cast<UChar32>(c)) != 0;
}

}  // namespace relserve::unicode
