#include "server/util/json_util.h"

#include "absl/strings/str_cat.h"
#include "server/util/file_util.h"
#include "server/util/status_macros.h"

namespace relserve {

absl::StatusOr<nlohmann::json> ParseJson(const std::string& text, const std::string& what) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    // parse_error, and out_of_range for a number beyond double's range (1e400).
    return absl::InvalidArgumentError(absl::StrCat(what, ": invalid JSON: ", e.what()));
  }
}

absl::StatusOr<nlohmann::json> ReadJsonFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  return ParseJson(text, path);
}

}  // namespace relserve
