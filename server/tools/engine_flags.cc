#include "server/tools/engine_flags.h"

#include <thread>

#include "server/util/status_macros.h"

namespace relserve {

const std::set<std::string>& EngineFlagNames() {
  static const std::set<std::string> kNames = {"model", "dtype", "device", "threads", "max-length", "pooling"};
  return kNames;
}

absl::StatusOr<std::unique_ptr<Engine>> LoadEngineFromFlags(const CliArgs& args) {
  ASSIGN_OR_RETURN(std::string dir, args.Required("model"));
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
