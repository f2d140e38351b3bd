// relserve-client: every relserve RPC from the command line, gRPC health checks, and a
// closed-loop load generator. Parses flags, opens the channel, hands over to the subcommand.
#include <cstdlib>
#include <iostream>

#include "client/bench_report.h"
#include "client/bench_runner.h"
#include "client/client_channel.h"
#include "client/client_flags.h"
#include "client/exit_codes.h"
#include "client/health_check.h"
#include "client/response_json.h"
#include "client/rpc_commands.h"

namespace {

int UsageError(const absl::Status& status, bool quiet) {
  if (!quiet) {
    std::cerr << relserve::client::ErrorJson("INVALID_ARGUMENT", std::string(status.message())).dump() << std::endl;
  }
  return relserve::client::kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace relserve::client;
  auto command = ParseClientArgs(std::vector<std::string>(argv + 1, argv + argc),
                                 ClientEnvironment(std::getenv("RELSERVE_API_KEY")));
  if (!command.ok()) return UsageError(command.status(), false);
  if (command->help) {
    std::cout << Usage(command->name);
    return kExitOk;
  }
  auto channel = CreateClientChannel(command->connection);
  if (!channel.ok()) return UsageError(channel.status(), command->quiet && command->name == "health");
  if (command->name == "health") return RunHealthCheck(*command, *channel, std::cout, std::cerr);
  if (command->name == "bench") {
    auto result = RunBench(*command, *channel, std::cerr);
    if (!result.ok()) return UsageError(result.status(), false);
    std::cout << BenchReport(*result).dump() << std::endl;
    return kExitOk;
  }
  return RunRpcCommand(*command, *channel, std::cin, std::cout, std::cerr);
}
