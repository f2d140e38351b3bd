#ifndef RELSERVE_SERVER_TOOLS_COMMANDS_H_
#define RELSERVE_SERVER_TOOLS_COMMANDS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "server/tools/cli_args.h"
#include "server/util/flag_table.h"

namespace relserve {

// One subcommand of relserve-model: its options, declared once (with their help, value names and
// defaults) in a table of flags that parses its command line and writes its --help, and what it
// does with them. `run` returns an error status for a failure (exit 1) or a UsageError (exit 2).
struct ModelCommand {
  std::string name;
  std::string description;  // what it does, for --help
  std::vector<Flag<CliArgs>> flags;
  absl::Status (*run)(const CliArgs& args);
};

// The commands, in the order of the top-level --help.
const std::vector<ModelCommand>& ModelCommands();

ModelCommand ForwardCommand();
ModelCommand TokenizeCommand();
ModelCommand EmbedCommand();
ModelCommand ZeroShotCommand();
ModelCommand NerCommand();
ModelCommand CreateCommand();
ModelCommand BenchCommand();
ModelCommand GemmCommand();
ModelCommand InfoCommand();
ModelCommand AccuracyCommand();
ModelCommand DownloadCommand();
ModelCommand ConvertCommand();

// embed with --whole-input, --window-overlap, --sparse or --multi-vector: through the server's
// serving layer (serving_commands.cc).
absl::Status RunServedEmbedCommand(const CliArgs& args);

}  // namespace relserve

#endif  // RELSERVE_SERVER_TOOLS_COMMANDS_H_
