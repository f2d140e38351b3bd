#include "server/util/quote.h"

#include "absl/strings/str_cat.h"

namespace relserve {
namespace {

// The longest prefix of `text` of at most `max_bytes` that does not end inside a UTF-8
// character (continuation bytes are 10xxxxxx).
std::string_view Prefix(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t end = max_bytes;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return text.substr(0, end);
}

}  // namespace

std::string Quote(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return absl::StrCat("\"", std::string(text), "\"");
  return absl::StrCat("\"", std::string(Prefix(text, max_bytes)), "...\" (", text.size(), " bytes)");
}

std::string CapMessage(std::string_view message, size_t max_bytes) {
  if (message.size() <= max_bytes) return std::string(message);
  return absl::StrCat(std::string(Prefix(message, max_bytes)), "... (", message.size() - Prefix(message, max_bytes).size(),
                      " more bytes cut)");
}

}  // namespace relserve
