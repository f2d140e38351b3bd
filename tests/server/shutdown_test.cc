// The relserve binary's shutdown as an orchestrator drives it: SIGTERM or SIGINT at any moment
// of start-up, a second signal during the drain, idle streams, and calls that arrive while the
// server goes away. Every call gets an answer (OK, or UNAVAILABLE for refused work), and the
// process exits 0 — never by the signal's default action.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/server_process.h"
#include "tests/server/server_test_env.h"

namespace relserve {
namespace {

using ::testing::HasSubstr;
using testing::KillOnExit;
using testing::ServerProcess;

std::vector<std::string> BaseArgs(double grace_seconds) {
  return {"--model", "embedder=" + testing::TestModels::Get().dir("embedder"), "--grpc-address", "127.0.0.1:0", "--http-address", "127.0.0.1:0",
          "--metrics-address", "127.0.0.1", "--metrics-port", "0", "--shutdown-grace-seconds",
          std::to_string(grace_seconds)};
}

// Whether `pid` blocks SIGTERM and SIGINT: its first instructions have run (SigBlk in
// /proc/PID/status, a hexadecimal mask with bit N-1 for signal N).
bool BlocksShutdownSignals(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("SigBlk:", 0) != 0) continue;
    const unsigned long long mask = std::stoull(line.substr(7), nullptr, 16);
    return (mask >> (SIGTERM - 1) & 1) && (mask >> (SIGINT - 1) & 1);
  }
  return false;
}

// Signals at every moment of start-up, from the program's first instructions: while the
// server's libraries load (before its main), while models load and warm up, just after
// serving begins. Each stops the server cleanly with exit 0. (A signal that arrives before
// the new program has run any instruction at all takes the default action whatever the
// program does; the clock starts once the launcher's first code has run.)
TEST(ShutdownTest, ASignalAtAnyMomentOfStartUpStopsCleanly) {
  testing::TestModels::Get();
  int index = 0;
  for (int delay_ms : {0, 1, 3, 10, 30, 60, 120, 250, 500, 1000}) {
    const int signal = (index++ % 2 == 0) ? SIGTERM : SIGINT;
    std::vector<std::string> args = BaseArgs(5);
    args.insert(args.end(), {"--warmup", "true"});
    ServerProcess p = ServerProcess::Launch(RELSERVE_BINARY, args);
    KillOnExit guard{p.pid};
    for (int i = 0; i < 100000 && !BlocksShutdownSignals(p.pid); ++i) std::this_thread::yield();
    ASSERT_TRUE(BlocksShutdownSignals(p.pid)) << "the launcher never blocked the signals";
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    kill(p.pid, signal);
    int code = -1;
    ASSERT_TRUE(p.ExitsWithin(60, &code)) << "delay " << delay_ms << " ms:\n" << p.Log();
    EXPECT_EQ(code, 0) << "delay " << delay_ms << " ms, " << strsignal(signal) << ":\n" << p.Log();
    EXPECT_THAT(p.Log(), HasSubstr(signal == SIGTERM ? "received SIGTERM" : "received SIGINT")) << delay_ms;
  }
}

struct Outcomes {
  std::mutex mu;
  std::map<grpc::StatusCode, int> codes;
  std::map<grpc::StatusCode, std::string> messages;
  void Add(const grpc::Status& s) {
    std::lock_guard<std::mutex> lock(mu);
    ++codes[s.error_code()];
    messages[s.error_code()] = s.error_message();
  }
  std::string Describe() {
    std::lock_guard<std::mutex> lock(mu);
    std::string out;
    for (const auto& [code, n] : codes) out += std::to_string(code) + " x" + std::to_string(n) + " (" + messages[code] + ") ";
    return out;
  }
};

