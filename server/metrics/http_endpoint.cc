#include "server/metrics/http_endpoint.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <string>
#include <system_error>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/metrics/http_request.h"

namespace relserve {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kMetricsContentType[] = "text/plain; version=0.0.4; charset=utf-8";
constexpr char kPlainContentType[] = "text/plain; charset=utf-8";
// After the response is sent the write side is shut down and the rest of whatever the client
// sent is read and discarded for a moment, so closing does not reset the connection (a reset
// can make the client lose the response it has not read yet).
constexpr auto kDrainTime = std::chrono::milliseconds(500);
constexpr size_t kMaxDrainBytes = 1 << 20;
// Back-off when accept() runs out of file descriptors.
constexpr auto kAcceptBackoff = std::chrono::milliseconds(100);
// The connection table never shrinks below this, however low the descriptor limit.
constexpr rlim_t kMinConnections = 8;
// Connections the kernel may complete before they are accepted (capped by somaxconn).
constexpr int kListenBacklog = 512;

std::string ErrnoText(int err) { return std::error_code(err, std::generic_category()).message(); }

void CloseFd(int& fd) {
  if (fd >= 0) {
    ::close(fd);
    fd = -1;
  }
}

const char* ReasonPhrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 414: return "URI Too Long";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
}

std::string BuildResponse(int status, const char* content_type, const std::string& body,
                          bool include_body, const char* extra_headers = "") {
  std::string out = absl::StrCat("HTTP/1.1 ", status, " ", ReasonPhrase(status),
                                 "\r\nContent-Type: ", content_type,
                                 "\r\nContent-Length: ", body.size(),
                                 "\r\nCache-Control: no-store\r\nConnection: close\r\n",
                                 extra_headers, "\r\n");
  if (include_body) out += body;
  return out;
}

// A plain-text error whose body names the problem, e.g. "Bad Request: the method is not a token".
std::string ErrorResponse(int status, const std::string& detail = "",
                          const char* extra_headers = "") {
  std::string body = ReasonPhrase(status);
  if (!detail.empty()) absl::StrAppend(&body, ": ", detail);
  body += "\n";
  return BuildResponse(status, kPlainContentType, body, /*include_body=*/true, extra_headers);
}

// The peer's address as text; an IPv4-mapped IPv6 address as its IPv4 address, so that a
// client counts once whether the endpoint listens on "0.0.0.0" or "::".
std::string PeerKey(const sockaddr_storage& addr) {
  char text[INET6_ADDRSTRLEN] = "";
  if (addr.ss_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&addr)->sin_addr, text,
                sizeof(text));
  } else if (addr.ss_family == AF_INET6) {
    const in6_addr& a6 = reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(&a6)) {
      ::inet_ntop(AF_INET, &a6.s6_addr[12], text, sizeof(text));
    } else {
      ::inet_ntop(AF_INET6, &a6, text, sizeof(text));
    }
  }
  return text;
}

}  // namespace

class MetricsHttpEndpoint::Loop {
 public:
  // config.max_connections is the effective table size (the descriptor budget applied).
  Loop(const HttpEndpointConfig& config, int listen_fd, int wake_fd,
       std::function<std::string()> render_metrics, std::function<absl::Status()> ready)
      : config_(config),
        listen_fd_(listen_fd),
        wake_fd_(wake_fd),
        render_metrics_(std::move(render_metrics)),
        ready_(std::move(ready)) {}

  ~Loop() {
    for (Connection& c : connections_) CloseFd(c.fd);
    CloseFd(listen_fd_);
    CloseFd(wake_fd_);
  }

  void RequestStop() {
    stop_.store(true);
    const uint64_t one = 1;
    ssize_t n = ::write(wake_fd_, &one, sizeof(one));
    (void)n;  // the eventfd can only be full if a wake-up is already pending
  }

  void Run();

 private:
  // kReading until the request head is complete; then kWriting the response; then kDraining
  // (response sent, write side shut down) until the client closes or kDrainTime passes.
  enum class State { kReading, kWriting, kDraining };
  struct Connection {
    int fd = -1;
    std::string peer;     // PeerKey of the client
    uint64_t serial = 0;  // accept order: smaller is older
    State state = State::kReading;
    std::string in;
    std::string out;
    size_t out_pos = 0;
    size_t drained = 0;
    Clock::time_point deadline;
  };
  static constexpr size_t kNone = static_cast<size_t>(-1);
  // Connections taken per poll round at most, so that a connection flood cannot keep the
  // loop from serving the connections it already has.
  static constexpr int kMaxAcceptsPerRound = 64;

