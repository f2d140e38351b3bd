#ifndef RELSERVE_SERVER_UTIL_UTF8_H_
#define RELSERVE_SERVER_UTIL_UTF8_H_

#include <cstddef>
#include <optional>
#include <string_view>

#include "absl/status/status.h"

namespace relserve {

// Where and why a text stops being well-formed UTF-8 (RFC 3629).
struct Utf8Error {
  size_t offset = 0;       // byte offset of the first byte of the bad sequence
  const char* reason = "";  // e.g. "overlong encoding"
};

// The first malformed sequence, if any: stray continuation bytes, bytes that never occur in
// UTF-8, sequences cut short, overlong encodings, UTF-16 surrogates and code points above
// U+10FFFF. SentencePiece would instead map such bytes to the unknown piece without a word.
std::optional<Utf8Error> FindInvalidUtf8(std::string_view text);

// The length (1 to 4) of the well-formed UTF-8 sequence that starts at text[i], or 0 where
// FindInvalidUtf8 would stop (or i is past the end).
size_t Utf8SequenceLength(std::string_view text, size_t i);

// OK, or INVALID_ARGUMENT "<what>: invalid UTF-8 at byte offset N: <reason>".
absl::Status ValidateUtf8(std::string_view text, std::string_view what);

}  // namespace relserve

#endif  // RELSERVE_SERVER_UTIL_UTF8_H_