// Calls until `stop`, each of `inputs` long texts; records every status.
std::thread Caller(int port, int inputs, std::atomic<bool>* stop, Outcomes* out, std::atomic<int>* sent) {
  return std::thread([=] {
    auto stub = testing::Connect(port);
    while (!stop->load()) {
      v1::EmbedRequest req;
      for (int i = 0; i < inputs; ++i) {
        std::string text = "input " + std::to_string(i);
        for (int w = 0; w < 60; ++w) text += " word" + std::to_string((w * 7 + i) % 31);
        req.add_inputs()->set_text(text);
      }
      v1::EmbedResponse resp;
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
      grpc::Status s = stub->Embed(&ctx, req, &resp);
      if (s.ok() && resp.embeddings_size() != inputs) s = grpc::Status(grpc::StatusCode::DATA_LOSS, "short answer");
      out->Add(s);
      ++*sent;
      if (s.error_code() == grpc::StatusCode::UNAVAILABLE) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
}

// A second signal during the drain ends the grace at once: work still running is answered
// UNAVAILABLE, every call gets an answer, and the server exits 0 long before the grace ends.
TEST(ShutdownTest, ASecondSignalEndsTheGraceAndEveryCallIsAnswered) {
  std::vector<std::string> args = BaseArgs(120);
  // One worker running one sequence at a time: queued work outlasts the signals.
  args.insert(args.end(), {"--warmup", "false", "--workers-per-device", "1", "--threads-per-worker", "1",
                           "--max-batch-size", "1"});
  ServerProcess p = ServerProcess::Launch(RELSERVE_BINARY, args);
  KillOnExit guard{p.pid};
  const int port = p.WaitForPort();
  ASSERT_GT(port, 0) << p.Log();
  std::atomic<bool> stop{false};
  std::atomic<int> sent{0};
  Outcomes outcomes;
  std::vector<std::thread> callers;
  for (int i = 0; i < 6; ++i) callers.push_back(Caller(port, 200, &stop, &outcomes, &sent));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  kill(p.pid, SIGTERM);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  kill(p.pid, SIGTERM);
  int code = -1;
  const auto t0 = std::chrono::steady_clock::now();
  const bool exited = p.ExitsWithin(60, &code);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  stop = true;
  for (auto& c : callers) c.join();
  ASSERT_TRUE(exited) << p.Log();
  EXPECT_EQ(code, 0) << p.Log();
  EXPECT_LT(seconds, 30) << "the grace (120 s) was not cut short";
  const std::string log = p.Log();
  EXPECT_THAT(log, HasSubstr("received SIGTERM again: ending the grace period now"));
  EXPECT_THAT(log, HasSubstr("answering them UNAVAILABLE"));
  EXPECT_THAT(log, HasSubstr("stopped"));
  std::lock_guard<std::mutex> lock(outcomes.mu);
  for (const auto& [c, n] : outcomes.codes) {
    EXPECT_TRUE(c == grpc::StatusCode::OK || c == grpc::StatusCode::UNAVAILABLE)
        << "code " << c << " x" << n << ": " << outcomes.messages[c];
  }
  EXPECT_GT(outcomes.codes[grpc::StatusCode::UNAVAILABLE], 0);
}

// An open EmbedStream with nothing in flight does not hold the drain: it ends at once with
// UNAVAILABLE, and the server exits well inside its grace.
TEST(ShutdownTest, AnIdleStreamEndsAtOnceAndDoesNotHoldTheDrain) {
  std::vector<std::string> args = BaseArgs(60);
  args.insert(args.end(), {"--warmup", "false"});
  ServerProcess p = ServerProcess::Launch(RELSERVE_BINARY, args);
  KillOnExit guard{p.pid};
  const int port = p.WaitForPort();
  ASSERT_GT(port, 0) << p.Log();
  auto stub = testing::Connect(port);
  grpc::ClientContext ctx;
  auto stream = stub->EmbedStream(&ctx);
  v1::EmbedRequest req;
  req.add_inputs()->set_text("one message, then silence");
  ASSERT_TRUE(stream->Write(req));
  v1::EmbedResponse resp;
  ASSERT_TRUE(stream->Read(&resp));
  EXPECT_EQ(resp.embeddings_size(), 1);
  const auto t0 = std::chrono::steady_clock::now();
  kill(p.pid, SIGTERM);
  EXPECT_FALSE(stream->Read(&resp));  // the server ends the stream
  grpc::Status s = stream->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("shutting down"));
  int code = -1;
  ASSERT_TRUE(p.ExitsWithin(30, &code)) << p.Log();
  EXPECT_EQ(code, 0);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10);
}

// Calls that keep arriving through the whole shutdown (on open connections, and new ones)
// are answered OK or UNAVAILABLE, never CANCELLED or anything else.
TEST(ShutdownTest, CallsArrivingDuringShutdownGetUnavailable) {
  std::vector<std::string> args = BaseArgs(10);
  args.insert(args.end(), {"--warmup", "false"});
  ServerProcess p = ServerProcess::Launch(RELSERVE_BINARY, args);
  KillOnExit guard{p.pid};
  const int port = p.WaitForPort();
  ASSERT_GT(port, 0) << p.Log();
  std::atomic<bool> stop{false};
  std::atomic<int> sent{0};
  Outcomes outcomes;
  std::vector<std::thread> callers;
  for (int i = 0; i < 8; ++i) callers.push_back(Caller(port, 1 + i, &stop, &outcomes, &sent));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  kill(p.pid, SIGTERM);
  int code = -1;
  ASSERT_TRUE(p.ExitsWithin(30, &code)) << p.Log();
  EXPECT_EQ(code, 0);
  // The callers keep calling the stopped server for a moment: those calls cannot connect
  // (UNAVAILABLE too).
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  stop = true;
  for (auto& c : callers) c.join();
  std::lock_guard<std::mutex> lock(outcomes.mu);
  EXPECT_GT(outcomes.codes[grpc::StatusCode::OK], 0);
  for (const auto& [c, n] : outcomes.codes) {
    EXPECT_TRUE(c == grpc::StatusCode::OK || c == grpc::StatusCode::UNAVAILABLE)
        << "code " << c << " x" << n << ": " << outcomes.messages[c];
  }
}

}  // namespace
}  // namespace relserve
