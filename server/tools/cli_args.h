#ifndef RELSERVE_SERVER_TOOLS_CLI_ARGS_H_
#define RELSERVE_SERVER_TOOLS_CLI_ARGS_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace relserve {

// A command line that cannot be parsed (an unknown option, a missing value): INVALID_ARGUMENT,
// marked so that relserve-model exits 2 for it (1 is for failures of the command itself).
absl::Status UsageError(const std::string& message);
bool IsUsageError(const absl::Status& status);

// "--name value" and "--name=value" options of one subcommand, parsed by a table of flags
// (server/util/flag_table.h) made of the names the subcommand declares; a boolean option is
// true or false, a bare "--flag" true. Parse errors are UsageErrors.
class CliArgs {
 public:
  static absl::StatusOr<CliArgs> Parse(const std::vector<std::string>& args, const std::set<std::string>& known,
                                       const std::set<std::string>& boolean_flags = {});

  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  std::string String(const std::string& name, const std::string& fallback = "") const;
  absl::StatusOr<std::string> Required(const std::string& name) const;
  absl::StatusOr<int> Int(const std::string& name, int fallback) const;
  bool Bool(const std::string& name) const;

 private:
  std::map<std::string, std::string> values_;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_TOOLS_CLI_ARGS_H_
