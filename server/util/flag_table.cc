#include "server/util/flag_table.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

extern char** environ;

namespace relserve {
namespace {

absl::Status NotA(const std::string& flag, const std::string& value, const std::string& expected) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, ": \"", value, "\" is not ", expected));
}

}  // namespace

absl::Status ParseFlagBool(const std::string& flag, const std::string& value, bool* out) {
  if (value != "true" && value != "false") return NotA(flag, value, "true or false");
  *out = value == "true";
  return absl::OkStatus();
}

absl::Status ParseFlagInt(const std::string& flag, const std::string& value, int64_t min, int64_t* out) {
  int64_t x = 0;
  if (!absl::SimpleAtoi(value, &x) || x < min) return NotA(flag, value, absl::StrCat("an integer >= ", min));
  *out = x;
  return absl::OkStatus();
}

absl::Status ParseFlagNumber(const std::string& flag, const std::string& value, double min, double max,
                             const std::string& expected, double* out) {
  double x = 0;
  if (!absl::SimpleAtod(value, &x) || !(x >= min) || !(x <= max)) return NotA(flag, value, expected);
  *out = x;
  return absl::OkStatus();
}

absl::Status CheckFlagChoice(const std::string& flag, const std::string& value, const std::vector<std::string>& allowed) {
  if (allowed.empty() || std::find(allowed.begin(), allowed.end(), value) != allowed.end()) return absl::OkStatus();
  return NotA(flag, value, absl::StrCat("one of ", absl::StrJoin(allowed, ", ")));
}

std::vector<std::string> SplitFlagListValue(const std::string& value) {
  std::vector<std::string> items;
  for (absl::string_view item : absl::StrSplit(value, ',')) items.emplace_back(absl::StripAsciiWhitespace(item));
  return items;
}

std::string FlagVariableName(const std::string& prefix, const std::string& flag) {
  std::string name = prefix + absl::AsciiStrToUpper(flag);
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

std::map<std::string, std::string> EnvironmentWithPrefix(const std::string& prefix) {
  std::map<std::string, std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry = *e;
    const size_t eq = entry.find('=');
    if (eq == std::string::npos || entry.rfind(prefix, 0) != 0) continue;
    out.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return out;
}

}  // namespace relserve
