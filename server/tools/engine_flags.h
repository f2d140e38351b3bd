#ifndef RELSERVE_SERVER_TOOLS_ENGINE_FLAGS_H_
#define RELSERVE_SERVER_TOOLS_ENGINE_FLAGS_H_

#include <memory>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "server/model/engine.h"
#include "server/tools/cli_args.h"

namespace relserve {

// Options every engine-loading subcommand shares: --model --dtype --threads --max-length --pooling.
const std::set<std::string>& EngineFlagNames();
// Sets the thread count and loads the engine named by --model.
absl::StatusOr<std::unique_ptr<Engine>> LoadEngineFromFlags(const CliArgs& args);

}  // namespace relserve

#endif  // RELSERVE_SERVER_TOOLS_ENGINE_FLAGS_H_
