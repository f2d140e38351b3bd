#include "server/metrics/http_endpoint.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

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

std::string ErrnoText(int err) { return std::error_code(err, std::generic_category()).message(); }

void CloseFd(int& fd) {
  if (fd >= 0) {
    ::close(fd);
    fd = -1;
  }
}

bool IsTchar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  switch (c) {
    case '!': case '#': case '$': case '%': case '&': case '\'': case '*': case '+': case '-':
    case '.': case '^': case '_': case '`': case '|': case '~':
      return true;
    default:
      return false;
  }
}

bool IsToken(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), IsTchar);
}

const char* ReasonPhrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
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

std::string ErrorResponse(int status, const char* extra_headers = "") {
  return BuildResponse(status, kPlainContentType, absl::StrCat(ReasonPhrase(status), "\n"),
                       /*include_body=*/true, extra_headers);
}

struct Request {
  std::string method;
  std::string path;  // without the query string
};

enum class ParseResult { kNeedMore, kDone, kError };

// Parses "METHOD SP request-target SP HTTP/x.y". Sets *error_status on failure.
bool ParseRequestLine(const std::string& line, Request* req, int* error_status) {
  *error_status = 400;
  const size_t sp1 = line.find(' ');
  if (sp1 == std::string::npos) return false;
  const size_t sp2 = line.find(' ', sp1 + 1);
  if (sp2 == std::string::npos || line.find(' ', sp2 + 1) != std::string::npos) return false;
  std::string method = line.substr(0, sp1);
  std::string target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string version = line.substr(sp2 + 1);
  if (!IsToken(method) || target.empty()) return false;
  for (char c : target) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) return false;
  }
  if (version.size() != 8 || version.compare(0, 5, "HTTP/") != 0 || version[6] != '.' ||
      version[5] < '0' || version[5] > '9' || version[7] < '0' || version[7] > '9') {
    return false;
  }
  if (version[5] != '1') {
    *error_status = 505;
    return false;
  }
  // absolute-form ("http://host/metrics"): keep the path.
  if (target[0] != '/') {
    const size_t scheme = target.find("://");
    if (scheme == std::string::npos) {
      if (target != "*") return false;
    } else {
      const size_t slash = target.find('/', scheme + 3);
      target = slash == std::string::npos ? "/" : target.substr(slash);
    }
  }
  const size_t query = target.find_first_of("?#");
  if (query != std::string::npos) target.resize(query);
  req->method = std::move(method);
  req->path = std::move(target);
  return true;
}

// Looks for a complete request head in `in`. Rejects a bad request line as soon as it is
// complete, so garbage is answered without waiting for the rest.
ParseResult ParseRequestHead(const std::string& in, size_t max_bytes, Request* req,
                             int* error_status) {
  size_t pos = 0;
  // RFC 9112 2.2: ignore empty lines before the request line.
  while (pos < in.size() && (in[pos] == '\r' || in[pos] == '\n')) ++pos;
  bool have_request_line = false;
  while (true) {
    const size_t nl = in.find('\n', pos);
    if (nl == std::string::npos) break;
    size_t end = nl;
    if (end > pos && in[end - 1] == '\r') --end;
    const std::string line = in.substr(pos, end - pos);
    pos = nl + 1;
    if (!have_request_line) {
      if (line.size() > max_bytes) {
        *error_status = 414;
        return ParseResult::kError;
      }
      if (!ParseRequestLine(line, req, error_status)) return ParseResult::kError;
      have_request_line = true;
      continue;
    }
    if (line.empty()) {
      if (pos <= max_bytes) return ParseResult::kDone;
      *error_status = 431;
      return ParseResult::kError;
    }
    // header-field = field-name ":" OWS field-value; obsolete line folding is rejected.
    const size_t colon = line.find(':');
    if (colon == std::string::npos || !IsToken(line.substr(0, colon))) {
      *error_status = 400;
      return ParseResult::kError;
    }
  }
  if (!have_request_line) {
    // The method so far must be a token: a TLS handshake or binary junk is refused at once
    // instead of after the read timeout.
    for (size_t i = pos; i < in.size() && in[i] != ' '; ++i) {
      if (!IsTchar(in[i])) {
        *error_status = 400;
        return ParseResult::kError;
      }
    }
  }
  if (in.size() > max_bytes) {
    *error_status = have_request_line ? 431 : 414;
    return ParseResult::kError;
  }
  return ParseResult::kNeedMore;
}

}  // namespace

