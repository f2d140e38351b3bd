#include "server/metrics/http_endpoint.h"

#include <gtest/gtest.h>
#include <dirent.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include <atomic>
#include <optional>
#include <chrono>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "tests/metrics/metrics_test_util.h"

namespace relserve {
namespace {

using metrics_test::ClosedWithin;
using metrics_test::ConnectLoopback;
using metrics_test::ConnectLoopbackFrom;
using metrics_test::HttpGet;
using metrics_test::HttpGetFrom;
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
    std::function<absl::Status()> ready = nullptr) {
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
  auto endpoint = StartOrDie(LoopbackConfig(), [] { return std::string(kBody); }, [&] {
    return ready.load() ? absl::OkStatus() : absl::UnavailableError("the gRPC listener is gone");
  });
  ASSERT_NE(endpoint, nullptr);
  HttpResponse r = HttpGet(endpoint->port(), "/healthz");
  EXPECT_EQ(r.status, 503) << r.raw;
  EXPECT_EQ(r.body, "the gRPC listener is gone\n");  // the reason, for whoever probes
  ready = true;
  r = HttpGet(endpoint->port(), "/healthz");
  EXPECT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body, "ok\n");
  EXPECT_EQ(r.Header("content-type"), "text/plain; charset=utf-8");
}

TEST(MetricsHttpEndpointTest, HealthzCallbackThatThrowsIs503) {
  auto endpoint = StartOrDie(LoopbackConfig(), [] { return std::string(kBody); },
                             []() -> absl::Status { throw std::runtime_error("boom"); });
  ASSERT_NE(endpoint, nullptr);
  const HttpResponse r = HttpGet(endpoint->port(), "/healthz");
  EXPECT_EQ(r.status, 503) << r.raw;
  EXPECT_EQ(r.body, "the health callback failed: boom\n");
}

TEST(MetricsHttpEndpointTest, HealthzWithoutCallbackIsOk) {
  auto endpoint = StartOrDie();
  ASSERT_NE(endpoint, nullptr);
  EXPECT_EQ(HttpGet(endpoint->port(), "/healthz").status, 200);
}

// With an authorization check, /metrics needs what it accepts (the header's name in any case);
// /healthz stays open, for probes that carry no key.
TEST(MetricsHttpEndpointTest, AuthorizeMetricsGuardsMetricsOnly) {
  HttpEndpointConfig config = LoopbackConfig();
  std::vector<std::optional<std::string>> seen;
  config.authorize_metrics = [&seen](std::optional<std::string_view> authorization) {
    seen.emplace_back(authorization ? std::optional<std::string>(*authorization) : std::nullopt);
    return authorization == "Bearer good" ? absl::OkStatus() : absl::UnauthenticatedError("missing API key");
  };
  auto endpoint = StartOrDie(config);
  ASSERT_NE(endpoint, nullptr);
  HttpResponse r = HttpGet(endpoint->port(), "/metrics");
  EXPECT_EQ(r.status, 401) << r.raw;
  EXPECT_EQ(r.Header("www-authenticate"), "Bearer");
  EXPECT_EQ(r.body, "Unauthorized: missing API key\n");
  EXPECT_EQ(RawRequest(endpoint->port(), "HEAD /metrics HTTP/1.1\r\nAuthorization: Bearer bad\r\n\r\n").status, 401);
  r = RawRequest(endpoint->port(), "GET /metrics HTTP/1.1\r\nauthorization: Bearer good\r\n\r\n");
  EXPECT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body, kBody);
  EXPECT_EQ(HttpGet(endpoint->port(), "/healthz").status, 200);
  ASSERT_EQ(seen.size(), 3u);  // /healthz did not ask
  EXPECT_EQ(seen[0], std::nullopt);
  EXPECT_EQ(seen[1], "Bearer bad");
  EXPECT_EQ(seen[2], "Bearer good");
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
  const HttpResponse hello = RawRequest(port, "hello there\r\n\r\n");
  EXPECT_EQ(hello.status, 400);
  // The body says what was wrong (the parser's own tests are in http_request_test.cc).
  EXPECT_EQ(hello.body,
            "Bad Request: the request line is not METHOD SP TARGET SP HTTP-VERSION\n");
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

