#ifndef RELSERVE_SERVER_TOOLS_COMMANDS_H_
#define RELSERVE_SERVER_TOOLS_COMMANDS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "server/tools/cli_args.h"

namespace relserve {

// The subcommands of relserve-model. Each takes the arguments after its name and returns an
// error status for bad usage or a failure; main prints it and exits non-zero.
absl::Status RunForwardCommand(const std::vector<std::string>& args);
absl::Status RunTokenizeCommand(const std::vector<std::string>& args);
absl::Status RunEmbedCommand(const std::vector<std::string>& args);
absl::Status RunCreateCommand(const std::vector<std::string>& args);
absl::Status RunBenchCommand(const std::vector<std::string>& args);
absl::Status RunInfoCommand(const std::vector<std::string>& args);
absl::Status RunAccuracyCommand(const std::vector<std::string>& args);
absl::Status RunDownloadCommand(const std::vector<std::string>& args);
absl::Status RunConvertCommand(const std::vector<std::string>& args);
absl::Status RunZeroShotCommand(const std::vector<std::string>& args);
// embed with --whole-input, --window-overlap, --sparse or --multi-vector: through the server's
// serving layer (serving_commands.cc).
absl::Status RunServedEmbedCommand(const CliArgs& args);

// create's options for --help: the shared ones, then each family's own (create_options()).
std::string CreateCommandSynopsis();

}  // namespace relserve

#endif  // RELSERVE_SERVER_TOOLS_COMMANDS_H_
