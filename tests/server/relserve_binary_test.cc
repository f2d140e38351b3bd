// The relserve binary as an operator runs it: flags, start-up log, SIGTERM, exit code.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/server/server_process.h"
#include "tests/server/server_test_env.h"

namespace relserve {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

using testing::KillOnExit;
using Process = testing::ServerProcess;

Process Launch(const std::vector<std::string>& args) { return Process::Launch(RELSERVE_BINARY, args); }
std::string ReadLog(const Process& p) { return p.Log(); }
int WaitExit(const Process& p) { return p.WaitExit(); }
int WaitForPort(const Process& p) { return p.WaitForPort(); }

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

// A copy of a test model whose config.json has `raw` (JSON text, as is: 1e400 is no JSON value)
// at `key`; removed on destruction.
class HostileCopy {
 public:
  HostileCopy(const std::string& source, const std::string& key, const std::string& raw) {
    dir_ = ::testing::TempDir() + "relserve-hostile-" + std::to_string(getpid()) + "-" + std::to_string(++copies_);
    std::filesystem::remove_all(dir_);
    std::filesystem::copy(source, dir_, std::filesystem::copy_options::recursive);
    std::ifstream in(dir_ + "/config.json");
    nlohmann::json config = nlohmann::json::parse(in);
    config[key] = "@HOSTILE@";
    std::string text = config.dump(2);
    text.replace(text.find("\"@HOSTILE@\""), 11, raw);
    std::ofstream(dir_ + "/config.json", std::ios::trunc) << text;
  }
  ~HostileCopy() { std::filesystem::remove_all(dir_); }
  const std::string& dir() const { return dir_; }

 private:
  static inline int copies_ = 0;
  std::string dir_;
};

// Hostile numbers in a model directory stop the server before it listens: exit 1, the model and
// the field named, no abort (a number beyond double range used to escape as an exception) and
// no torch backtrace (a max length of 1e9 used to reach the warm-up's allocations).
TEST(RelserveBinaryTest, HostileModelsExitOneNamingModelAndField) {
  const std::string source = testing::TestModels::Get().dir("embedder");
  struct Case {
    const char* key;
    const char* raw;
    const char* mention;
  };
  for (const Case& c : {Case{"layer_norm_eps", "1e400", "config.json: invalid JSON at \"layer_norm_eps\""},
                        Case{"max_position_embeddings", "1000000000", "\"max_position_embeddings\" must be at most 32768"},
                        Case{"layer_norm_eps", "-1", "\"layer_norm_eps\" must be a number above 0"},
                        Case{"hidden_size", "18446744073709551615", "\"hidden_size\" must be at most 65536, got 18446744073709551615"}}) {
    SCOPED_TRACE(std::string(c.key) + " = " + c.raw);
    HostileCopy model(source, c.key, c.raw);
    Process p = Launch({"--model", "bad=" + model.dir(), "--grpc-address", "127.0.0.1:0", "--metrics-port", "-1"});
    KillOnExit guard{p.pid};
    EXPECT_EQ(WaitExit(p), 1);
    EXPECT_THAT(ReadLog(p), AllOf(HasSubstr("model bad: "), HasSubstr(c.mention), Not(HasSubstr("terminate called")),
                                  Not(HasSubstr("frame #"))));
  }
}

// The warm-up starts at 16 tokens, or at the maximum length when that is shorter: a model served
// with --max-input-length 8 used to fail its own warm-up.
TEST(RelserveBinaryTest, WarmsUpModelsShorterThanSixteenTokens) {
  const std::string model = testing::TestModels::Get().dir("embedder");
  Process p = Launch({"--model", "e=" + model, "--max-input-length", "8", "--grpc-address", "127.0.0.1:0",
                      "--metrics-port", "-1", "--shutdown-grace-seconds", "1"});
  KillOnExit guard{p.pid};
  ASSERT_GT(WaitForPort(p), 0) << ReadLog(p);
  EXPECT_THAT(ReadLog(p), HasSubstr("model e: warmed up to 8 tokens"));
  kill(p.pid, SIGTERM);
  EXPECT_EQ(WaitExit(p), 0);
}

}  // namespace
}  // namespace relserve
