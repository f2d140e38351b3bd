// The relserve binary as an operator runs it: flags, start-up log, SIGTERM, exit code.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/server_test_env.h"

namespace relserve {
namespace {

using ::testing::HasSubstr;

struct Process {
  pid_t pid = -1;
  std::string log_path;
};

Process Launch(const std::vector<std::string>& args) {
  Process p;
  // A fresh file per launch: the port is read from it, and an old one would name an old port.
  static int launches = 0;
  p.log_path = ::testing::TempDir() + "relserve-binary-" + std::to_string(getpid()) + "-" +
               std::to_string(++launches) + ".log";
  std::remove(p.log_path.c_str());
  p.pid = fork();
  if (p.pid == 0) {
    FILE* log = std::freopen(p.log_path.c_str(), "w", stderr);
    FILE* out = std::freopen("/dev/null", "w", stdout);
    (void)log;
    (void)out;
    std::vector<char*> argv;
    std::string bin = RELSERVE_BINARY;
    argv.push_back(bin.data());
    std::vector<std::string> copy = args;
    for (std::string& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(bin.c_str(), argv.data());
    _exit(127);
  }
  return p;
}

std::string ReadLog(const Process& p) {
  std::ifstream in(p.log_path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Whatever happens in a test, its server does not outlive it.
struct KillOnExit {
  pid_t pid;
  ~KillOnExit() {
    if (kill(pid, 0) == 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
};

int WaitExit(const Process& p) {
  int status = 0;
  waitpid(p.pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(RelserveBinaryTest, ServesThenDrainsOnSigtermAndExitsZero) {
  const std::string model = testing::TestModels::Get().dir("embedder");
  Process p = Launch({"--model", "embedder=" + model, "--grpc-address", "127.0.0.1:0", "--http-address", "127.0.0.1:0", "--metrics-address",
                      "127.0.0.1", "--metrics-port", "0", "--warmup", "false", "--shutdown-grace-seconds", "5"});
  KillOnExit guard{p.pid};
  std::smatch m;
  int port = 0;
  for (int i = 0; i < 1200 && port == 0; ++i) {
    const std::string log = ReadLog(p);
    if (std::regex_search(log, m, std::regex("on port ([0-9]+)"))) port = std::stoi(m[1]);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_GT(port, 0) << ReadLog(p);
  auto stub = testing::Connect(port);
  v1::EmbedRequest req;
  req.add_inputs()->set_text("hello");
  v1::EmbedResponse resp;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub->Embed(&ctx, req, &resp).ok());
  stub.reset();
  kill(p.pid, SIGTERM);
  EXPECT_EQ(WaitExit(p), 0);
  const std::string log = ReadLog(p);
  EXPECT_THAT(log, HasSubstr("loaded DebertaV2Model"));
  EXPECT_THAT(log, HasSubstr("received SIGTERM"));
  EXPECT_THAT(log, HasSubstr("stopped"));
}

// Waits for "on port N" in the log; 0 if the server never says it.
int WaitForPort(const Process& p) {
  std::smatch m;
  for (int i = 0; i < 1200; ++i) {
    const std::string log = ReadLog(p);
    if (std::regex_search(log, m, std::regex("on port ([0-9]+)"))) return std::stoi(m[1]);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return 0;
}

// Whether the channel leaves READY (the server closed the connection) within `within`.
bool ConnectionClosedWithin(grpc::Channel* channel, std::chrono::milliseconds within) {
  const auto deadline = std::chrono::system_clock::now() + within;
  while (std::chrono::system_clock::now() < deadline) {
    if (channel->GetState(false) != GRPC_CHANNEL_READY) return true;
    channel->WaitForStateChange(GRPC_CHANNEL_READY, std::chrono::system_clock::now() + std::chrono::milliseconds(100));
  }
  return channel->GetState(false) != GRPC_CHANNEL_READY;
}

// --max-connection-age-seconds makes the server close idle connections after about that long
// (so that clients balancing over a headless Service re-resolve it); the client reconnects by
// itself and its next call succeeds. Without the flag the connection stays open.
TEST(RelserveBinaryTest, MaxConnectionAgeClosesConnectionsAndClientsReconnect) {
  const std::string model = testing::TestModels::Get().dir("embedder");
  for (const bool aged : {true, false}) {
    std::vector<std::string> args = {"--model", "embedder=" + model, "--grpc-address", "127.0.0.1:0", "--http-address", "127.0.0.1:0",
                                     "--metrics-port", "-1", "--warmup", "false", "--shutdown-grace-seconds", "1"};
    if (aged) args.insert(args.end(), {"--max-connection-age-seconds", "0.5"});
    Process p = Launch(args);
    KillOnExit guard{p.pid};
    const int port = WaitForPort(p);
    ASSERT_GT(port, 0) << ReadLog(p);
    auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials());
    auto stub = v1::Encoder::NewStub(channel);
    v1::EmbedRequest req;
    req.add_inputs()->set_text("hello");
    for (int call = 0; call < 2; ++call) {
      v1::EmbedResponse resp;
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
      ASSERT_TRUE(stub->Embed(&ctx, req, &resp).ok()) << "aged=" << aged << " call " << call;
      ASSERT_EQ(channel->GetState(false), GRPC_CHANNEL_READY);
      if (call == 0) {
        EXPECT_EQ(ConnectionClosedWithin(channel.get(), std::chrono::milliseconds(aged ? 5000 : 2000)), aged)
            << "aged=" << aged;
      }
    }
    kill(p.pid, SIGTERM);
    EXPECT_EQ(WaitExit(p), 0);
  }
}

TEST(RelserveBinaryTest, BadFlagsAndBadModelsExitNonZeroWithAReason) {
  Process bad_flag = Launch({"--model", "x=/nonexistent", "--max-batch-size", "zero"});
  EXPECT_EQ(WaitExit(bad_flag), 2);
  EXPECT_THAT(ReadLog(bad_flag), HasSubstr("--max-batch-size"));
  Process bad_model = Launch({"--model", "x=/nonexistent", "--grpc-address", "127.0.0.1:0", "--http-address", "127.0.0.1:0", "--metrics-port", "-1"});
  EXPECT_EQ(WaitExit(bad_model), 1);
  EXPECT_THAT(ReadLog(bad_model), HasSubstr("model x: model directory /nonexistent does not exist"));
  const std::string model = testing::TestModels::Get().dir("embedder");
  Process bad_workers = Launch({"--model", "e=" + model, "--dtype", "bfloat16", "--workers-per-device", "2",
                                "--grpc-address", "127.0.0.1:0", "--http-address", "127.0.0.1:0", "--metrics-port", "-1"});
  EXPECT_EQ(WaitExit(bad_workers), 1);
  EXPECT_THAT(ReadLog(bad_workers), HasSubstr("--workers-per-device 2 with --dtype bfloat16"));
}

}  // namespace
}  // namespace relserve
