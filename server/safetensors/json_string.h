#ifndef RELSERVE_SERVER_SAFETENSORS_JSON_STRING_H_
#define RELSERVE_SERVER_SAFETENSORS_JSON_STRING_H_

#include <string>
#include <string_view>

namespace relserve {

// True if `s` is well-formed UTF-8 (no overlongs, surrogates or code points past U+10FFFF).
bool IsValidUtf8(std::string_view s);

// Appends `s` as a quoted JSON string escaped exactly as serde_json (the serializer behind
// Python's safetensors) does: `"` `\` and \b \f \n \r \t get short escapes, other control
// characters \u00xx in lowercase hex, everything else (non-ASCII included) verbatim. Invalid
// UTF-8 sequences become U+FFFD so the output is always valid JSON.
void AppendJsonString(std::string_view s, std::string* out);

}  // namespace relserve

#endif  // RELSERVE_SERVER_SAFETENSORS_JSON_STRING_H_
