#ifndef RELSERVE_SERVER_TOOLS_CLI_ARGS_H_
#define RELSERVE_SERVER_TOOLS_CLI_ARGS_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "server/util/environment_reader.h"
#include "server/util/flag_table.h"

namespace relserve {

// A command line that cannot be parsed (an unknown option, a missing value, a value of the wrong
// type): INVALID_ARGUMENT, marked so that relserve-model exits 2 for it (1 is for failures of
// the command itself).
absl::Status UsageError(const std::string& message);
bool IsUsageError(const absl::Status& status);

// The options of one relserve-model command, parsed by the command's table of flags
// (server/util/flag_table.h, built with the Cli* builders below): each value already checked
// for its type (an integer with its minimum, true or false, one of a string's allowed values),
// each option that is not given at its default.
class CliArgs {
 public:
  // Parse errors are UsageErrors; with --help or -h anywhere, nothing is checked and
  // *help is set. `environment`: the program's RELSERVE_ variables (EnvironmentWithPrefix),
  // which the table's flags marked FromEnvironment read where the command line does not give
  // them (a table of CliFlagTable), kept for environment().
  static absl::StatusOr<CliArgs> Parse(const std::vector<std::string>& args, const FlagTable<CliArgs>& table,
                                       bool* help = nullptr,
                                       const std::map<std::string, std::string>& environment = {});
  // Every option of `table` at its default.
  static CliArgs Defaults(const FlagTable<CliArgs>& table);

  // Whether the command line gave the option.
  bool Has(const std::string& name) const { return given_.count(name) > 0; }
  // The value of a string, integer or boolean option (its default when not given). Asking for
  // an option the command does not declare, or as another type, is a programming error: "",
  // 0 or false.
  std::string String(const std::string& name) const;
  int Int(const std::string& name) const;
  bool Bool(const std::string& name) const;
  // A string option that must be given, non-empty: "--NAME is required" otherwise.
  absl::StatusOr<std::string> Required(const std::string& name) const;
  // The RELSERVE_ variables Parse was given: what a command reads besides its options
  // (RELSERVE_ALLOCATOR, for the engine's allocator).
  const std::map<std::string, std::string>& environment() const { return environment_; }
  // The process's whole environment as main() reads it, for what a command reads beyond its
  // flags (the HF_ variables of a Hub model, hub/hub_settings.h). Empty (Parse's default, and a
  // test's): no variable is set.
  const GetEnv& process_environment() const { return process_environment_; }
  void set_process_environment(GetEnv environment) { process_environment_ = std::move(environment); }

 private:
  friend Flag<CliArgs> CliString(const std::string&, const std::string&, const std::string&, const std::string&,
                                 std::vector<std::string>, const std::string&);
  friend Flag<CliArgs> CliInt(const std::string&, const std::string&, int64_t, int64_t, const std::string&,
                              const std::string&);
  friend Flag<CliArgs> CliBool(const std::string&, const std::string&);
  friend Flag<CliArgs> CliRequired(const std::string&, const std::string&, const std::string&);

  std::map<std::string, std::string> strings_;
  std::map<std::string, int64_t> ints_;
  std::map<std::string, bool> bools_;
  std::set<std::string> given_;
  std::map<std::string, std::string> environment_;
  GetEnv process_environment_;
  // Set while Defaults() runs each flag's setter: the setter stores its default instead.
  bool applying_defaults_ = false;
};

// The flags of relserve-model's commands, listed under "options" in --help. Each sets its
// default on CliArgs::Defaults and prints it in --help ("(default: D)"), a required one
// "(required)" instead.
//
// A string, "" by default unless `default_value`; with `allowed`, one of those (else a usage
// error: "--NAME: "V" is not one of A, B"). `default_text` replaces the default in --help
// ("the model's"); without it the value is printed, "none" for "".
Flag<CliArgs> CliString(const std::string& name, const std::string& value_name, const std::string& help,
                        const std::string& default_value = "", std::vector<std::string> allowed = {},
                        const std::string& default_text = "");
// A string the command needs (CliArgs::Required): "(required)" in --help.
Flag<CliArgs> CliRequired(const std::string& name, const std::string& value_name, const std::string& help);
// An integer >= `min` (else a usage error: "--NAME: "V" is not an integer >= MIN"), `default_value`
// when not given; `default_text` replaces the default in --help ("all cores").
Flag<CliArgs> CliInt(const std::string& name, const std::string& help, int64_t default_value, int64_t min,
                     const std::string& value_name = "N", const std::string& default_text = "");
// true or false, false by default; a bare --NAME is true.
Flag<CliArgs> CliBool(const std::string& name, const std::string& help);

// The flags of `groups` in order: a command's own (under the heading "options", the builders'
// default) with the shared groups it takes (engine_flags.h, under their own headings).
std::vector<Flag<CliArgs>> CliFlags(std::vector<std::vector<Flag<CliArgs>>> groups);

// A command's table of `flags`, where a flag marked FromEnvironment also reads RELSERVE_ and its
// name (--sentencepiece-module: RELSERVE_SENTENCEPIECE_MODULE), as relserve's flags do.
FlagTable<CliArgs> CliFlagTable(std::vector<Flag<CliArgs>> flags);

}  // namespace relserve

#endif  // RELSERVE_SERVER_TOOLS_CLI_ARGS_H_
