#include "server/tools/cli_args.h"

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/util/flag_table.h"

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
  // The options of one command, as a table whose flags store their values by name: the
  // commands read them with the accessors below.
  std::vector<Flag<CliArgs>> flags;
  for (const std::string& name : known) {
    flags.push_back(CustomFlag<CliArgs>(name, "VALUE", "", [name](const std::string& v, CliArgs* out) {
      out->values_[name] = v;
      return absl::OkStatus();
    }));
  }
  for (const std::string& name : boolean_flags) {
    flags.push_back(CustomFlag<CliArgs>(name, "", "",
                                        [name](const std::string& v, CliArgs* out) {
                                          bool value = false;
                                          if (absl::Status s = ParseFlagBool(name, v, &value); !s.ok()) return s;
                                          out->values_[name] = value ? "true" : "false";
                                          return absl::OkStatus();
                                        })
                        .Boolean());
  }
  CliArgs out;
  auto parsed = FlagTable<CliArgs>(std::move(flags)).Parse(args, {}, &out);
  if (!parsed.ok()) return UsageError(std::string(parsed.status().message()));
  return out;
}

std::string CliArgs::String(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

absl::StatusOr<std::string> CliArgs::Required(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end() || it->second.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, " is required"));
  }
  return it->second;
}

absl::StatusOr<int> CliArgs::Int(const std::string& name, int fallback) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  int v;
  if (!absl::SimpleAtoi(it->second, &v)) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, ": \"", it->second, "\" is not an integer"));
  }
  return v;
}

bool CliArgs::Bool(const std::string& name) const {
  auto it = values_.find(name);
  return it != values_.end() && it->second == "true";
}

}  // namespace relserve
