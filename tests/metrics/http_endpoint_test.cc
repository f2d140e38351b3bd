#include "server/metrics/http_endpoint.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "tests/metrics/metrics_test_util.h"

namespace relserve {
namespace {

using metrics_test::ConnectLoopback;
using metrics_test::HttpGet;
using metrics_test::HttpResponse;
using metrics_test::ParseResponse;
using metrics_test::RawRequest;
using metrics_test::ReadUntilClose;
using metrics_test::SendAll;
using Clock = std::chrono::steady_clock;

constexpr char kBody[] =
    "# HELP test_total A test counter.\n# TYPE test_total counter\ntest_total 42\n";

HttpEndpointConfig LoopbackConfig() {
  HttpEndpointConfig config;
  config.address = "127.0.0.1";
  config.port = 0;
  return config;
}

std::unique_ptr<MetricsHttpEndpoint> StartOrDie(
    HttpEndpointConfig config = LoopbackConfig(),
    std::function<std::string()> render = [] { return std::string(kBody); },
    std::function<bool()> ready = nullptr) {
  auto endpoint = MetricsHttpEndpoint::Start(config, std::move(render), std::move(ready));
  EXPECT_TRUE(endpoint.ok()) << endpoint.status();
  if (!endpoint.ok()) return nullptr;
  EXPECT_GT((*endpoint)->port(), 0);
  return std::move(endpoint).value();
}

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

TEST(MetricsHttpEndpointTest, ServesMetrics) {
  std::atomic<int> renders{0};
  auto endpoint = StartOrDie(LoopbackConfig(), [&] {
    ++renders;
    return std::string(kBody);
  });
  ASSERT_NE(endpoint, nullptr);
  const HttpResponse r = HttpGet(endpoint->port(), "/metrics");
  EXPECT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.Header("content-type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(r.Header("content-length"), std::to_string(r.body.size()));
  EXPECT_EQ(r.Header("connection"), "close");
  EXPECT_EQ(r.body, kBody);
  EXPECT_EQ(renders.load(), 1);

  // Query strings are ignored; HTTP/1.0 is accepted.
  EXPECT_EQ(HttpGet(endpoint->port(), "/metrics?name[]=x").body, kBody);
  EXPECT_EQ(RawRequest(endpoint->port(), "GET /metrics HTTP/1.0\r\n\r\n").body, kBody);
}

TEST(MetricsHttpEndpointTest, HeadHasHeadersOnly) {
  auto endpoint = StartOrDie();
  ASSERT_NE(endpoint, nullptr);
  const HttpResponse r = HttpGet(endpoint->port(), "/metrics", "HEAD");
  EXPECT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.Header("content-length"), std::to_string(sizeof(kBody) - 1));
  EXPECT_TRUE(r.body.empty());
}

TEST(MetricsHttpEndpointTest, RequestArrivingInPieces) {
  auto endpoint = StartOrDie();
  ASSERT_NE(endpoint, nullptr);
  int fd = ConnectLoopback(endpoint->port());
  ASSERT_GE(fd, 0);
  for (const char* piece : {"GE", "T /met", "rics HTTP/1.1\r\nHo", "st: x\r\n", "\r\n"}) {
    ASSERT_TRUE(SendAll(fd, piece));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const HttpResponse r = ParseResponse(ReadUntilClose(fd, 5000));
  ::close(fd);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, kBody);
}

TEST(MetricsHttpEndpointTest, HealthzFollowsReadyCallback) {
  std::atomic<bool> ready{false};
  auto endpoint = StartOrDie(LoopbackConfig(), [] { return std::string(kBody); },
                             [&] { return ready.load(); });
  ASSERT_NE(endpoint, nullptr);
  HttpResponse r = HttpGet(endpoint->port(), "/healthz");
  EXPECT_EQ(r.status, 503) << r.raw;
  ready = true;
  r = HttpGet(endpoint->port(), "/healthz");
  EXPECT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body, "ok\n");
  EXPECT_EQ(r.Header("content-type"), "text/plain; charset=utf-8");
}

TEST(MetricsHttpEndpointTest, HealthzWithoutCallbackIsOk) {
  auto endpoint = StartOrDie();
  ASSERT_NE(endpoint, nullptr);
  EXPECT_EQ(HttpGet(endpoint->port(), "/healthz").status, 200);
}

TEST(MetricsHttpEndpointTest, UnknownPathAndMethod) {
  auto endpoint = StartOrDie();
  ASSERT_NE(endpoint, nullptr);
  EXPECT_EQ(HttpGet(endpoint->port(), "/").status, 404);
  EXPECT_EQ(HttpGet(endpoint->port(), "/metricsx").status, 404);
  const HttpResponse post = RawRequest(
      endpoint->port(), "POST /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello");
  EXPECT_EQ(post.status, 405) << post.raw;
  EXPECT_EQ(post.Header("allow"), "GET, HEAD");
  EXPECT_EQ(HttpGet(endpoint->port(), "/healthz", "DELETE").status, 405);
}

TEST(MetricsHttpEndpointTest, MalformedRequestsGet400) {
  auto endpoint = StartOrDie();
  ASSERT_NE(endpoint, nullptr);
  const int port = endpoint->port();
  EXPECT_EQ(RawRequest(port, "hello there\r\n\r\n").status, 400);
  // A TLS ClientHello start (no line end): refused at once, not after the read timeout.
  const auto tls_start = Clock::now();
  EXPECT_EQ(RawRequest(port, std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11))
                .status,
            400);
  EXPECT_LT(SecondsSince(tls_start), 1.0);
  EXPECT_EQ(RawRequest(port, "GET /metrics FTP/1.1\r\n\r\n").status, 400);
  EXPECT_EQ(RawRequest(port, "GET  /metrics HTTP/1.1\r\n\r\n").status, 400);
  EXPECT_EQ(RawRequest(port, "G(T /metrics HTTP/1.1\r\n\r\n").status, 400);
  EXPECT_EQ(RawRequest(port, "GET /metrics HTTP/1.1\r\nno colon here\r\n\r\n").status, 400);
  EXPECT_EQ(RawRequest(port, "GET /metrics HTTP/2.0\r\n\r\n").status, 505);

