#ifndef RELSERVE_SERVER_SAFETENSORS_JSON_STRING_H_
#define RELSERVE_SERVER_SAFETENSORS_JSON_STRING_H_

#include <string>
#include <string_view>

namespace relserve {

// Appends `s` as a quoted JSON string escaped exactly as serde_json (the serializer behind
// Python's safetensors) does: `"` `\` and \b \f \n \r \t get short escapes, other control
// characters \u00xx in lowercase hex, everything else (non-ASCII included) verbatim. Invalid
// UTF-8 sequences (server/util/utf8.h) become U+FFFD so the output is always valid JSON.
void AppendJsonString(std::string_view s, std::string* out);

}  // namespace relserve

#endif  // RELSERVE_SERVER_SAFETENSORS_JSON_STRING_H_