class MetricsHttpEndpoint::Loop {
 public:
  Loop(const HttpEndpointConfig& config, int listen_fd, int wake_fd,
       std::function<std::string()> render_metrics, std::function<bool()> ready)
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
  enum class State { kReading, kWriting, kDraining };
  struct Connection {
    int fd = -1;
    State state = State::kReading;
    std::string in;
    std::string out;
    size_t out_pos = 0;
    size_t drained = 0;
    Clock::time_point deadline;
  };

  void AcceptAll(Clock::time_point now);
  // Each returns false when the connection is finished and must be closed.
  bool OnReadable(Connection& c, Clock::time_point now);
  bool OnWritable(Connection& c, Clock::time_point now);
  bool Drain(Connection& c);
  void Respond(Connection& c, std::string response, Clock::time_point now);
  std::string Handle(const Request& req);

  const HttpEndpointConfig config_;
  int listen_fd_;
  int wake_fd_;
  const std::function<std::string()> render_metrics_;
  const std::function<bool()> ready_;
  std::atomic<bool> stop_{false};
  std::vector<Connection> connections_;
  Clock::time_point accept_resume_{};
};

void MetricsHttpEndpoint::Loop::Run() {
  std::vector<pollfd> fds;
  while (!stop_.load()) {
    Clock::time_point now = Clock::now();
    fds.clear();
    fds.push_back({wake_fd_, POLLIN, 0});
    const bool accepting = static_cast<int>(connections_.size()) < config_.max_connections &&
                           now >= accept_resume_;
    fds.push_back({accepting ? listen_fd_ : -1, POLLIN, 0});
    Clock::time_point wake_at = Clock::time_point::max();
    if (static_cast<int>(connections_.size()) < config_.max_connections && !accepting) {
      wake_at = accept_resume_;
    }
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
      if (alive && now >= c.deadline) alive = false;  // slow client (or drain time over)
      if (!alive) {
        CloseFd(c.fd);
        continue;
      }
      if (keep != i) connections_[keep] = std::move(c);
      ++keep;
    }
    connections_.resize(keep);

    if (n > 0 && (fds[1].revents & POLLIN)) AcceptAll(now);
  }
  for (Connection& c : connections_) CloseFd(c.fd);
  connections_.clear();
  CloseFd(listen_fd_);
}

void MetricsHttpEndpoint::Loop::AcceptAll(Clock::time_point now) {
  while (static_cast<int>(connections_.size()) < config_.max_connections) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        accept_resume_ = now + kAcceptBackoff;
      }
      return;  // EAGAIN, or an aborted connection: nothing more to accept now
    }
    Connection c;
    c.fd = fd;
    c.deadline = now + std::chrono::milliseconds(config_.read_timeout_ms);
    connections_.push_back(std::move(c));
    // Most requests are already there; serve them without another poll round.
    Connection& added = connections_.back();
    if (!OnReadable(added, now)) {
      CloseFd(added.fd);
      connections_.pop_back();
    }
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
  Request req;
  int error_status = 400;
  switch (ParseRequestHead(c.in, config_.max_request_bytes, &req, &error_status)) {
    case ParseResult::kNeedMore:
      // The client stopped sending (half-close) before the request was complete.
      if (!eof) return true;
      Respond(c, ErrorResponse(400), now);
      return OnWritable(c, now);
    case ParseResult::kError:
      Respond(c, ErrorResponse(error_status), now);
      return OnWritable(c, now);
    case ParseResult::kDone:
      Respond(c, Handle(req), now);
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

std::string MetricsHttpEndpoint::Loop::Handle(const Request& req) {
  const bool head = req.method == "HEAD";
  const bool known_path = req.path == "/metrics" || req.path == "/healthz";
  if (!known_path) return ErrorResponse(404);
  if (req.method != "GET" && !head) return ErrorResponse(405, "Allow: GET, HEAD\r\n");
  if (req.path == "/healthz") {
    bool ok = true;
    try {
      ok = !ready_ || ready_();
    } catch (...) {
      ok = false;
    }
    return BuildResponse(ok ? 200 : 503, kPlainContentType, ok ? "ok\n" : "not ready\n", !head);
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
    std::function<bool()> ready) {
  if (!render_metrics) return absl::InvalidArgumentError("metrics endpoint: no render callback");
  if (config.port < 0 || config.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics endpoint: port ", config.port, " out of range"));
  }
  if (config.read_timeout_ms <= 0 || config.write_timeout_ms <= 0 ||
      config.max_connections <= 0 || config.max_request_bytes == 0) {
    return absl::InvalidArgumentError("metrics endpoint: timeouts and limits must be positive");
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
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd, 128) != 0) {
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
  endpoint->loop_ = std::make_unique<Loop>(config, listen_fd, wake_fd, std::move(render_metrics),
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