  // Garbage without a line end, then the client half-closes: answered, not left hanging.
  int fd = ConnectLoopback(port);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAll(fd, "garbage"));
  ::shutdown(fd, SHUT_WR);
  const auto start = Clock::now();
  EXPECT_EQ(ParseResponse(ReadUntilClose(fd, 5000)).status, 400);
  EXPECT_LT(SecondsSince(start), 1.0);
  ::close(fd);
}

TEST(MetricsHttpEndpointTest, OversizedRequestGets431) {
  HttpEndpointConfig config = LoopbackConfig();
  config.max_request_bytes = 1024;
  auto endpoint = StartOrDie(config);
  ASSERT_NE(endpoint, nullptr);
  std::string request = "GET /metrics HTTP/1.1\r\n";
  for (int i = 0; i < 100; ++i) request += "X-Filler: 0123456789012345678901234567890123456789\r\n";
  request += "\r\n";
  EXPECT_EQ(RawRequest(endpoint->port(), request).status, 431);
  EXPECT_EQ(RawRequest(endpoint->port(), "GET /" + std::string(4000, 'a') + " HTTP/1.1\r\n\r\n")
                .status,
            414);
  // The endpoint still works afterwards.
  EXPECT_EQ(HttpGet(endpoint->port(), "/metrics").status, 200);
}

TEST(MetricsHttpEndpointTest, RenderExceptionGives500) {
  auto endpoint = StartOrDie(LoopbackConfig(), []() -> std::string {
    throw std::runtime_error("registry exploded");
  });
  ASSERT_NE(endpoint, nullptr);
  const HttpResponse r = HttpGet(endpoint->port(), "/metrics");
  EXPECT_EQ(r.status, 500);
  EXPECT_NE(r.body.find("registry exploded"), std::string::npos);
}

TEST(MetricsHttpEndpointTest, SilentClientDoesNotBlockOthers) {
  HttpEndpointConfig config = LoopbackConfig();
  config.read_timeout_ms = 2000;
  auto endpoint = StartOrDie(config);
  ASSERT_NE(endpoint, nullptr);

  const int silent = ConnectLoopback(endpoint->port());
  ASSERT_GE(silent, 0);
  const int partial = ConnectLoopback(endpoint->port());
  ASSERT_GE(partial, 0);
  ASSERT_TRUE(SendAll(partial, "GET /metr"));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));

  const auto start = Clock::now();
  const HttpResponse r = HttpGet(endpoint->port(), "/metrics");
  EXPECT_EQ(r.status, 200);
  EXPECT_LT(SecondsSince(start), 0.5);  // far below the 2 s read timeout

  // The silent client is dropped once its read timeout has passed.
  bool eof = false;
  const std::string got = ReadUntilClose(silent, 5000, &eof);
  EXPECT_TRUE(eof);
  EXPECT_TRUE(got.empty());
  EXPECT_GE(SecondsSince(start), 1.5);
  EXPECT_LT(SecondsSince(start), 3.0);
  ReadUntilClose(partial, 5000, &eof);
  EXPECT_TRUE(eof);
  ::close(silent);
  ::close(partial);
}