  void AcceptSome(Clock::time_point now);
  // Closes the connection and forgets it in the per-peer count (it stays in connections_).
  void Release(Connection& c);
  // Releases connections_[i] and removes it (the last connection takes its place).
  void CloseAt(size_t i);
  // The connection to evict among `peer`'s (all connections when null). With `any_state`: the
  // oldest draining one (served already; only the client's close is awaited), else the oldest
  // one still reading its request head, else the oldest one writing. Without: only the oldest
  // one reading. kNone when there is none.
  size_t PickVictim(const std::string* peer, bool any_state) const;
  // Closes one connection (PickVictim(peer, true)) to make room for a new one.
  void MakeRoom(const std::string* peer, Clock::time_point now);
  // Each returns false when the connection is finished and must be closed.
  bool OnReadable(Connection& c, Clock::time_point now);
  bool OnWritable(Connection& c, Clock::time_point now);
  bool Drain(Connection& c);
  void Respond(Connection& c, std::string response, Clock::time_point now);
  std::string Handle(const HttpRequestHead& req);

  const HttpEndpointConfig config_;
  int listen_fd_;
  int wake_fd_;
  const std::function<std::string()> render_metrics_;
  const std::function<absl::Status()> ready_;
  std::atomic<bool> stop_{false};
  std::vector<Connection> connections_;
  std::unordered_map<std::string, int> per_peer_;  // open connections per PeerKey
  uint64_t next_serial_ = 0;
  Clock::time_point accept_resume_{};
};

void MetricsHttpEndpoint::Loop::Run() {
  std::vector<pollfd> fds;
  while (!stop_.load()) {
    Clock::time_point now = Clock::now();
    fds.clear();
    fds.push_back({wake_fd_, POLLIN, 0});
    // The listening socket is watched even when the table is full: a new connection evicts
    // an old one (AcceptSome). Only a lack of descriptors pauses accepting.
    const bool accepting = now >= accept_resume_;
    fds.push_back({accepting ? listen_fd_ : -1, POLLIN, 0});
    Clock::time_point wake_at = accepting ? Clock::time_point::max() : accept_resume_;
    for (const Connection& c : connections_) {
      fds.push_back({c.fd, static_cast<short>(c.state == State::kWriting ? POLLOUT : POLLIN), 0});
      wake_at = std::min(wake_at, c.deadline);
    }
    int timeout_ms = -1;
    if (wake_at != Clock::time_point::max()) {
      const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(wake_at - now);
      timeout_ms = static_cast<int>(std::max<int64_t>(0, wait.count() + 1));
    }
    const int n = ::poll(fds.data(), fds.size(), timeout_ms);
    if (n < 0 && errno != EINTR) break;  // cannot happen with valid fds; do not spin
    if (stop_.load()) break;
    now = Clock::now();

    // Connections first (fds[2..] match connections_ as they were before accepting).
    size_t keep = 0;
    for (size_t i = 0; i < connections_.size(); ++i) {
      Connection& c = connections_[i];
      const short revents = n > 0 ? fds[i + 2].revents : 0;
      bool alive = true;
      if (revents != 0) {
        switch (c.state) {
          case State::kReading: alive = OnReadable(c, now); break;
          case State::kWriting: alive = OnWritable(c, now); break;
          case State::kDraining: alive = Drain(c); break;
        }
      }
      // Past the deadline: no complete head in time (however many bytes trickled in), a
      // client not reading its response, or the drain time is over.
      if (alive && now >= c.deadline) alive = false;
      if (!alive) {
        Release(c);
        continue;
      }
      if (keep != i) connections_[keep] = std::move(c);
      ++keep;
    }
    connections_.resize(keep);

    if (n > 0 && (fds[1].revents & POLLIN)) AcceptSome(now);
  }
  for (Connection& c : connections_) Release(c);
  connections_.clear();
  CloseFd(listen_fd_);
}

