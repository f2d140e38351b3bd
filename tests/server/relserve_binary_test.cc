// The relserve binary as an operator runs it: flags, start-up log, SIGTERM, exit code.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/model/layers/packed_linear.h"
#include "server/safetensors/safetensors_file.h"
#include "server/safetensors/safetensors_writer.h"
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

// One Embed call of `text` on `stub`.
template <typename Stub>
grpc::Status EmbedText(Stub& stub, const std::string& text, v1::EmbedResponse* resp) {
  v1::EmbedRequest req;
  req.add_inputs()->set_text(text);
  grpc::ClientContext ctx;
  return stub.Embed(&ctx, req, resp);
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
  // Under float32 LibTorch's threads spin briefly before they sleep only where its forward makes no
  // BLAS call (server/util/process_tuning.h), unless this test's caller chose a policy.
  if (std::getenv("OMP_WAIT_POLICY") == nullptr && std::getenv("GOMP_SPINCOUNT") == nullptr) {
    std::ifstream environ("/proc/" + std::to_string(p.pid) + "/environ");
    const std::string env((std::istreambuf_iterator<char>(environ)), std::istreambuf_iterator<char>());
    EXPECT_EQ(env.find(std::string("GOMP_SPINCOUNT=10000") + '\0') != std::string::npos,
              Float32TakesEveryBatchByDefault());
  }
  stub.reset();
  kill(p.pid, SIGTERM);
  EXPECT_EQ(WaitExit(p), 0);
  const std::string log = ReadLog(p);
  EXPECT_THAT(log, HasSubstr("loaded DebertaV2Model"));
  EXPECT_THAT(log, HasSubstr("received SIGTERM"));
  EXPECT_THAT(log, HasSubstr("stopped"));
}

// --dtype int8: the model loads quantized, warms up and answers; the load log says int8 and
// the answer is a unit vector of the model's width (the embedder normalizes). Two workers, with
// callers on four threads, so that int8 batches run side by side: every answer stays a unit
// vector close to the lone call's (int8's activation scale is the batch's, so not bit for bit).
TEST(RelserveBinaryTest, ServesInt8) {
  const std::string model = testing::TestModels::Get().dir("embedder");
  Process p = Launch({"--model", "e=" + model, "--dtype", "int8", "--workers-per-device", "2", "--threads-per-worker",
                      "1", "--grpc-address", "127.0.0.1:0", "--http-address", "127.0.0.1:0", "--metrics-port", "-1",
                      "--shutdown-grace-seconds", "5"});
  KillOnExit guard{p.pid};
  const int port = WaitForPort(p);
  ASSERT_GT(port, 0) << ReadLog(p);
  auto stub = testing::Connect(port);
  v1::EmbedResponse resp;
  ASSERT_TRUE(EmbedText(*stub, "hello int8", &resp).ok());
  ASSERT_EQ(resp.embeddings_size(), 1);
  double norm = 0;
  for (float v : resp.embeddings(0).values()) norm += double(v) * v;
  EXPECT_GT(resp.embeddings(0).values_size(), 0);
  EXPECT_NEAR(norm, 1.0, 1e-3);
  const std::vector<float> lone(resp.embeddings(0).values().begin(), resp.embeddings(0).values().end());
  std::atomic<int> bad{0}, calls{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&, t] {
      auto own = testing::Connect(port);
      for (int i = 0; i < 6; ++i) {
        v1::EmbedResponse r;
        if (!EmbedText(*own, i % 2 == 0 ? "hello int8" : "another text of caller " + std::to_string(t), &r).ok() ||
            r.embeddings_size() != 1) {
          ++bad;
          continue;
        }
        ++calls;
        if (i % 2 != 0) continue;
        double dot = 0;
        for (int k = 0; k < r.embeddings(0).values_size() && k < static_cast<int>(lone.size()); ++k) {
          dot += double(r.embeddings(0).values(k)) * lone[k];
        }
        if (r.embeddings(0).values_size() != static_cast<int>(lone.size()) || dot < 0.999) ++bad;
      }
    });
  }
  for (std::thread& c : callers) c.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(calls.load(), 24);
  {
    v1::ListModelsResponse models;
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub->ListModels(&ctx, v1::ListModelsRequest(), &models).ok());
    ASSERT_EQ(models.models_size(), 1);
    EXPECT_EQ(models.models(0).dtype(), "int8");
  }
  // OpenBLAS's idle threads sleep at once under int8 (server/util/process_tuning.h).
  std::ifstream environ("/proc/" + std::to_string(p.pid) + "/environ");
  std::string env((std::istreambuf_iterator<char>(environ)), std::istreambuf_iterator<char>());
  EXPECT_THAT(env, HasSubstr(std::string("OPENBLAS_THREAD_TIMEOUT=4") + '\0'));
  // LibTorch's threads spin briefly before they sleep, unless this test's caller chose a policy.
  if (std::getenv("OMP_WAIT_POLICY") == nullptr && std::getenv("GOMP_SPINCOUNT") == nullptr) {
    EXPECT_THAT(env, HasSubstr(std::string("GOMP_SPINCOUNT=10000") + '\0'));
  }
  stub.reset();
  kill(p.pid, SIGTERM);
  EXPECT_EQ(WaitExit(p), 0);
  EXPECT_THAT(ReadLog(p), HasSubstr(", int8, max length"));
  EXPECT_THAT(ReadLog(p), HasSubstr("2 workers x 1 thread"));
}

