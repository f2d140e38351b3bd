// relserve: the gRPC server. Parses flags, starts, waits for SIGTERM/SIGINT, drains.
#include <csignal>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "server/main/relserve_server.h"
#include "server/main/server_config.h"
#include "server/util/fd_limit.h"
#include "server/util/log.h"
#include "server/util/process_tuning.h"

int main(int argc, char** argv) {
  relserve::TuneProcessForInference(argv);
  auto config = relserve::ParseServerFlags(std::vector<std::string>(argv + 1, argv + argc));
  if (!config.ok()) {
    const bool help = config.status().code() == absl::StatusCode::kFailedPrecondition;
    (help ? std::cout : std::cerr) << (help ? "" : "relserve: ") << config.status().message() << "\n";
    return help ? 0 : 2;
  }
  relserve::RaiseOpenFilesLimitAndLog();
  // Signals go to sigwait below, not to whichever thread happens to run.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto server = relserve::RelserveServer::Start(*config);
  if (!server.ok()) {
    relserve::LogError(std::string(server.status().message()));
    return 1;
  }
  int signal_number = 0;
  sigwait(&signals, &signal_number);
  relserve::LogInfo(absl::StrCat("received ", signal_number == SIGTERM ? "SIGTERM" : "SIGINT"));
  (*server)->Shutdown(absl::Seconds(config->shutdown_grace_seconds));
  return 0;
}
