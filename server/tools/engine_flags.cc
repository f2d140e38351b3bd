#include "server/tools/engine_flags.h"

#include <thread>

#include "server/hub/model_resolver.h"
#include "server/util/status_macros.h"

namespace relserve {

const std::set<std::string>& EngineFlagNames() {
  static const std::set<std::string> kNames = {"model", "dtype", "device", "threads", "max-length", "pooling"};
  return kNames;
}

std::set<std::string> WithModelBooleanFlags(std::set<std::string> own) {
  own.insert("offline");
  return own;
}

absl::StatusOr<std::string> ModelDirFromFlags(const CliArgs& args) {
  ASSIGN_OR_RETURN(std::string spec, args.Required("model"));
  if (!NamesHubModel(spec)) return spec;
  ASSIGN_OR_RETURN(HubSettings settings, HubSettingsFromEnvironment());
  if (args.Bool("offline")) {
    settings.offline = true;
    settings.offline_source = "--offline";
  }
  DownloadProgress progress = DownloadProgress::ForStandardError();
  return ResolveModelDir(spec, settings, &progress);
}

absl::StatusOr<std::unique_ptr<Engine>> LoadEngineFromFlags(const CliArgs& args, std::string* loaded_dir) {
  ASSIGN_OR_RETURN(std::string dir, ModelDirFromFlags(args));
  if (loaded_dir != nullptr) *loaded_dir = dir;
  ASSIGN_OR_RETURN(int threads, args.Int("threads", static_cast<int>(std::thread::hardware_concurrency())));
  SetComputeThreads(threads);
  EngineOptions options;
  options.dtype = args.String("dtype", "float32");
  options.device = args.String("device", "cpu");
  ASSIGN_OR_RETURN(options.max_length, args.Int("max-length", 0));
  options.pooling = args.String("pooling");
  return Engine::Load(dir, options);
}

}  // namespace relserve