TEST(MetricsHttpEndpointTest, ManyConcurrentClients) {
  std::string big(300000, 'x');  // larger than a socket buffer: exercises partial writes
  big += "\n";
  auto endpoint = StartOrDie(LoopbackConfig(), [&] { return big; });
  ASSERT_NE(endpoint, nullptr);
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 16; ++t) {
    clients.emplace_back([&] {
      for (int i = 0; i < 10; ++i) {
        const HttpResponse r = HttpGet(endpoint->port(), "/metrics");
        if (r.status == 200 && r.body == big) ++ok;
      }
    });
  }
  for (auto& c : clients) c.join();
  EXPECT_EQ(ok.load(), 160);
}

TEST(MetricsHttpEndpointTest, ConnectionsBeyondTheCapWait) {
  HttpEndpointConfig config = LoopbackConfig();
  config.max_connections = 1;
  config.read_timeout_ms = 300;
  auto endpoint = StartOrDie(config);
  ASSERT_NE(endpoint, nullptr);
  const int silent = ConnectLoopback(endpoint->port());
  ASSERT_GE(silent, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto start = Clock::now();
  EXPECT_EQ(HttpGet(endpoint->port(), "/metrics").status, 200);  // served after the timeout
  EXPECT_LT(SecondsSince(start), 2.0);
  ::close(silent);
}

TEST(MetricsHttpEndpointTest, StopWithConnectedClientReturns) {
  auto endpoint = StartOrDie();
  ASSERT_NE(endpoint, nullptr);
  const int idle = ConnectLoopback(endpoint->port());
  ASSERT_GE(idle, 0);
  const int partial = ConnectLoopback(endpoint->port());
  ASSERT_GE(partial, 0);
  ASSERT_TRUE(SendAll(partial, "GET /metrics HTTP/1.1\r\n"));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto start = Clock::now();
  endpoint->Stop();
  EXPECT_LT(SecondsSince(start), 0.5);
  bool eof = false;
  ReadUntilClose(idle, 2000, &eof);
  EXPECT_TRUE(eof);  // the server closed the connection
  ::close(idle);
  ::close(partial);
  endpoint->Stop();  // twice is fine
  EXPECT_LT(ConnectLoopback(endpoint->port()), 0);  // nobody listens any more
  endpoint.reset();  // and the destructor after Stop
}

TEST(MetricsHttpEndpointTest, ConcurrentStops) {
  auto endpoint = StartOrDie();
  ASSERT_NE(endpoint, nullptr);
  std::thread a([&] { endpoint->Stop(); });
  std::thread b([&] { endpoint->Stop(); });
  a.join();
  b.join();
}

TEST(MetricsHttpEndpointTest, PortInUseIsUnavailable) {
  auto first = StartOrDie();
  ASSERT_NE(first, nullptr);
  HttpEndpointConfig config = LoopbackConfig();
  config.port = first->port();
  auto second = MetricsHttpEndpoint::Start(config, [] { return std::string(); }, nullptr);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(std::string(second.status().message()).find("Address already in use"),
            std::string::npos)
      << second.status();
}

TEST(MetricsHttpEndpointTest, InvalidArguments) {
  HttpEndpointConfig config = LoopbackConfig();
  EXPECT_EQ(MetricsHttpEndpoint::Start(config, nullptr, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  config.port = 70000;
  EXPECT_EQ(MetricsHttpEndpoint::Start(config, [] { return std::string(); }, nullptr)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  config.port = 0;
  config.address = "not an address";
  EXPECT_EQ(MetricsHttpEndpoint::Start(config, [] { return std::string(); }, nullptr)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(MetricsHttpEndpointTest, LocalhostAndIpv6Any) {
  HttpEndpointConfig config = LoopbackConfig();
  config.address = "localhost";
  auto endpoint = StartOrDie(config);
  ASSERT_NE(endpoint, nullptr);
  EXPECT_EQ(HttpGet(endpoint->port(), "/metrics").status, 200);
  config.address = "::";  // dual stack: reachable over IPv4 loopback too
  auto any = MetricsHttpEndpoint::Start(config, [] { return std::string(kBody); }, nullptr);
  if (!any.ok()) GTEST_SKIP() << "no IPv6 here: " << any.status();
  EXPECT_EQ(HttpGet((*any)->port(), "/metrics").status, 200);
}

TEST(MetricsHttpEndpointTest, DefaultAddressListensOnAllInterfaces) {
  HttpEndpointConfig config;  // 0.0.0.0
  config.port = 0;
  auto endpoint = StartOrDie(config);
  ASSERT_NE(endpoint, nullptr);
  EXPECT_EQ(HttpGet(endpoint->port(), "/metrics").status, 200);
}

}  // namespace
}  // namespace relserve
