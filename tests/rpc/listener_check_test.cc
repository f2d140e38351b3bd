#include "server/rpc/listener_check.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/server_test_env.h"
#include "server/metrics/server_metrics.h"

namespace relserve {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using Clock = std::chrono::steady_clock;

std::vector<std::string> Texts(const std::vector<ListenerTarget>& targets) {
  std::vector<std::string> out;
  for (const ListenerTarget& t : targets) out.push_back(t.text);
  return out;
}

std::vector<std::string> TargetsOf(const std::string& address, int bound_port) {
  auto targets = ListenerTargets(address, bound_port);
  EXPECT_TRUE(targets.ok()) << address << ": " << targets.status();
  return targets.ok() ? Texts(*targets) : std::vector<std::string>{};
}

TEST(ListenerTargetsTest, AddressForms) {
  // Wildcards and localhost are probed over loopback, on the port gRPC bound.
  EXPECT_THAT(TargetsOf("0.0.0.0:0", 41234), ElementsAre("127.0.0.1:41234", "[::1]:41234"));
  EXPECT_THAT(TargetsOf("[::]:50051", 50051), ElementsAre("127.0.0.1:50051", "[::1]:50051"));
  EXPECT_THAT(TargetsOf(":50051", 50051), ElementsAre("127.0.0.1:50051", "[::1]:50051"));
  EXPECT_THAT(TargetsOf("localhost:7", 7), ElementsAre("127.0.0.1:7", "[::1]:7"));
  EXPECT_THAT(TargetsOf("10.1.2.3:50051", 50051), ElementsAre("10.1.2.3:50051"));
  EXPECT_THAT(TargetsOf("[fe80::1]:9", 9), ElementsAre("[fe80::1]:9"));
  EXPECT_THAT(TargetsOf("ipv4:127.0.0.1:80", 0), ElementsAre("127.0.0.1:80"));
  EXPECT_THAT(TargetsOf("dns:///127.0.0.1:81", 0), ElementsAre("127.0.0.1:81"));
  EXPECT_THAT(TargetsOf("unix:/run/relserve.sock", 1), ElementsAre("unix:/run/relserve.sock"));
  EXPECT_THAT(TargetsOf("unix-abstract:relserve", 1), ElementsAre("unix-abstract:relserve"));

  EXPECT_EQ(ListenerTargets("vsock:3:50051", 50051).status().code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(ListenerTargets("no-port", 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ListenerTargets("[::1", 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ListenerTargets("127.0.0.1:http", 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A TCP socket on 127.0.0.1 that listen()s; nobody calls accept() unless Accept() is called.
class RawListener {
 public:
  RawListener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 || ::listen(fd_, 64) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      ADD_FAILURE() << "cannot listen on 127.0.0.1";
    }
    port_ = ntohs(addr.sin_port);
  }
  ~RawListener() {
    stop_ = true;
    if (acceptor_.joinable()) acceptor_.join();
    ::close(fd_);
  }
  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

  // From now on, accepts every connection, reads what the client sent and closes it (what a
  // server that accepts and then refuses the protocol does).
  void Accept() {
    ::fcntl(fd_, F_SETFL, O_NONBLOCK);
    acceptor_ = std::thread([this] {
      while (!stop_) {
        const int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0) {
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
          continue;
        }
        pollfd p{c, POLLIN, 0};
        char buf[4096];
        if (::poll(&p, 1, 1000) > 0) {
          const ssize_t n = ::recv(c, buf, sizeof(buf), 0);
          (void)n;
        }
        ::close(c);
      }
    });
  }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;
};

std::vector<ListenerTarget> Targets(const std::string& address) {
  auto targets = ListenerTargets(address, 0);
  EXPECT_TRUE(targets.ok()) << targets.status();
  return targets.ok() ? *targets : std::vector<ListenerTarget>{};
}

TEST(ProbeListenerTest, ListenerThatNeverAcceptsFails) {
  RawListener never;
  const auto start = Clock::now();
  const absl::Status s = ProbeListener(Targets(never.address()), absl::Milliseconds(500));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("sent nothing within 500ms"));
  EXPECT_THAT(std::string(s.message()), HasSubstr(never.address()));
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(450));
}

TEST(ProbeListenerTest, ListenerThatAcceptsPasses) {
  RawListener accepting;
  accepting.Accept();
  EXPECT_TRUE(ProbeListener(Targets(accepting.address()), absl::Seconds(5)).ok());
}

TEST(ProbeListenerTest, NothingListeningFails) {
  int port = 0;
  {
    RawListener gone;
    port = gone.port();
  }
  const absl::Status s = ProbeListener(Targets("127.0.0.1:" + std::to_string(port)),
                                       absl::Seconds(5));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(s.message()), HasSubstr("Connection refused"));
  // A wildcard address reports the first loopback's error, not the fallback's.
  const absl::Status wildcard = ProbeListener(*ListenerTargets("0.0.0.0:0", port),
                                              absl::Seconds(5));
  EXPECT_THAT(std::string(wildcard.message()), HasSubstr("127.0.0.1:"));
}

TEST(ProbeListenerTest, CancelFdEndsAProbeAtOnce) {
  RawListener never;
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  ASSERT_EQ(::write(pipe_fds[1], "x", 1), 1);
  const auto start = Clock::now();
  const absl::Status s = ProbeListener(Targets(never.address()), absl::Seconds(10), pipe_fds[0]);
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
}

// Everything written to stderr (gRPC's log, relserve's log) while it lives.
class StderrCapture {
 public:
  StderrCapture() : path_(::testing::TempDir() + "listener-check-stderr-" +
                          std::to_string(::getpid()) + ".log") {
    std::fflush(stderr);
    saved_ = ::dup(2);
    const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ::dup2(fd, 2);
    ::close(fd);
  }
  ~StderrCapture() { Release(); }
  std::string Release() {
    if (saved_ >= 0) {
      std::fflush(stderr);
      ::dup2(saved_, 2);
      ::close(saved_);
      saved_ = -1;
    }
    std::ifstream in(path_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

 private:
  std::string path_;
  int saved_ = -1;
};

std::string RunCommand(const std::string& command) {
  std::string out;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return "popen failed";
  char buf[512];
  while (std::fgets(buf, sizeof(buf), p) != nullptr) out += buf;
  const int rc = ::pclose(p);
  return rc == 0 ? "" : out.empty() ? "failed" : out;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A real gRPC server, plaintext or TLS (a self-signed certificate made with openssl), answers
// the probe; the probes leave nothing in gRPC's log (a TLS server logs a handshake error for
// an HTTP/2 preface, which is why the probe sends a ClientHello).
TEST(ProbeListenerTest, RealGrpcServersPassQuietly) {
  const std::string dir = ::testing::TempDir() + "listener-check-" + std::to_string(::getpid());
  const std::string made = RunCommand(
      "mkdir -p " + dir + " && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1"
      " -nodes -days 1 -subj /CN=relserve.test -keyout " + dir + "/key.pem -out " + dir +
      "/cert.pem");
  ASSERT_EQ(made, "") << "openssl (scripts/install-deps.sh installs it) failed: " << made;
  grpc::SslServerCredentialsOptions tls;
  tls.pem_key_cert_pairs.push_back({ReadFile(dir + "/key.pem"), ReadFile(dir + "/cert.pem")});

  for (const bool use_tls : {false, true}) {
    grpc::CallbackGenericService no_methods;  // a server needs at least one service
    grpc::ServerBuilder builder;
    builder.RegisterCallbackGenericService(&no_methods);
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0",
                             use_tls ? grpc::SslServerCredentials(tls)
                                     : grpc::InsecureServerCredentials(),
                             &port);
    std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
    ASSERT_NE(server, nullptr);
    StderrCapture capture;
    for (int i = 0; i < 3; ++i) {
      const absl::Status s = ProbeListener(*ListenerTargets("0.0.0.0:0", port), absl::Seconds(5));
      EXPECT_TRUE(s.ok()) << (use_tls ? "TLS: " : "plaintext: ") << s;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let gRPC log, if it would
    server->Shutdown(std::chrono::system_clock::now());
    server->Wait();
    EXPECT_EQ(capture.Release(), "") << (use_tls ? "TLS" : "plaintext");
  }
  RunCommand("rm -rf " + dir);
}

// The owned check follows the listener both ways, with the metric, logging each change once.
TEST(GrpcListenerCheckTest, ReportsAListenerThatStopsAcceptingAndItsRecovery) {
  RawListener listener;  // not accepting yet
  ServerMetrics metrics;
  ListenerCheckOptions options;
  options.interval = absl::Milliseconds(50);
  options.timeout = absl::Milliseconds(300);
  StderrCapture capture;
  auto check = GrpcListenerCheck::Start(listener.address(), listener.port(), options, &metrics,
                                        nullptr);
  ASSERT_TRUE(check.ok()) << check.status();
  GrpcListenerCheck& c = **check;

  ASSERT_TRUE(testing::WaitUntil([&] { return !c.status().ok(); }, std::chrono::seconds(5)));
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(c.status().message()),
              HasSubstr("the gRPC listener does not accept new connections: "));
  EXPECT_THAT(metrics.Render(), HasSubstr("relserve_grpc_listener_ok 0"));
  std::this_thread::sleep_for(std::chrono::milliseconds(800));  // more failing probes

  listener.Accept();
  ASSERT_TRUE(testing::WaitUntil([&] { return c.status().ok(); }, std::chrono::seconds(5)));
  EXPECT_TRUE(testing::WaitUntil([&] { return metrics.Render().find("relserve_grpc_listener_ok 1") !=
                                     std::string::npos; },
                        std::chrono::seconds(2)));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // more passing probes
  c.Stop();
  const std::string log = capture.Release();
  EXPECT_EQ(testing::CountOccurrences(log, "ERROR gRPC listener self-check failed"), 1) << log;
  EXPECT_EQ(testing::CountOccurrences(log, "INFO gRPC listener self-check passes again"), 1) << log;
}

TEST(GrpcListenerCheckTest, StopCutsAProbeShortAndDisabledChecksDoNotProbe) {
  RawListener never;
  ListenerCheckOptions options;
  options.timeout = absl::Seconds(30);
  auto check = GrpcListenerCheck::Start(never.address(), never.port(), options, nullptr, nullptr);
  ASSERT_TRUE(check.ok()) << check.status();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the first probe is waiting
  const auto start = Clock::now();
  (*check)->Stop();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
  (*check)->Stop();  // twice is fine

  // While `enabled` says no (relserve: not serving), nothing is probed and nothing reported.
  options.interval = absl::Milliseconds(20);
  options.timeout = absl::Milliseconds(100);
  ServerMetrics metrics;
  auto paused = GrpcListenerCheck::Start(never.address(), never.port(), options, &metrics,
                                         [] { return false; });
  ASSERT_TRUE(paused.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_TRUE((*paused)->status().ok());
  EXPECT_THAT(metrics.Render(), Not(HasSubstr("relserve_grpc_listener_ok")));
}

TEST(GrpcListenerCheckTest, AddressItCannotProbeLeavesItDisabled) {
  ServerMetrics metrics;
  auto check = GrpcListenerCheck::Start("vsock:3:50051", 50051, {}, &metrics, nullptr);
  ASSERT_TRUE(check.ok()) << check.status();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_TRUE((*check)->status().ok());
  EXPECT_THAT(metrics.Render(), Not(HasSubstr("relserve_grpc_listener_ok")));
}

}  // namespace
}  // namespace relserve
