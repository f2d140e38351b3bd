#include "server/tools/cli_args.h"

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace relserve {
namespace {

constexpr char kUsagePayload[] = "relserve.usage_error";

}  // namespace

absl::Status UsageError(const std::string& message) {
  absl::Status status = absl::InvalidArgumentError(message);
  status.SetPayload(kUsagePayload, absl::Cord("1"));
  return status;
}

bool IsUsageError(const absl::Status& status) { return status.GetPayload(kUsagePayload).has_value(); }

absl::StatusOr<CliArgs> CliArgs::Parse(const std::vector<std::string>& args, const std::set<std::string>& known,
                                       const std::set<std::string>& boolean_flags) {
  CliArgs out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--", 0) != 0) return UsageError(absl::StrCat("unexpected argument \"", a, "\""));
    std::string name = a.substr(2), value;
    const auto eq = name.find('=');
    const bool inline_value = eq != std::string::npos;
    if (inline_value) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (!known.count(name) && !boolean_flags.count(name)) {
      return UsageError(absl::StrCat("unknown option --", name, " (known: --",
                                                     absl::StrJoin(known, ", --"),
                                                     boolean_flags.empty() ? "" : ", --",
                                                     absl::StrJoin(boolean_flags, ", --"), ")"));
    }
    if (!inline_value) {
      if (boolean_flags.count(name)) {
        value = "true";
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        return UsageError(absl::StrCat("option --", name, " needs a value"));
      }
    }
    out.values_[name] = value;
  }
  return out;
}

std::string CliArgs::String(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

absl::StatusOr<std::string> CliArgs::Required(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end() || it->second.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("option --", name, " is required"));
  }
  return it->second;
}

absl::StatusOr<int> CliArgs::Int(const std::string& name, int fallback) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  int v;
  if (!absl::SimpleAtoi(it->second, &v)) {
    return absl::InvalidArgumentError(absl::StrCat("option --", name, ": \"", it->second, "\" is not an integer"));
  }
  return v;
}

bool CliArgs::Bool(const std::string& name) const {
  auto it = values_.find(name);
  return it != values_.end() && (it->second == "true" || it->second == "1" || it->second == "yes");
}

}  // namespace relserve
