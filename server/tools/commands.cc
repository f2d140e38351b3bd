#include "server/tools/commands.h"

namespace relserve {

const std::vector<ModelCommand>& ModelCommands() {
  static const std::vector<ModelCommand> kCommands = {
      ForwardCommand(), TokenizeCommand(), EmbedCommand(), ZeroShotCommand(),   NerCommand(),      CreateCommand(),
      BenchCommand(),   GemmCommand(),     InfoCommand(),     AccuracyCommand(), DownloadCommand(), ConvertCommand(),
  };
  return kCommands;
}

}  // namespace relserve
