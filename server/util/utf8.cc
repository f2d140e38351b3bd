#include "server/util/utf8.h"

#include <cstdint>

#include "absl/strings/str_cat.h"

namespace relserve {
namespace {

bool IsContinuation(uint8_t byte) { return (byte & 0xC0) == 0x80; }

// Checks the sequence that starts at text[i] (i < text.size()): its length (1 to 4) and no
// reason when it is well-formed, else the reason it is not.
const char* CheckSequence(std::string_view text, size_t i, size_t* length) {
  const size_t n = text.size();
  const auto lead = static_cast<uint8_t>(text[i]);
  *length = 1;
  if (lead < 0x80) return nullptr;
  // The ranges of RFC 3629 section 4: the lead byte fixes the length, and for E0, ED, F0 and
  // F4 also narrows the second byte, which is where overlong forms, surrogates and code
  // points past U+10FFFF are excluded.
  uint8_t second_min = 0x80, second_max = 0xBF;
  const char* second_reason = "invalid continuation byte";
  if (IsContinuation(lead)) return "unexpected continuation byte";
  if (lead == 0xC0 || lead == 0xC1) return "overlong encoding";
  if (lead <= 0xDF) {
    *length = 2;
  } else if (lead <= 0xEF) {
    *length = 3;
    if (lead == 0xE0) {
      second_min = 0xA0;
      second_reason = "overlong encoding";
    }
    if (lead == 0xED) {
      second_max = 0x9F;
      second_reason = "UTF-16 surrogate (U+D800..U+DFFF)";
    }
  } else if (lead <= 0xF4) {
    *length = 4;
    if (lead == 0xF0) {
      second_min = 0x90;
      second_reason = "overlong encoding";
    }
    if (lead == 0xF4) {
      second_max = 0x8F;
      second_reason = "code point above U+10FFFF";
    }
  } else if (lead <= 0xF7) {
    return "code point above U+10FFFF";
  } else {
    return "byte 0xF8..0xFF never occurs in UTF-8";
  }
  for (size_t k = 1; k < *length; ++k) {
    if (i + k >= n) return "sequence cut short by the end of the text";
    const auto byte = static_cast<uint8_t>(text[i + k]);
    if (!IsContinuation(byte)) return "sequence cut short (missing continuation byte)";
    if (k == 1 && (byte < second_min || byte > second_max)) return second_reason;
  }
  return nullptr;
}

}  // namespace

size_t Utf8SequenceLength(std::string_view text, size_t i) {
  if (i >= text.size()) return 0;
  size_t length = 0;
  return CheckSequence(text, i, &length) == nullptr ? length : 0;
}

std::optional<Utf8Error> FindInvalidUtf8(std::string_view text) {
  size_t length = 0;
  for (size_t i = 0; i < text.size(); i += length) {
    if (const char* reason = CheckSequence(text, i, &length)) return Utf8Error{i, reason};
  }
  return std::nullopt;
}

absl::Status ValidateUtf8(std::string_view text, std::string_view what) {
  const std::optional<Utf8Error> error = FindInvalidUtf8(text);
  if (!error.has_value()) return absl::OkStatus();
  // Debian's Abseil has its own string_view, which std::string_view does not convert to.
  const absl::string_view label(what.data(), what.size());
  return absl::InvalidArgumentError(absl::StrCat(label, ": invalid UTF-8 at byte offset ",
                                                 error->offset, ": ", error->reason));
}

}  // namespace relserve
