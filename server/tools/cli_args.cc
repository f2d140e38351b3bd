#include "server/tools/cli_args.h"

#include <limits>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace relserve {
namespace {

constexpr char kUsagePayload[] = "relserve.usage_error";

// "(default: TEXT)" in --help.
std::function<std::string(const CliArgs&)> DefaultText(const std::string& text) {
  return [text](const CliArgs&) { return text; };
}

}  // namespace

absl::Status UsageError(const std::string& message) {
  absl::Status status = absl::InvalidArgumentError(message);
  status.SetPayload(kUsagePayload, absl::Cord("1"));
  return status;
}

bool IsUsageError(const absl::Status& status) { return status.GetPayload(kUsagePayload).has_value(); }

CliArgs CliArgs::Defaults(const FlagTable<CliArgs>& table) {
  CliArgs out;
  out.applying_defaults_ = true;
  for (const Flag<CliArgs>& f : table.flags()) f.set("", &out).IgnoreError();
  out.applying_defaults_ = false;
  return out;
}

absl::StatusOr<CliArgs> CliArgs::Parse(const std::vector<std::string>& args, const FlagTable<CliArgs>& table,
                                       bool* help, const std::map<std::string, std::string>& environment) {
  CliArgs out = Defaults(table);
  auto parsed = table.Parse(args, environment, &out);
  if (!parsed.ok()) return UsageError(std::string(parsed.status().message()));
  if (help != nullptr) *help = parsed->help;
  out.environment_ = environment;
  return out;
}

FlagTable<CliArgs> CliFlagTable(std::vector<Flag<CliArgs>> flags) {
  FlagTableOptions options;
  options.environment_prefix = "RELSERVE_";  // only for the flags marked FromEnvironment
  return FlagTable<CliArgs>(std::move(flags), std::move(options));
}

std::string CliArgs::String(const std::string& name) const {
  auto it = strings_.find(name);
  return it == strings_.end() ? "" : it->second;
}

int CliArgs::Int(const std::string& name) const {
  auto it = ints_.find(name);
  return it == ints_.end() ? 0 : static_cast<int>(it->second);
}

bool CliArgs::Bool(const std::string& name) const {
  auto it = bools_.find(name);
  return it != bools_.end() && it->second;
}

absl::StatusOr<std::string> CliArgs::Required(const std::string& name) const {
  const std::string value = String(name);
  if (value.empty()) return absl::InvalidArgumentError(absl::StrCat("--", name, " is required"));
  return value;
}

Flag<CliArgs> CliString(const std::string& name, const std::string& value_name, const std::string& help,
                        const std::string& default_value, std::vector<std::string> allowed,
                        const std::string& default_text) {
  Flag<CliArgs> f = CustomFlag<CliArgs>(
      name, value_name, help,
      [name, default_value, allowed](const std::string& v, CliArgs* c) {
        if (c->applying_defaults_) {
          c->strings_[name] = default_value;
          return absl::OkStatus();
        }
        if (absl::Status s = CheckFlagChoice(name, v, allowed); !s.ok()) return s;
        c->strings_[name] = v;
        c->given_.insert(name);
        return absl::OkStatus();
      },
      DefaultText(!default_text.empty() ? default_text : !default_value.empty() ? default_value : "none"));
  f.section = "options";
  return f;
}

Flag<CliArgs> CliRequired(const std::string& name, const std::string& value_name, const std::string& help) {
  return CliString(name, value_name, help + " (required)").NoDefault();
}

Flag<CliArgs> CliInt(const std::string& name, const std::string& help, int64_t default_value, int64_t min,
                     const std::string& value_name, const std::string& default_text) {
  Flag<CliArgs> f = CustomFlag<CliArgs>(
      name, value_name, help,
      [name, default_value, min](const std::string& v, CliArgs* c) {
        if (c->applying_defaults_) {
          c->ints_[name] = default_value;
          return absl::OkStatus();
        }
        int64_t x = 0;
        if (absl::Status s = ParseFlagInt(name, v, min, &x); !s.ok()) return s;
        // The commands read ints: a value beyond them is refused as not an integer.
        if (x > std::numeric_limits<int>::max()) {
          return absl::InvalidArgumentError(
              absl::StrCat("--", name, ": \"", v, "\" is not an integer from ", min, " to ",
                           std::numeric_limits<int>::max()));
        }
        c->ints_[name] = x;
        c->given_.insert(name);
        return absl::OkStatus();
      },
      DefaultText(default_text.empty() ? absl::StrCat(default_value) : default_text));
  f.section = "options";
  return f;
}

Flag<CliArgs> CliBool(const std::string& name, const std::string& help) {
  Flag<CliArgs> f = CustomFlag<CliArgs>(
                        name, "", help,
                        [name](const std::string& v, CliArgs* c) {
                          if (c->applying_defaults_) {
                            c->bools_[name] = false;
                            return absl::OkStatus();
                          }
                          bool value = false;
                          if (absl::Status s = ParseFlagBool(name, v, &value); !s.ok()) return s;
                          c->bools_[name] = value;
                          c->given_.insert(name);
                          return absl::OkStatus();
                        },
                        DefaultText("false"))
                        .Boolean();
  f.section = "options";
  return f;
}

std::vector<Flag<CliArgs>> CliFlags(std::vector<std::vector<Flag<CliArgs>>> groups) {
  std::vector<Flag<CliArgs>> out;
  for (auto& group : groups) {
    for (auto& f : group) out.push_back(std::move(f));
  }
  return out;
}

}  // namespace relserve
