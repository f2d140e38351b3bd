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
// `own` (a subcommand's boolean options) with those of every command that takes --model:
// --offline.
std::set<std::string> WithModelBooleanFlags(std::set<std::string> own = {});
// The directory --model names: the value itself, or the snapshot of a Hub model
// (org/repo[@revision]) in the Hugging Face cache, fetched where files are missing unless
// --offline or HF_HUB_OFFLINE (server/hub/model_resolver.h). Progress goes to standard error.
absl::StatusOr<std::string> ModelDirFromFlags(const CliArgs& args);
// Sets the thread count and loads the engine named by --model (ModelDirFromFlags); the
// directory it loaded goes to *loaded_dir when given.
absl::StatusOr<std::unique_ptr<Engine>> LoadEngineFromFlags(const CliArgs& args, std::string* loaded_dir = nullptr);

}  // namespace relserve

#endif  // RELSERVE_SERVER_TOOLS_ENGINE_FLAGS_H_
