#ifndef RELSERVE_SERVER_UTIL_FLAG_TABLE_H_
#define RELSERVE_SERVER_UTIL_FLAG_TABLE_H_

// The command-line flags of relserve's programs (relserve, relserve-model, relserve-client):
// one table of flags per program, generic over the struct the flags fill, that parses argv,
// reads environment variables and writes the --help text, the same way for every program.
//
// Command lines: "--name value", "--name=value", a boolean's bare "--name" (true), "--help" or
// "-h" anywhere before "--" (help wins over every other flag, whose values are then neither
// checked nor applied), and "--" after which every argument is positional. A boolean flag takes
// the next argument as its value only in a program without positional arguments, and only when
// that argument does not start with "--". A flag given twice is set twice (a repeatable one
// adds, another one's last value wins).
//
// Environment: with an environment_prefix, a flag that reads the environment takes its value
// from PREFIX and its name in upper case with dashes as underscores ("max-batch-size" ->
// RELSERVE_MAX_BATCH_SIZE) when the command line does not give it; a repeatable flag's variable
// holds a comma-separated list. Errors of a value from the environment name the variable.
//
// --help: "  --name VALUE  $VARIABLE" and, indented below, the help with "(default: D)" where
// the flag prints one and " [a,b]" (the subcommands it applies to) in a program-wide listing.

#include <functional>
#include <map>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace relserve {

// Checks of one value for one flag; errors are INVALID_ARGUMENT, "--NAME: "VALUE" is not ...".
absl::Status ParseFlagBool(const std::string& flag, const std::string& value, bool* out);
absl::Status ParseFlagInt(const std::string& flag, const std::string& value, int64_t min, int64_t* out);
// A number within [min, max]; `expected` says what was expected ("a number >= 0").
absl::Status ParseFlagNumber(const std::string& flag, const std::string& value, double min, double max,
                             const std::string& expected, double* out);
// `value` must be one of `allowed` (any value when it is empty).
absl::Status CheckFlagChoice(const std::string& flag, const std::string& value, const std::vector<std::string>& allowed);

// The items of a comma-separated list, each without surrounding whitespace.
std::vector<std::string> SplitFlagListValue(const std::string& value);

// PREFIX and the flag's name in upper case with dashes as underscores.
std::string FlagVariableName(const std::string& prefix, const std::string& flag);
// The process's environment variables whose names start with `prefix`.
std::map<std::string, std::string> EnvironmentWithPrefix(const std::string& prefix);

template <typename Config>
struct Flag {
  std::string name;        // without the dashes
  std::string value_name;  // "--name VALUE" in --help; empty: shown as a bare switch
  std::string help;
  std::function<absl::Status(const std::string& value, Config* config)> set;
  // "(default: ...)" in --help; null: none (the help says it, or there is none).
  std::function<std::string(const Config& defaults)> default_text;
  bool boolean = false;     // a bare "--name" means "--name=true"
  bool repeatable = false;  // its variable holds a comma-separated list
  bool environment = false;  // read from the environment (with FlagTableOptions::environment_prefix)
  std::vector<std::string> commands;  // the subcommands it applies to; empty: every one
  std::string section = "flags";      // the --help heading it is listed under

  Flag& For(std::vector<std::string> subcommands) {
    commands = std::move(subcommands);
    return *this;
  }
  Flag& In(std::string heading) {
    section = std::move(heading);
    return *this;
  }
  Flag& ValueName(std::string value) {
    value_name = std::move(value);
    return *this;
  }
  Flag& NoDefault() {
    default_text = nullptr;
    return *this;
  }
  Flag& Boolean() {
    boolean = true;
    return *this;
  }
  Flag& Repeatable() {
    repeatable = true;
    return *this;
  }
  Flag& FromEnvironment() {
    environment = true;
    return *this;
  }
  bool AppliesTo(const std::string& command) const {
    if (commands.empty() || command.empty()) return true;
    for (const std::string& c : commands) {
      if (c == command) return true;
    }
    return false;
  }
};

