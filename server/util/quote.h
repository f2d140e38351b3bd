#ifndef RELSERVE_SERVER_UTIL_QUOTE_H_
#define RELSERVE_SERVER_UTIL_QUOTE_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace relserve {

// Client-supplied text as an error message quotes it: in double quotes, cut after `max_bytes`
// (at a UTF-8 character boundary) with the full length noted, so that a hostile value cannot
// make a message of any size. `"abc"`, or `"abcd..." (8000 bytes)`.
std::string Quote(std::string_view text, size_t max_bytes = 64);

// `message` cut to at most `max_bytes` (at a UTF-8 character boundary) with a note of what
// was cut: the text that travels in a status.
std::string CapMessage(std::string_view message, size_t max_bytes);

}  // namespace relserve

#endif  // RELSERVE_SERVER_UTIL_QUOTE_H_