// --device listing the CPU twice: a copy of the model on each, its worker on each, one queue;
// ListModels and the load log name both, and every answer is the same vector.
TEST(RelserveBinaryTest, ServesACopyOnEachListedDevice) {
  const std::string model = testing::TestModels::Get().dir("embedder");
  Process p = Launch({"--model", "e=" + model, "--device", "cpu,cpu", "--workers-per-device", "1",
                      "--grpc-address", "127.0.0.1:0", "--http-address", "-1", "--metrics-port", "-1",
                      "--shutdown-grace-seconds", "5"});
  KillOnExit guard{p.pid};
  const int port = WaitForPort(p);
  ASSERT_GT(port, 0) << ReadLog(p);
  auto stub = testing::Connect(port);
  std::vector<float> first;
  for (int i = 0; i < 8; ++i) {
    v1::EmbedResponse resp;
    ASSERT_TRUE(EmbedText(*stub, "the same text on either copy", &resp).ok());
    ASSERT_EQ(resp.embeddings_size(), 1);
    const std::vector<float> values(resp.embeddings(0).values().begin(), resp.embeddings(0).values().end());
    if (i == 0) first = values;
    EXPECT_EQ(values, first) << i;
  }
  {
    v1::ListModelsResponse models;
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub->ListModels(&ctx, v1::ListModelsRequest(), &models).ok());
    ASSERT_EQ(models.models_size(), 1);
    EXPECT_EQ(models.models(0).device(), "cpu,cpu");
  }
  stub.reset();
  kill(p.pid, SIGTERM);
  EXPECT_EQ(WaitExit(p), 0);
  const std::string log = ReadLog(p);
  EXPECT_THAT(log, HasSubstr("a copy on each of cpu, cpu"));
  EXPECT_THAT(log, HasSubstr("1 worker x"));
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
  // bfloat16 through oneDNN's linear runs one batch at a time (on its own AMX GEMM it takes several).
  Process bad_workers = Launch({"--model", "e=" + model, "--dtype", "bfloat16", "--bfloat16-gemm", "onednn",
                                "--workers-per-device", "2", "--http-address", "-1",
                                "--grpc-address", "127.0.0.1:0", "--http-address", "127.0.0.1:0", "--metrics-port", "-1"});
  EXPECT_EQ(WaitExit(bad_workers), 1);
  EXPECT_THAT(ReadLog(bad_workers), HasSubstr("--workers-per-device 2 with --dtype bfloat16"));
  // Two CPU copies would run two bfloat16 batches at once.
  Process bad_copies = Launch({"--model", "e=" + model, "--dtype", "bfloat16", "--bfloat16-gemm", "onednn", "--device", "cpu,cpu",
                               "--grpc-address", "127.0.0.1:0", "--http-address", "-1", "--metrics-port", "-1"});
  EXPECT_EQ(WaitExit(bad_copies), 1);
  EXPECT_THAT(ReadLog(bad_copies), HasSubstr("--device cpu,cpu with --dtype bfloat16"));
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
    Process p = Launch({"--model", "bad=" + model.dir(), "--grpc-address", "127.0.0.1:0", "--http-address", "-1",
                        "--metrics-port", "-1"});
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
                      "--http-address", "-1", "--metrics-port", "-1", "--shutdown-grace-seconds", "1"});
  KillOnExit guard{p.pid};
  ASSERT_GT(WaitForPort(p), 0) << ReadLog(p);
  EXPECT_THAT(ReadLog(p), HasSubstr("model e: warmed up to 8 tokens"));
  kill(p.pid, SIGTERM);
  EXPECT_EQ(WaitExit(p), 0);
}