void MetricsHttpEndpoint::Loop::Release(Connection& c) {
  if (c.fd < 0) return;
  CloseFd(c.fd);
  auto it = per_peer_.find(c.peer);
  if (it != per_peer_.end() && --it->second <= 0) per_peer_.erase(it);
}

void MetricsHttpEndpoint::Loop::CloseAt(size_t i) {
  Release(connections_[i]);
  if (i + 1 != connections_.size()) connections_[i] = std::move(connections_.back());
  connections_.pop_back();
}

size_t MetricsHttpEndpoint::Loop::PickVictim(const std::string* peer, bool any_state) const {
  for (const State wanted : {State::kDraining, State::kReading, State::kWriting}) {
    if (!any_state && wanted != State::kReading) continue;
    size_t victim = kNone;
    for (size_t i = 0; i < connections_.size(); ++i) {
      const Connection& c = connections_[i];
      if (c.state != wanted || (peer != nullptr && c.peer != *peer)) continue;
      if (victim == kNone || c.serial < connections_[victim].serial) victim = i;
    }
    if (victim != kNone) return victim;
  }
  return kNone;
}

void MetricsHttpEndpoint::Loop::MakeRoom(const std::string* peer, Clock::time_point now) {
  while (true) {
    const size_t victim = PickVictim(peer, true);
    if (victim == kNone) return;
    Connection& c = connections_[victim];
    // The victim's request may have arrived since the last poll (a probe's comes right after
    // its connect): read it first, and spare the connection if it is now complete.
    if (c.state == State::kReading) {
      const bool alive = OnReadable(c, now);
      if (alive && c.state != State::kReading) continue;  // answered: pick another
    }
    CloseAt(victim);
    return;
  }
}

void MetricsHttpEndpoint::Loop::AcceptSome(Clock::time_point now) {
  bool freed_descriptor = false;
  for (int accepted = 0; accepted < kMaxAcceptsPerRound;) {
    sockaddr_storage addr{};
    socklen_t addr_len = sizeof(addr);
    const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &addr_len,
                             SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR) continue;
      if (errno == EMFILE || errno == ENFILE) {
        // Out of descriptors: give up the oldest connection that has not sent its request
        // (once per round; another thread may take the freed descriptor first).
        const size_t victim = freed_descriptor ? kNone : PickVictim(nullptr, false);
        if (victim != kNone) {
          CloseAt(victim);
          freed_descriptor = true;
          continue;
        }
        accept_resume_ = now + kAcceptBackoff;
        return;
      }
      if (errno == ENOBUFS || errno == ENOMEM) {
        accept_resume_ = now + kAcceptBackoff;
        return;
      }
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      ++accepted;  // ECONNABORTED and the like: that connection is gone; take the next one
      continue;
    }
    ++accepted;
    std::string peer = PeerKey(addr);
    // Make room: a peer at its cap gives up one of its own connections; a full table the
    // oldest connection of anyone.
    const auto count = per_peer_.find(peer);
    if (count != per_peer_.end() && count->second >= config_.max_connections_per_peer) {
      MakeRoom(&peer, now);
    }
    if (static_cast<int>(connections_.size()) >= config_.max_connections) MakeRoom(nullptr, now);
    Connection c;
    c.fd = fd;
    c.peer = std::move(peer);
    c.serial = next_serial_++;
    // The whole head must arrive by this deadline; it is never extended.
    c.deadline = now + std::chrono::milliseconds(config_.read_timeout_ms);
    ++per_peer_[c.peer];
    connections_.push_back(std::move(c));
    // Most requests are already there; serve them without another poll round.
    if (!OnReadable(connections_.back(), now)) CloseAt(connections_.size() - 1);
  }
}