// Where a typed builder stores its value: Field(&Config::x) or Field(&Config::part, &Part::x).
template <typename Config, typename T>
using FlagField = std::function<T*(Config*)>;

template <typename Config, typename T>
FlagField<Config, T> Field(T Config::*field) {
  return [field](Config* c) { return &(c->*field); };
}
template <typename Config, typename Part, typename T>
FlagField<Config, T> Field(Part Config::*part, T Part::*field) {
  return [part, field](Config* c) { return &((c->*part).*field); };
}

namespace flag_internal {
template <typename Config>
Flag<Config> MakeFlag(std::string name, std::string value_name, std::string help,
                      std::function<absl::Status(const std::string&, Config*)> set,
                      std::function<std::string(const Config&)> default_text) {
  Flag<Config> f;
  f.name = std::move(name);
  f.value_name = std::move(value_name);
  f.help = std::move(help);
  f.set = std::move(set);
  f.default_text = std::move(default_text);
  return f;
}

template <typename Config, typename T>
std::function<std::string(const Config&)> Printer(FlagField<Config, T> field) {
  return [field](const Config& defaults) {
    Config copy = defaults;
    if constexpr (std::is_same_v<T, bool>) {
      return std::string(*field(&copy) ? "true" : "false");
    } else if constexpr (std::is_same_v<T, std::string>) {
      return *field(&copy);
    } else {
      return absl::StrCat(*field(&copy));
    }
  };
}
}  // namespace flag_internal

// true or false; a bare --name is true. Shown as "--name true|false".
template <typename Config>
Flag<Config> BoolFlag(const std::string& name, const std::string& help, FlagField<Config, bool> field) {
  Flag<Config> f = flag_internal::MakeFlag<Config>(
      name, "true|false", help,
      [name, field](const std::string& v, Config* c) { return ParseFlagBool(name, v, field(c)); },
      flag_internal::Printer<Config, bool>(field));
  f.boolean = true;
  return f;
}

// An integer >= min.
template <typename Config, typename T>
Flag<Config> IntFlag(const std::string& name, const std::string& help, FlagField<Config, T> field, int64_t min) {
  return flag_internal::MakeFlag<Config>(name, "N", help,
          [name, field, min](const std::string& v, Config* c) {
            int64_t x = 0;
            if (absl::Status s = ParseFlagInt(name, v, min, &x); !s.ok()) return s;
            *field(c) = static_cast<T>(x);
            return absl::OkStatus();
          },
          flag_internal::Printer<Config, T>(field));
}

// A number within [min, max]; `expected` words the range for errors ("a number >= 0").
template <typename Config>
Flag<Config> NumberFlag(const std::string& name, const std::string& value_name, const std::string& help,
                        FlagField<Config, double> field, double min, double max, const std::string& expected) {
  return flag_internal::MakeFlag<Config>(name, value_name, help,
          [=](const std::string& v, Config* c) { return ParseFlagNumber(name, v, min, max, expected, field(c)); },
          flag_internal::Printer<Config, double>(field));
}

// Any string, or (with `allowed`) one of those.
template <typename Config>
Flag<Config> StringFlag(const std::string& name, const std::string& value_name, const std::string& help,
                        FlagField<Config, std::string> field, std::vector<std::string> allowed = {}) {
  return flag_internal::MakeFlag<Config>(name, value_name, help,
          [name, field, allowed](const std::string& v, Config* c) {
            if (absl::Status s = CheckFlagChoice(name, v, allowed); !s.ok()) return s;
            *field(c) = v;
            return absl::OkStatus();
          },
          flag_internal::Printer<Config, std::string>(field));
}