// A copy of the embedder whose layer 1 feed-forward output weights are all NaN: it loads, and
// every output it computes is NaN. Removed on destruction.
class NanCopy {
 public:
  NanCopy() {
    const std::string source = testing::TestModels::Get().dir("embedder");
    dir_ = ::testing::TempDir() + "relserve-nan-" + std::to_string(getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::copy(source, dir_, std::filesystem::copy_options::recursive);
    auto file = SafetensorsFile::Open(source + "/model.safetensors");
    EXPECT_TRUE(file.ok()) << file.status();
    SafetensorsWriter writer;
    writer.SetMetadata({{"format", "pt"}});
    int poisoned = 0;
    for (const TensorView& t : (*file)->tensors()) {
      std::string bytes(reinterpret_cast<const char*>(t.data), t.nbytes);
      if (t.name.find("layer.1.output.dense.weight") != std::string::npos) {
        EXPECT_EQ(t.nbytes, static_cast<size_t>(t.numel()) * sizeof(float)) << t.name;
        std::vector<float> nan(t.numel(), std::nanf(""));
        bytes.assign(reinterpret_cast<const char*>(nan.data()), nan.size() * sizeof(float));
        ++poisoned;
      }
      EXPECT_TRUE(writer.Add(t.name, t.dtype, t.shape, bytes.data(), bytes.size()).ok());
    }
    EXPECT_EQ(poisoned, 1);
    EXPECT_TRUE(writer.WriteFile(dir_ + "/model.safetensors").ok());
  }
  ~NanCopy() { std::filesystem::remove_all(dir_); }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

// A model that computes NaN fails its warm-up: relserve exits 1 naming the model, the length and
// what was not finite, instead of reporting SERVING and failing every request. --warmup false
// skips the check (and the model serves, answering INTERNAL: hostile_requests_test.cc).
TEST(RelserveBinaryTest, AModelComputingNaNFailsItsWarmUpAndExitsOne) {
  NanCopy model;
  Process p = Launch({"--model", "nan=" + model.dir(), "--grpc-address", "127.0.0.1:0", "--http-address", "-1",
                      "--metrics-port", "-1"});
  KillOnExit guard{p.pid};
  EXPECT_EQ(WaitExit(p), 1);
  const std::string log = ReadLog(p);
  EXPECT_THAT(log, HasSubstr("model nan: warm-up at 16 tokens gave NaN (32 of 32 values) in the pooled output: "
                             "its weights hold NaN or infinity, or its activations overflow"));
  EXPECT_THAT(log, Not(HasSubstr("on port")));

  Process unchecked = Launch({"--model", "nan=" + model.dir(), "--grpc-address", "127.0.0.1:0", "--http-address", "-1",
                              "--metrics-port", "-1", "--warmup", "false", "--shutdown-grace-seconds", "1"});
  KillOnExit unchecked_guard{unchecked.pid};
  ASSERT_GT(WaitForPort(unchecked), 0) << ReadLog(unchecked);
  kill(unchecked.pid, SIGTERM);
  EXPECT_EQ(WaitExit(unchecked), 0);
}

// A clean stop logs no error: neither relserve ("... ERROR ...") nor gRPC, whose lines start
// with their level ("E0102 03:04:05.678 ... tcp_server_posix.cc:216] Failed accept4: Invalid
// argument", which closing the listener under gRPC's accept loop used to cause at every stop).
TEST(RelserveBinaryTest, ACleanStopLogsNoError) {
  const std::string model = testing::TestModels::Get().dir("embedder");
  Process p = Launch({"--model", "e=" + model, "--grpc-address", "127.0.0.1:0", "--http-address", "127.0.0.1:0",
                      "--metrics-address", "127.0.0.1", "--metrics-port", "0", "--warmup", "false",
                      "--shutdown-grace-seconds", "5"});
  KillOnExit guard{p.pid};
  const int port = WaitForPort(p);
  ASSERT_GT(port, 0) << ReadLog(p);
  // A client that keeps its connection open through the stop, as clients do.
  auto stub = testing::Connect(port);
  v1::EmbedResponse resp;
  ASSERT_TRUE(EmbedText(*stub, "hello", &resp).ok());
  kill(p.pid, SIGTERM);
  EXPECT_EQ(WaitExit(p), 0);
  const std::string log = ReadLog(p);
  const size_t from = log.find("shutting down");
  ASSERT_NE(from, std::string::npos) << log;
  std::istringstream after(log.substr(log.rfind('\n', from) + 1));
  std::string line;
  while (std::getline(after, line)) {
    EXPECT_FALSE(!line.empty() && line[0] == 'E') << line;
    EXPECT_THAT(line, Not(HasSubstr(" ERROR "))) << line;
  }
  EXPECT_THAT(log, HasSubstr("stopped"));
}

// The main use of the environment: the API key from a Kubernetes Secret (RELSERVE_API_KEY,
// with the newline a Secret written from a file ends in). The key guards gRPC and HTTP, the
// start-up log says so without showing it, and flags on the command line still win.
TEST(RelserveBinaryTest, ApiKeyFromTheEnvironment) {
  const std::string model = testing::TestModels::Get().dir("embedder");
  const std::string key = "k8s-secret-key-3f9a";
  ASSERT_EQ(setenv("RELSERVE_API_KEY", (key + "\n").c_str(), 1), 0);
  ASSERT_EQ(setenv("RELSERVE_MODEL", ("embedder=" + model).c_str(), 1), 0);
  ASSERT_EQ(setenv("RELSERVE_METRICS_PORT", "9", 1), 0);  // overridden below
  Process p = Launch({"--grpc-address", "127.0.0.1:0", "--http-address", "127.0.0.1:0", "--metrics-port", "-1",
                      "--warmup", "false", "--shutdown-grace-seconds", "5"});
  unsetenv("RELSERVE_API_KEY");
  unsetenv("RELSERVE_MODEL");
  unsetenv("RELSERVE_METRICS_PORT");
  KillOnExit guard{p.pid};
  const int port = WaitForPort(p);
  ASSERT_GT(port, 0) << ReadLog(p);
  std::smatch m;
  const std::string started = ReadLog(p);
  ASSERT_TRUE(std::regex_search(started, m, std::regex("HTTP on port ([0-9]+)"))) << started;
  const int http_port = std::stoi(m[1]);
  EXPECT_THAT(started, Not(HasSubstr("metrics on port")));  // --metrics-port -1 beat the variable

  auto stub = testing::Connect(port);
  v1::EmbedRequest req;
  req.add_inputs()->set_text("hello");
  v1::EmbedResponse resp;
  {
    grpc::ClientContext ctx;
    const grpc::Status s = stub->Embed(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
  }
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + key);
    const grpc::Status s = stub->Embed(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
  }
  int code = 0;
  testing::HttpGet(http_port, "/v1/models", &code);
  EXPECT_EQ(code, 401);
  testing::HttpGet(http_port, "/health", &code);
  EXPECT_EQ(code, 200);
  stub.reset();
  kill(p.pid, SIGTERM);
  EXPECT_EQ(WaitExit(p), 0);
  const std::string log = ReadLog(p);
  EXPECT_THAT(log, HasSubstr("API key required (1 key)"));
  EXPECT_THAT(log, Not(HasSubstr(key)));
}

// Bad values from the environment exit 2 naming the variable; bad API key settings stop the
// start naming the flag, and never show the key.
TEST(RelserveBinaryTest, BadEnvironmentAndApiKeySettingsExitWithAReason) {
  const std::string model = testing::TestModels::Get().dir("embedder");
  const std::vector<std::string> common = {"--model", "e=" + model, "--grpc-address", "127.0.0.1:0",
                                           "--http-address", "127.0.0.1:0", "--metrics-port", "-1", "--warmup=false"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), common.begin(), common.end());
    return extra;
  };
  ASSERT_EQ(setenv("RELSERVE_MAX_BATCH_SIZE", "many", 1), 0);
  Process bad_env = Launch(with({}));
  unsetenv("RELSERVE_MAX_BATCH_SIZE");
  EXPECT_EQ(WaitExit(bad_env), 2);
  EXPECT_THAT(ReadLog(bad_env), HasSubstr("RELSERVE_MAX_BATCH_SIZE (environment): --max-batch-size"));

  ASSERT_EQ(setenv("RELSERVE_API_KEY", "hidden-env-key", 1), 0);
  Process both = Launch(with({"--api-key-file", "/nonexistent/keys"}));
  unsetenv("RELSERVE_API_KEY");
  EXPECT_EQ(WaitExit(both), 2);
  EXPECT_THAT(ReadLog(both), HasSubstr("RELSERVE_API_KEY and --api-key-file both give API keys"));
  EXPECT_THAT(ReadLog(both), Not(HasSubstr("hidden-env-key")));

  Process missing_file = Launch(with({"--api-key-file", "/nonexistent/keys"}));
  EXPECT_EQ(WaitExit(missing_file), 1);
  EXPECT_THAT(ReadLog(missing_file), HasSubstr("--api-key-file: /nonexistent/keys: no such file"));

  Process bad_key = Launch(with({"--api-key", "hidden key"}));
  EXPECT_EQ(WaitExit(bad_key), 2);
  EXPECT_THAT(ReadLog(bad_key), HasSubstr("--api-key: the API key holds a byte that is not visible ASCII"));
  EXPECT_THAT(ReadLog(bad_key), Not(HasSubstr("hidden")));
}

}  // namespace
}  // namespace relserve