bool MetricsHttpEndpoint::Loop::OnReadable(Connection& c, Clock::time_point now) {
  char buf[4096];
  bool eof = false;
  while (c.in.size() <= config_.max_request_bytes) {
    const ssize_t r = ::recv(c.fd, buf, sizeof(buf), 0);
    if (r > 0) {
      c.in.append(buf, static_cast<size_t>(r));
      continue;
    }
    if (r == 0) {
      eof = true;
      break;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    return false;  // connection reset or similar
  }
  if (c.in.empty()) return !eof;
  const HttpRequestParse parse = ParseHttpRequestHead(c.in, config_.max_request_bytes);
  switch (parse.outcome) {
    case HttpRequestParse::Outcome::kIncomplete:
      if (!eof) return true;
      Respond(c, ErrorResponse(400, "the client closed before the request head was complete"),
              now);
      return OnWritable(c, now);
    case HttpRequestParse::Outcome::kError:
      Respond(c, ErrorResponse(parse.status, parse.error), now);
      return OnWritable(c, now);
    case HttpRequestParse::Outcome::kComplete:
      Respond(c, Handle(parse.head), now);
      return OnWritable(c, now);
  }
  return false;
}

void MetricsHttpEndpoint::Loop::Respond(Connection& c, std::string response,
                                        Clock::time_point now) {
  c.state = State::kWriting;
  c.in.clear();
  c.in.shrink_to_fit();
  c.out = std::move(response);
  c.out_pos = 0;
  c.deadline = now + std::chrono::milliseconds(config_.write_timeout_ms);
}

bool MetricsHttpEndpoint::Loop::OnWritable(Connection& c, Clock::time_point now) {
  while (c.out_pos < c.out.size()) {
    const ssize_t w =
        ::send(c.fd, c.out.data() + c.out_pos, c.out.size() - c.out_pos, MSG_NOSIGNAL);
    if (w > 0) {
      c.out_pos += static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    return false;  // peer went away
  }
  c.out.clear();
  c.out.shrink_to_fit();
  ::shutdown(c.fd, SHUT_WR);
  c.state = State::kDraining;
  c.deadline = std::min(c.deadline, now + kDrainTime);
  return Drain(c);
}

bool MetricsHttpEndpoint::Loop::Drain(Connection& c) {
  char buf[4096];
  while (true) {
    const ssize_t r = ::recv(c.fd, buf, sizeof(buf), 0);
    if (r > 0) {
      c.drained += static_cast<size_t>(r);
      if (c.drained > kMaxDrainBytes) return false;
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    return false;  // EOF: the client has read the response and closed
  }
}

std::string MetricsHttpEndpoint::Loop::Handle(const HttpRequestHead& req) {
  const bool head = req.method == "HEAD";
  const bool known_path = req.path == "/metrics" || req.path == "/healthz";
  if (!known_path) return ErrorResponse(404);
  if (req.method != "GET" && !head) return ErrorResponse(405, "", "Allow: GET, HEAD\r\n");
  if (req.path == "/healthz") {
    absl::Status health;
    try {
      if (ready_) health = ready_();
    } catch (const std::exception& e) {
      health = absl::InternalError(absl::StrCat("the health callback failed: ", e.what()));
    } catch (...) {
      health = absl::InternalError("the health callback failed");
    }
    if (health.ok()) return BuildResponse(200, kPlainContentType, "ok\n", !head);
    const std::string why = health.message().empty() ? std::string("not ready")
                                                     : std::string(health.message());
    return BuildResponse(503, kPlainContentType, why + "\n", !head);
  }
  if (config_.authorize_metrics) {
    std::optional<std::string_view> authorization;
    for (const auto& [name, value] : req.headers) {
      if (absl::EqualsIgnoreCase(name, "authorization")) {
        authorization = value;
        break;
      }
    }
    absl::Status allowed;
    try {
      allowed = config_.authorize_metrics(authorization);
    } catch (...) {
      allowed = absl::UnauthenticatedError("the authorization check failed");
    }
    if (!allowed.ok()) {
      return BuildResponse(401, kPlainContentType, absl::StrCat("Unauthorized: ", allowed.message(), "\n"), !head,
                           "WWW-Authenticate: Bearer\r\n");
    }
  }
  std::string body;
  try {
    body = render_metrics_();
  } catch (const std::exception& e) {
    return BuildResponse(500, kPlainContentType,
                         absl::StrCat("rendering metrics failed: ", e.what(), "\n"), !head);
  } catch (...) {
    return ErrorResponse(500);
  }
  return BuildResponse(200, kMetricsContentType, body, !head);
}

absl::StatusOr<std::unique_ptr<MetricsHttpEndpoint>> MetricsHttpEndpoint::Start(
    const HttpEndpointConfig& config, std::function<std::string()> render_metrics,
    std::function<absl::Status()> ready) {
  if (!render_metrics) return absl::InvalidArgumentError("metrics endpoint: no render callback");
  if (config.port < 0 || config.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics endpoint: port ", config.port, " out of range"));
  }
  if (config.read_timeout_ms <= 0 || config.write_timeout_ms <= 0 ||
      config.max_connections <= 0 || config.max_connections_per_peer <= 0 ||
      config.max_request_bytes == 0) {
    return absl::InvalidArgumentError("metrics endpoint: timeouts and limits must be positive");
  }
  HttpEndpointConfig effective = config;
  // Descriptor budget: a quarter of the soft limit, the rest being gRPC's and the models'.
  rlimit nofile{};
  if (::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY) {
    const rlim_t budget = std::max<rlim_t>(kMinConnections, nofile.rlim_cur / 4);
    if (budget < static_cast<rlim_t>(effective.max_connections)) {
      effective.max_connections = static_cast<int>(budget);
    }
  }
  const std::string where = config.address.find(':') != std::string::npos
                                ? absl::StrCat("[", config.address, "]:", config.port)
                                : absl::StrCat(config.address, ":", config.port);

  // Numeric addresses only (no name lookups at start-up); "localhost" is the one name known.
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV | AI_NUMERICHOST;
  addrinfo* addrs = nullptr;
  const std::string service = std::to_string(config.port);
  const std::string host = config.address == "localhost" ? "127.0.0.1" : config.address;
  const int gai = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints,
                                &addrs);
  if (gai != 0) {
    return absl::InvalidArgumentError(absl::StrCat("metrics endpoint: bad address ", where,
                                                   ": ", ::gai_strerror(gai)));
  }
  int listen_fd = -1;
  int last_errno = EADDRNOTAVAIL;
  for (addrinfo* ai = addrs; ai != nullptr && listen_fd < 0; ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                      ai->ai_protocol);
    if (fd < 0) {
      last_errno = errno;
      continue;
    }
    const int on = 1, off = 0;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    if (ai->ai_family == AF_INET6) {
      ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));  // "::" = dual stack
    }
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd, kListenBacklog) != 0) {
      last_errno = errno;
      CloseFd(fd);
      continue;
    }
    listen_fd = fd;
  }
  ::freeaddrinfo(addrs);
  if (listen_fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("metrics endpoint: cannot listen on ", where, ": ", ErrnoText(last_errno)));
  }

  sockaddr_storage bound{};
  socklen_t bound_len = sizeof(bound);
  int port = config.port;
  if (::getsockname(listen_fd, reinterpret_cast<sockaddr*>(&bound), &bound_len) == 0) {
    if (bound.ss_family == AF_INET) {
      port = ntohs(reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
    } else if (bound.ss_family == AF_INET6) {
      port = ntohs(reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port);
    }
  }

  const int wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd < 0) {
    const int err = errno;
    CloseFd(listen_fd);
    return absl::InternalError(absl::StrCat("metrics endpoint: eventfd: ", ErrnoText(err)));
  }

  std::unique_ptr<MetricsHttpEndpoint> endpoint(new MetricsHttpEndpoint());
  endpoint->port_ = port;
  endpoint->max_connections_ = effective.max_connections;
  endpoint->loop_ = std::make_unique<Loop>(effective, listen_fd, wake_fd, std::move(render_metrics),
                                           std::move(ready));
  try {
    endpoint->thread_ = std::thread([loop = endpoint->loop_.get()] { loop->Run(); });
  } catch (const std::system_error& e) {
    return absl::InternalError(
        absl::StrCat("metrics endpoint: cannot start its thread: ", e.what()));
  }
  return endpoint;
}

MetricsHttpEndpoint::~MetricsHttpEndpoint() { Stop(); }

void MetricsHttpEndpoint::Stop() {
  std::lock_guard<std::mutex> lock(stop_mu_);
  if (thread_.joinable()) {
    loop_->RequestStop();
    thread_.join();
  }
  loop_.reset();  // closes the listening socket (if the loop has not already) and the eventfd
}

}  // namespace relserve