// A flag with its own setter (and default printer, or none).
template <typename Config>
Flag<Config> CustomFlag(const std::string& name, const std::string& value_name, const std::string& help,
                        std::function<absl::Status(const std::string&, Config*)> set,
                        std::function<std::string(const Config&)> default_text = nullptr) {
  return flag_internal::MakeFlag<Config>(name, value_name, help, std::move(set), std::move(default_text));
}

struct FlagTableOptions {
  std::string environment_prefix;           // "": no flag reads the environment
  bool every_flag_from_environment = false;  // else only flags marked FromEnvironment()
  // Non-empty: the first positional argument must name one of these (flags may come before it),
  // and the rest are the command's arguments.
  std::vector<std::string> subcommands;
  bool positional_arguments = false;  // arguments that are not flags are accepted (else refused)
};

// What a command line held besides the flags' values.
struct ParsedCommandLine {
  bool help = false;  // --help or -h: the flags were not applied
  std::string command;  // the subcommand ("" without subcommands, or with --help and none)
  std::vector<std::string> arguments;  // the positional arguments (after the subcommand)
  // Each flag given, by name: "--name", or the variable its value came from.
  std::map<std::string, std::string> origin;
};

template <typename Config>
class FlagTable {
 public:
  FlagTable(std::vector<Flag<Config>> flags, FlagTableOptions options = {})
      : flags_(std::move(flags)), options_(std::move(options)) {}

  const std::vector<Flag<Config>>& flags() const { return flags_; }
  const FlagTableOptions& options() const { return options_; }

  const Flag<Config>* Find(const std::string& name) const {
    for (const Flag<Config>& f : flags_) {
      if (f.name == name) return &f;
    }
    return nullptr;
  }

  bool ReadsEnvironment(const Flag<Config>& f) const {
    return !options_.environment_prefix.empty() && (options_.every_flag_from_environment || f.environment);
  }
  // The variable a flag is read from; "" for one that reads none.
  std::string Variable(const Flag<Config>& f) const {
    return ReadsEnvironment(f) ? FlagVariableName(options_.environment_prefix, f.name) : "";
  }
  std::set<std::string> Variables() const {
    std::set<std::string> out;
    for (const Flag<Config>& f : flags_) {
      if (ReadsEnvironment(f)) out.insert(Variable(f));
    }
    return out;
  }