// A full table takes the new connection and closes the oldest one that has not sent its
// request, at once (not after that connection's read timeout).
TEST(MetricsHttpEndpointTest, FullTableEvictsTheOldestConnectionWithoutARequest) {
  HttpEndpointConfig config = LoopbackConfig();
  config.max_connections = 3;
  config.read_timeout_ms = 10000;
  auto endpoint = StartOrDie(config);
  ASSERT_NE(endpoint, nullptr);
  const int port = endpoint->port();
  const int oldest = ConnectLoopbackFrom("127.0.0.2", port);
  ASSERT_GE(oldest, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const int partial = ConnectLoopbackFrom("127.0.0.3", port);
  ASSERT_GE(partial, 0);
  ASSERT_TRUE(SendAll(partial, "GET /metr"));
  const int idle = ConnectLoopbackFrom("127.0.0.4", port);
  ASSERT_GE(idle, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));

  const auto start = Clock::now();
  EXPECT_EQ(HttpGet(port, "/metrics").status, 200);
  EXPECT_LT(SecondsSince(start), 1.0);  // far below the 10 s read timeout
  EXPECT_TRUE(ClosedWithin(oldest, 2000));
  // The answered request left; fill its slot. The next newcomer takes the next oldest: the
  // partial request.
  const int idle2 = ConnectLoopbackFrom("127.0.0.5", port);
  ASSERT_GE(idle2, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(HttpGet(port, "/healthz").status, 200);
  EXPECT_TRUE(ClosedWithin(partial, 2000));
  EXPECT_FALSE(ClosedWithin(idle, 100));  // the younger ones are still held
  EXPECT_FALSE(ClosedWithin(idle2, 100));
  ::close(oldest);
  ::close(partial);
  ::close(idle);
  ::close(idle2);
}

// One peer address may hold max_connections_per_peer connections; its next one evicts its
// own oldest, not another peer's, even when that other peer's connection is older.
TEST(MetricsHttpEndpointTest, PerPeerCapEvictsOnlyThatPeersOldestConnection) {
  HttpEndpointConfig config = LoopbackConfig();
  config.max_connections_per_peer = 3;
  config.read_timeout_ms = 10000;
  auto endpoint = StartOrDie(config);
  ASSERT_NE(endpoint, nullptr);
  const int port = endpoint->port();
  const int other = ConnectLoopbackFrom("127.0.0.3", port);
  ASSERT_GE(other, 0);
  std::vector<int> same;
  for (int i = 0; i < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    same.push_back(ConnectLoopbackFrom("127.0.0.2", port));
    ASSERT_GE(same.back(), 0);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  for (int fd : same) EXPECT_FALSE(ClosedWithin(fd, 50));  // at the cap, not over it

  const int fourth = ConnectLoopbackFrom("127.0.0.2", port);
  ASSERT_GE(fourth, 0);
  EXPECT_TRUE(ClosedWithin(same[0], 2000));
  EXPECT_FALSE(ClosedWithin(same[1], 100));
  EXPECT_FALSE(ClosedWithin(same[2], 100));
  EXPECT_FALSE(ClosedWithin(other, 100));
  // A request from the capped peer is served too: it evicts that peer's oldest idle one.
  EXPECT_EQ(HttpGetFrom("127.0.0.2", port, "/healthz").status, 200);
  EXPECT_TRUE(ClosedWithin(same[1], 2000));
  EXPECT_FALSE(ClosedWithin(other, 100));
  for (int fd : same) ::close(fd);
  ::close(fourth);
  ::close(other);
}

// When every slot holds a request already read, a newcomer still gets in: the oldest client
// that does not read its response is dropped.
TEST(MetricsHttpEndpointTest, FullTableOfUnreadResponsesStillTakesANewcomer) {
  HttpEndpointConfig config = LoopbackConfig();
  config.max_connections = 1;
  config.write_timeout_ms = 20000;
  const std::string big(8 << 20, 'x');  // far more than the socket buffers hold
  auto endpoint = StartOrDie(config, [&] { return big; });
  ASSERT_NE(endpoint, nullptr);
  const int port = endpoint->port();
  const int stalled = ConnectLoopbackFrom("127.0.0.2", port, /*receive_buffer=*/4096);
  ASSERT_GE(stalled, 0);
  ASSERT_TRUE(SendAll(stalled, "GET /metrics HTTP/1.1\r\n\r\n"));  // and never reads
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto start = Clock::now();
  EXPECT_EQ(HttpGetFrom("127.0.0.3", port, "/healthz").status, 200);
  EXPECT_LT(SecondsSince(start), 2.0);  // not after the 20 s write timeout
  ::close(stalled);
}

// The request head has read_timeout_ms from the accept, however the bytes trickle in.
TEST(MetricsHttpEndpointTest, TrickledBytesDoNotExtendTheHeaderDeadline) {
  HttpEndpointConfig config = LoopbackConfig();
  config.read_timeout_ms = 1000;
  auto endpoint = StartOrDie(config);
  ASSERT_NE(endpoint, nullptr);
  const int fd = ConnectLoopback(endpoint->port());
  ASSERT_GE(fd, 0);
  const auto start = Clock::now();
  const std::string endless = "GET /metrics HTTP/1.1\r\nX-Slow: " + std::string(200, 'a');
  bool closed = false;
  for (size_t i = 0; i < endless.size() && !closed; ++i) {
    SendAll(fd, endless.substr(i, 1));  // fails once the server has closed
    closed = ClosedWithin(fd, 100);
  }
  EXPECT_TRUE(closed);
  EXPECT_GE(SecondsSince(start), 0.9);
  EXPECT_LT(SecondsSince(start), 2.0);  // ~10 bytes in: the deadline did not move
  ::close(fd);
}

// The table is bounded by a quarter of the soft descriptor limit.
TEST(MetricsHttpEndpointTest, TableIsBoundedByTheDescriptorBudget) {
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  if (saved.rlim_max < 400) GTEST_SKIP() << "hard descriptor limit below 400";
  rlimit low = saved;
  low.rlim_cur = 400;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  auto bounded = MetricsHttpEndpoint::Start(LoopbackConfig(), [] { return std::string(); },
                                            nullptr);
  HttpEndpointConfig small = LoopbackConfig();
  small.max_connections = 10;
  auto configured = MetricsHttpEndpoint::Start(small, [] { return std::string(); }, nullptr);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
  ASSERT_TRUE(bounded.ok()) << bounded.status();
  ASSERT_TRUE(configured.ok()) << configured.status();
  EXPECT_EQ((*bounded)->max_connections(), 100);
  EXPECT_EQ((*configured)->max_connections(), 10);
  auto unbounded = StartOrDie();
  ASSERT_NE(unbounded, nullptr);
  EXPECT_EQ(unbounded->max_connections(),
            std::min<int>(HttpEndpointConfig().max_connections, saved.rlim_cur / 4));
}

// The open descriptor numbers of this process.
std::set<int> OpenFds() {
  std::set<int> fds;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return fds;
  while (dirent* e = ::readdir(dir)) {
    if (e->d_name[0] != '.') fds.insert(std::atoi(e->d_name));
  }
  fds.erase(::dirfd(dir));
  ::closedir(dir);
  return fds;
}

// Out of descriptors, the endpoint closes its oldest connection without a request to take
// the new one, instead of leaving it in the backlog until the idle ones time out.
TEST(MetricsHttpEndpointTest, OutOfDescriptorsEvictsAnIdleConnectionToServe) {
  HttpEndpointConfig config = LoopbackConfig();
  config.read_timeout_ms = 10000;
  auto endpoint = StartOrDie(config);
  ASSERT_NE(endpoint, nullptr);
  std::vector<int> idle;
  for (int i = 0; i < 4; ++i) {
    idle.push_back(ConnectLoopback(endpoint->port()));
    ASSERT_GE(idle.back(), 0);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // all four accepted
  // A limit that leaves exactly one descriptor number free: the client's socket takes it,
  // and the server's accept() fails with EMFILE.
  const std::set<int> open = OpenFds();
  int free_fd = 0;
  while (open.count(free_fd) != 0) ++free_fd;
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit tight = saved;
  tight.rlim_cur = static_cast<rlim_t>(free_fd) + 1;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &tight), 0);
  const auto start = Clock::now();
  const int fd = ConnectLoopback(endpoint->port());
  SendAll(fd, "GET /healthz HTTP/1.1\r\n\r\n");
  const std::string raw = ReadUntilClose(fd, 5000);
  const double seconds = SecondsSince(start);
  ::close(fd);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
  // Parsed only with descriptors to spare: UBSan's vptr check probes memory through a pipe,
  // and without one it takes the istringstream for an invalid object.
  const HttpResponse r = ParseResponse(raw);
  EXPECT_EQ(r.status, 200) << r.raw;
  EXPECT_LT(seconds, 2.0);
  EXPECT_TRUE(ClosedWithin(idle[0], 2000));  // the oldest idle connection made room
  EXPECT_FALSE(ClosedWithin(idle[3], 100));
  for (int fd : idle) ::close(fd);
}

// Slowloris: clients that connect and say nothing, and clients that send their request a
// byte a second, each reopened as soon as the server drops it, hold connections from several
// addresses, one of them the address the probes come from. Meanwhile /healthz and /metrics
// are asked for again and again, and each must be answered at once. The attack has several
// times more connections than the table has slots, and the read timeout outlasts the test:
// only eviction can make room.
class SlowClients {
 public:
  struct Peer {
    std::string address;
    int idle;     // connections that send nothing
    int trickle;  // connections that send one byte of an endless request head per second
  };

  SlowClients(int port, std::vector<Peer> peers) : port_(port) {
    for (const Peer& p : peers) {
      for (int i = 0; i < p.idle + p.trickle; ++i) {
        clients_.push_back({p.address, i >= p.idle, -1, 0});
      }
    }
    thread_ = std::thread([this] { Run(); });
  }
  ~SlowClients() {
    stop_ = true;
    thread_.join();
    for (Client& c : clients_) {
      if (c.fd >= 0) ::close(c.fd);
    }
  }
  int open() const { return open_.load(); }
  int reconnects() const { return reconnects_.load(); }

 private:
  struct Client {
    std::string address;
    bool trickle;
    int fd;
    size_t sent;
  };

  void Run() {
    const std::string head = "GET /metrics HTTP/1.1\r\nX-Slow: " + std::string(4096, 'a');
    auto next_byte = Clock::now();
    bool first_round = true;
    while (!stop_) {
      const bool send_now = Clock::now() >= next_byte;
      if (send_now) next_byte += std::chrono::seconds(1);
      int open = 0;
      for (Client& c : clients_) {
        if (c.fd >= 0) {
          // Dropped by the server? Then it is reopened below, as an attacker would.
          pollfd p{c.fd, POLLIN, 0};
          char buf[256];
          if (::poll(&p, 1, 0) > 0 && ::recv(c.fd, buf, sizeof(buf), MSG_DONTWAIT) <= 0) {
            ::close(c.fd);
            c.fd = -1;
          }
        }
        if (c.fd < 0) {
          // Non-blocking: an attacker does not wait for a server that stopped accepting.
          c.fd = ConnectLoopbackFrom(c.address, port_, 0, /*connect_timeout_ms=*/0);
          c.sent = 0;
          if (c.fd >= 0 && !first_round) ++reconnects_;
        }
        if (c.fd >= 0 && c.trickle && send_now && c.sent < head.size()) {
          ::send(c.fd, head.data() + c.sent++, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        }
        if (c.fd >= 0) ++open;
      }
      first_round = false;
      open_ = open;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
  }

  const int port_;
  std::vector<Client> clients_;
  std::atomic<bool> stop_{false};
  std::atomic<int> open_{0};
  std::atomic<int> reconnects_{0};
  std::thread thread_;
};

TEST(MetricsHttpEndpointTest, SlowAndIdleClientsDoNotStarveProbes) {
  HttpEndpointConfig config = LoopbackConfig();
  config.max_connections = 64;
  config.read_timeout_ms = 60000;  // the attackers' slots never time out during the test
  auto endpoint = StartOrDie(config);
  ASSERT_NE(endpoint, nullptr);
  const int port = endpoint->port();

  std::vector<SlowClients::Peer> peers = {
      {"127.0.0.1", 50, 50},  // the probes' own address
      {"127.0.0.2", 0, 60},
  };
  for (int i = 1; i <= 35; ++i) peers.push_back({"127.0.1." + std::to_string(i), 2, 2});
  SlowClients attack(port, peers);  // 300 connections
  const auto ramp = Clock::now();
  while (attack.open() < 300 && SecondsSince(ramp) < 10) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_GE(attack.open(), 300);

  // Probes for 5 s: /healthz and /metrics, from the attacked address and from a clean one.
  int probes = 0, answered = 0;
  double slowest = 0;
  const auto start = Clock::now();
  while (SecondsSince(start) < 5.0) {
    const std::string source = probes % 2 == 0 ? "127.0.0.1" : "127.0.0.9";
    const std::string path = (probes / 2) % 2 == 0 ? "/healthz" : "/metrics";
    const auto t0 = Clock::now();
    const HttpResponse r = HttpGetFrom(source, port, path, 3000);
    const double took = SecondsSince(t0);
    ++probes;
    slowest = std::max(slowest, took);
    if (r.status == 200 && took < 1.0) {
      ++answered;
    } else {
      ADD_FAILURE() << path << " from " << source << ": status " << r.status << " after "
                    << took << " s";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_GE(probes, 10);
  EXPECT_EQ(answered, probes) << "slowest " << slowest << " s";
  // The attack kept up its pressure throughout: the server kept dropping its connections
  // (it cannot hold 300 in 64 slots) and they kept coming back.
  EXPECT_GT(attack.reconnects(), 300);
  EXPECT_EQ(HttpGetFrom("127.0.0.1", port, "/metrics").body, kBody);
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
