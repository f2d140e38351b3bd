// relserve: the gRPC server. Parses flags, starts, waits for SIGTERM/SIGINT, drains.
#include <cstdlib>
#include <iostream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "server/main/relserve_server.h"
#include "server/main/server_config.h"
#include "server/main/shutdown_signals.h"
#include "server/util/fd_limit.h"
#include "server/util/log.h"
#include "server/model/layers/packed_linear.h"
#include "server/util/process_tuning.h"

namespace {

// Runs before the constructors of every shared library (see shutdown_signals.h): the threads
// that libraries start while loading inherit a mask that blocks SIGTERM and SIGINT.
void BlockSignalsBeforeLibraries(int, char**, char**) { relserve::BlockShutdownSignals(); }
__attribute__((section(".preinit_array"), used)) void (*const block_signals_early)(int, char**, char**) =
    &BlockSignalsBeforeLibraries;

}  // namespace

int main(int argc, char** argv) {
  // The one reader of the process's environment; the libraries are handed it (or the RELSERVE_
  // variables, through the flag table).
  const relserve::GetEnv process_environment = [](const char* name) -> const char* { return std::getenv(name); };
  relserve::TuneProcessForInference(argv, process_environment, relserve::Float32TakesEveryBatchByDefault());
  const auto environment = relserve::RelserveEnvironment();
  auto config = relserve::ParseServerFlags(std::vector<std::string>(argv + 1, argv + argc), environment);
  if (!config.ok()) {
    const bool help = config.status().code() == absl::StatusCode::kFailedPrecondition;
    (help ? std::cout : std::cerr) << (help ? "" : "relserve: ") << config.status().message() << "\n";
    return help ? 0 : 2;
  }
  for (const std::string& name : relserve::UnknownRelserveVariables(environment)) {
    relserve::LogWarning(absl::StrCat("ignoring the environment variable ", name, ": no flag is named --",
                                      absl::StrReplaceAll(absl::AsciiStrToLower(name.substr(9)), {{"_", "-"}})));
  }
  relserve::RaiseOpenFilesLimitAndLog();
  // The first signal stops start-up or starts the drain; a second one during the drain ends
  // the grace period at once (calls still running are answered UNAVAILABLE).
  absl::Notification stop;
  relserve::ShutdownSignals signals([&stop](int signal, int count) {
    const std::string name = relserve::ShutdownSignalName(signal);
    if (count == 1) {
      relserve::LogInfo(absl::StrCat("received ", name));
      stop.Notify();
    } else {
      relserve::LogInfo(absl::StrCat("received ", name, " again: ending the grace period now"));
    }
  });
  auto server = relserve::RelserveServer::Start(*config, [&stop] { return stop.HasBeenNotified(); }, process_environment);
  if (!server.ok()) {
    if (stop.HasBeenNotified() && server.status().code() == absl::StatusCode::kCancelled) {
      relserve::LogInfo(absl::StrCat(server.status().message(), "; stopped"));
      return 0;
    }
    relserve::LogError(std::string(server.status().message()));
    return 1;
  }
  stop.WaitForNotification();
  (*server)->Shutdown(absl::Seconds(config->shutdown_grace_seconds), [&signals] { return signals.count() >= 2; });
  return 0;
}