  // Parses argv (after the program name, or after relserve-model's command) into *config, then
  // `environment` (variable -> value) for the flags the command line left out.
  absl::StatusOr<ParsedCommandLine> Parse(const std::vector<std::string>& args,
                                          const std::map<std::string, std::string>& environment,
                                          Config* config) const {
    ParsedCommandLine out;
    for (const std::string& a : args) {
      if (a == "--") break;
      if (a == "--help" || a == "-h") out.help = true;
    }
    const bool takes_positionals = options_.positional_arguments || !options_.subcommands.empty();
    std::vector<std::pair<const Flag<Config>*, std::string>> given;
    bool flags_done = false;
    for (size_t i = 0; i < args.size(); ++i) {
      const std::string& a = args[i];
      if (!flags_done && (a == "--help" || a == "-h")) continue;
      if (!flags_done && a == "--") {
        flags_done = true;
        continue;
      }
      if (flags_done || a.rfind("--", 0) != 0) {
        if (absl::Status s = Positional(a, &out); !s.ok()) return s;
        continue;
      }
      std::string name = a.substr(2), value;
      bool has_value = false;
      if (const auto eq = name.find('='); eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
        has_value = true;
      }
      const Flag<Config>* flag = Find(name);
      if (flag == nullptr) {
        if (out.help) continue;
        return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name, " (known: ", KnownFlags(), ")"));
      }
      if (!has_value) {
        if (flag->boolean && (takes_positionals || i + 1 == args.size() || args[i + 1].rfind("--", 0) == 0)) {
          value = "true";
        } else if (i + 1 < args.size()) {
          value = args[++i];
        } else {
          if (out.help) break;
          return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
        }
      }
      given.emplace_back(flag, value);
    }
    if (out.help) return out;
    if (!options_.subcommands.empty() && out.command.empty()) {
      return absl::InvalidArgumentError("no subcommand given (see --help)");
    }
    for (const auto& [flag, value] : given) {
      if (!flag->AppliesTo(out.command)) {
        return absl::InvalidArgumentError(absl::StrCat("--", flag->name, " does not apply to ", out.command));
      }
      if (absl::Status s = flag->set(value, config); !s.ok()) return s;
      out.origin[flag->name] = absl::StrCat("--", flag->name);
    }
    for (const Flag<Config>& f : flags_) {
      if (!ReadsEnvironment(f) || out.origin.count(f.name) || !f.AppliesTo(out.command)) continue;
      const std::string variable = Variable(f);
      const auto it = environment.find(variable);
      if (it == environment.end()) continue;
      if (absl::Status s = SetFromVariable(f, it->second, config); !s.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(variable, " (environment): ", s.message()));
      }
      out.origin[f.name] = variable;
    }
    return out;
  }

  // The flags that apply to `command` ("": all of them), under their headings in the order they
  // first appear: "HEADING:\n" and two lines a flag (see the top of this file).
  std::string Help(const Config& defaults, const std::string& command = "") const {
    std::vector<std::pair<std::string, std::string>> sections;
    for (const Flag<Config>& f : flags_) {
      if (!f.AppliesTo(command)) continue;
      auto it = sections.begin();
      while (it != sections.end() && it->first != f.section) ++it;
      if (it == sections.end()) it = sections.insert(sections.end(), {f.section, ""});
      const std::string variable = Variable(f);
      absl::StrAppend(&it->second, "  --", f.name, f.value_name.empty() ? "" : " ", f.value_name,
                      variable.empty() ? "" : "  $", variable, "\n      ", f.help);
      if (f.default_text) absl::StrAppend(&it->second, " (default: ", f.default_text(defaults), ")");
      if (command.empty() && !f.commands.empty()) absl::StrAppend(&it->second, " [", absl::StrJoin(f.commands, ","), "]");
      absl::StrAppend(&it->second, "\n");
    }
    std::string out;
    for (const auto& [heading, lines] : sections) absl::StrAppend(&out, out.empty() ? "" : "\n", heading, ":\n", lines);
    return out;
  }

 private:
  absl::Status Positional(const std::string& a, ParsedCommandLine* out) const {
    if (!options_.subcommands.empty() && out->command.empty()) {
      for (const std::string& s : options_.subcommands) {
        if (s == a) {
          out->command = a;
          return absl::OkStatus();
        }
      }
      return absl::InvalidArgumentError(absl::StrCat("unknown subcommand \"", a, "\" (see --help)"));
    }
    if (!options_.positional_arguments && options_.subcommands.empty()) {
      if (out->help) return absl::OkStatus();
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument \"", a, "\""));
    }
    out->arguments.push_back(a);
    return absl::OkStatus();
  }

  std::string KnownFlags() const {
    std::vector<std::string> names;
    for (const Flag<Config>& f : flags_) names.push_back("--" + f.name);
    return absl::StrJoin(names, ", ");
  }

  // A repeatable flag's variable is a comma-separated list, each item stripped of whitespace.
  absl::Status SetFromVariable(const Flag<Config>& f, const std::string& value, Config* config) const {
    if (!f.repeatable) return f.set(value, config);
    const std::vector<std::string> items = SplitFlagListValue(value);
    for (size_t k = 0; k < items.size(); ++k) {
      if (items[k].empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("item ", k + 1, " of ", items.size(), " is empty (items are separated by commas)"));
      }
      if (absl::Status s = f.set(items[k], config); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  std::vector<Flag<Config>> flags_;
  FlagTableOptions options_;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_UTIL_FLAG_TABLE_H_
