// The relserve binary under descriptor exhaustion: it raises its soft open-files limit at
// start, and after a moment without descriptors /healthz says whether gRPC still accepts
// connections (gRPC 1.51's listener stops for good after one accept() fails with EMFILE).
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/metrics/metrics_test_util.h"
#include "tests/server/server_process.h"
#include "tests/server/server_test_env.h"

namespace relserve {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

using testing::KillOnExit;
using Process = testing::ServerProcess;

// Starts relserve with RLIMIT_NOFILE = {soft, hard}, set in the child before exec.
Process LaunchWithFdLimit(const std::vector<std::string>& args, rlim_t soft, rlim_t hard) {
  return Process::Launch(RELSERVE_BINARY, args, [soft, hard] {
    const rlimit limit{soft, hard};
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) _exit(126);
  });
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int CountFds(pid_t pid) {
  int n = 0;
  DIR* dir = opendir(("/proc/" + std::to_string(pid) + "/fd").c_str());
  if (dir == nullptr) return -1;
  while (dirent* e = readdir(dir)) n += e->d_name[0] != '.';
  closedir(dir);
  return n;
}

// Whether a brand-new gRPC connection to the port becomes READY within `within` (a channel
// of its own, so that no existing connection is reused).
bool GrpcAcceptsNewConnection(int port, std::chrono::milliseconds within) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto channel = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port),
                                           grpc::InsecureChannelCredentials(), args);
  return channel->WaitForConnected(std::chrono::system_clock::now() + within);
}

TEST(FdExhaustionTest, HealthzTellsWhetherGrpcStillAcceptsAfterDescriptorsRanOut) {
  constexpr rlim_t kSoft = 64, kHard = 160;
  const std::string model = testing::TestModels::Get().dir("embedder");
  Process p = LaunchWithFdLimit({"--model", "embedder=" + model, "--grpc-address", "127.0.0.1:0",
                                 "--metrics-address", "127.0.0.1", "--metrics-port", "0",
                                 "--warmup", "false", "--shutdown-grace-seconds", "1", "--http-address", "-1"},
                                kSoft, kHard);
  KillOnExit guard{p.pid};
  int grpc_port = 0, metrics_port = 0;
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        std::smatch m;
        const std::string log = ReadFile(p.log_path);
        if (!std::regex_search(log, m, std::regex("on port ([0-9]+), metrics on port ([0-9]+)"))) {
          return false;
        }
        grpc_port = std::stoi(m[1]);
        metrics_port = std::stoi(m[2]);
        return true;
      },
      std::chrono::seconds(60)))
      << ReadFile(p.log_path);

  // (a) The soft limit was raised to the hard one, and said so.
  const std::string limits = ReadFile("/proc/" + std::to_string(p.pid) + "/limits");
  EXPECT_TRUE(std::regex_search(limits, std::regex("Max open files +160 +160 +files"))) << limits;
  EXPECT_THAT(ReadFile(p.log_path), HasSubstr("INFO open files limit raised from 64 to 160"));

  // Before: gRPC accepts, /healthz is 200, the gauge is 1 (once the first probe ran).
  ASSERT_TRUE(GrpcAcceptsNewConnection(grpc_port, std::chrono::seconds(10)));
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        return metrics_test::HttpGet(metrics_port, "/metrics").body.find(
                   "relserve_grpc_listener_ok 1") != std::string::npos;
      },
      std::chrono::seconds(10)));
  EXPECT_EQ(metrics_test::HttpGet(metrics_port, "/healthz").status, 200);

  // Exhaust: more connections than the server has descriptors. gRPC accepts until accept()
  // fails with EMFILE; the rest wait in its backlog.
  std::vector<int> held;
  for (rlim_t i = 0; i < kHard + 40; ++i) {
    const int fd = metrics_test::ConnectLoopbackFrom("127.0.0.1", grpc_port, 0,
                                                     /*connect_timeout_ms=*/0);
    if (fd >= 0) held.push_back(fd);
  }
  EXPECT_TRUE(testing::WaitUntil([&] { return CountFds(p.pid) >= static_cast<int>(kHard) - 1; },
                        std::chrono::seconds(10)))
      << CountFds(p.pid) << " descriptors open in the server";
  std::this_thread::sleep_for(std::chrono::seconds(1));
  // Released: the server closes its ends as the clients go.
  for (int fd : held) close(fd);
  EXPECT_TRUE(testing::WaitUntil([&] { return CountFds(p.pid) < static_cast<int>(kHard) / 2; },
                        std::chrono::seconds(10)))
      << CountFds(p.pid) << " descriptors still open in the server";

  // After: whatever gRPC does, /healthz and the gauge must say the same.
  const bool accepts = GrpcAcceptsNewConnection(grpc_port, std::chrono::seconds(3));
  std::cout << "gRPC accepts new connections after the exhaustion: " << (accepts ? "yes" : "no")
            << std::endl;
  metrics_test::HttpResponse health;
  EXPECT_TRUE(testing::WaitUntil(
      [&] {
        health = metrics_test::HttpGet(metrics_port, "/healthz");
        return health.status == (accepts ? 200 : 503);
      },
      std::chrono::seconds(15)))
      << "gRPC accepts: " << accepts << ", /healthz: " << health.raw;
  const std::string metrics = metrics_test::HttpGet(metrics_port, "/metrics").body;
  EXPECT_THAT(metrics, HasSubstr(accepts ? "relserve_grpc_listener_ok 1"
                                         : "relserve_grpc_listener_ok 0"));
  if (!accepts) {
    EXPECT_THAT(health.body, HasSubstr("the gRPC listener does not accept new connections: "));
    EXPECT_THAT(health.body, HasSubstr("the server sent nothing within 3s"));
    // It stays so (no flapping) and gRPC indeed still refuses.
    std::this_thread::sleep_for(std::chrono::seconds(3));
    EXPECT_EQ(metrics_test::HttpGet(metrics_port, "/healthz").status, 503);
    EXPECT_FALSE(GrpcAcceptsNewConnection(grpc_port, std::chrono::seconds(1)));
  }
  // The failure was logged once (the reason changed while it lasted; it is not repeated).
  const std::string log = ReadFile(p.log_path);
  EXPECT_EQ(testing::CountOccurrences(log, "ERROR gRPC listener self-check failed"), 1) << log;

  // The process survived all this and still shuts down cleanly.
  kill(p.pid, SIGTERM);
  int status = 0;
  waitpid(p.pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << "\n" << ReadFile(p.log_path);
}

}  // namespace
}  // namespace relserve
