#ifndef RELSERVE_SERVER_UTIL_JSON_UTIL_H_
#define RELSERVE_SERVER_UTIL_JSON_UTIL_H_

#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace relserve {

// Parses JSON text; the error names `what` (usually a file path) and the parser's position.
absl::StatusOr<nlohmann::json> ParseJson(const std::string& text, const std::string& what);
// Reads and parses a JSON file.
absl::StatusOr<nlohmann::json> ReadJsonFile(const std::string& path);

}  // namespace relserve

#endif  // RELSERVE_SERVER_UTIL_JSON_UTIL_H_
