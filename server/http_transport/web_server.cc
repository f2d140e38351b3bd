#include "server/http_transport/web_server.h"

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
#include <condition_variable>
#include <deque>
#include <exception>
#include <system_error>
#include <unordered_map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/http_transport/request_body.h"

namespace relserve {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kDrainTime = std::chrono::milliseconds(500);
// At Stop(), how long requests that already reached the server (in the listen queue, or sent
// on a connection) have to arrive and be answered 503 rather than reset.
constexpr auto kStopGrace = std::chrono::milliseconds(300);
constexpr size_t kMaxDrainBytes = 1 << 20;
constexpr auto kAcceptBackoff = std::chrono::milliseconds(100);
constexpr rlim_t kMinConnections = 8;
constexpr int kMaxAcceptsPerRound = 64;
// Bytes of pipelined requests read ahead while a handler runs; past it the socket is watched
// only for the client's close.
constexpr size_t kMaxReadAhead = 64 << 10;
constexpr size_t kReadChunk = 64 << 10;

std::string ErrnoText(int err) { return std::error_code(err, std::generic_category()).message(); }

void CloseFd(int& fd) {
  if (fd >= 0) {
    ::close(fd);
    fd = -1;
  }
}

std::string PeerKey(const sockaddr_storage& addr, int* port) {
  char text[INET6_ADDRSTRLEN] = "";
  *port = 0;
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &a->sin_addr, text, sizeof(text));
    *port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    if (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr)) {
      ::inet_ntop(AF_INET, &a->sin6_addr.s6_addr[12], text, sizeof(text));
    } else {
      ::inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof(text));
    }
    *port = ntohs(a->sin6_port);
  }
  return text;
}

std::optional<std::string_view> FindHeader(const HttpRequestHead& head, std::string_view name) {
  for (const auto& [n, v] : head.headers) {
    if (absl::EqualsIgnoreCase(n, absl::string_view(name.data(), name.size()))) return std::string_view(v);
  }
  return std::nullopt;
}

// Whether the Connection fields hold `token` (case-insensitive).
bool ConnectionHas(const HttpRequestHead& head, absl::string_view token) {
  for (const auto& [n, v] : head.headers) {
    if (!absl::EqualsIgnoreCase(n, "connection")) continue;
    for (absl::string_view t : absl::StrSplit(v, ',')) {
      if (absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(t), token)) return true;
    }
  }
  return false;
}

bool ClientKeepsAlive(const HttpRequestHead& head) {
  if (head.minor_version == 0) return ConnectionHas(head, "keep-alive");
  return !ConnectionHas(head, "close");
}

bool ExpectsContinue(const HttpRequestHead& head) {
  const auto v = FindHeader(head, "expect");
  return v.has_value() && head.minor_version >= 1 && absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(absl::string_view(v->data(), v->size())), "100-continue");
}

// A header value safe to write: no CR, LF or NUL (a handler's value never splits the response).
std::string SafeHeaderValue(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (const char c : v) out += (c == '\r' || c == '\n' || c == '\0') ? ' ' : c;
  return out;
}

std::string Serialize(const WebResponse& r, bool include_body, bool close) {
  std::string out = absl::StrCat("HTTP/1.1 ", r.status, " ", HttpReasonPhrase(r.status), "\r\n");
  if (!r.content_type.empty()) absl::StrAppend(&out, "Content-Type: ", SafeHeaderValue(r.content_type), "\r\n");
  absl::StrAppend(&out, "Content-Length: ", r.body.size(), "\r\n");
  for (const auto& [name, value] : r.headers) {
    absl::StrAppend(&out, SafeHeaderValue(name), ": ", SafeHeaderValue(value), "\r\n");
  }
  absl::StrAppend(&out, "Connection: ", close ? "close" : "keep-alive", "\r\n\r\n");
  if (include_body) out += r.body;
  return out;
}

WebResponse PlainError(int status, const std::string& message) {
  WebResponse r;
  r.status = status;
  r.content_type = "text/plain; charset=utf-8";
  r.body = HttpReasonPhrase(status);
  if (!message.empty()) absl::StrAppend(&r.body, ": ", message);
  r.body += "\n";
  return r;
}

// A fixed pool of handler threads fed from one queue.
class HandlerPool {
 public:
  explicit HandlerPool(int threads) {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Work(); });
  }
  ~HandlerPool() { Stop(); }
  void Submit(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopped_) return;
      tasks_.push_back(std::move(task));
    }
    cv_.notify_one();
  }
  // Drops queued tasks, waits for running ones.
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopped_ = true;
      tasks_.clear();
    }
    cv_.notify_all();
    for (std::thread& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

 private:
  void Work() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stopped_ || !tasks_.empty(); });
        if (stopped_) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stopped_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace

// What reaches the loop from other threads: answers (and deadlines) of requests, each for one
// request of one connection, and the handler threads. Shared with every WebResponder, so that
// a late answer finds it alive after the server stopped (and is dropped); it owns the eventfd
// that wakes the loop, closed with the last holder.
class WebOutbox {
 public:
  struct Item {
    uint64_t connection;
    int request;
    std::optional<WebResponse> response;  // an answer, or else a deadline:
    Clock::time_point by;
    std::function<std::optional<WebResponse>()> late;
  };
  WebOutbox(int wake_fd, int threads)
      : wake_fd_(wake_fd), pool_(threads > 0 ? std::make_unique<HandlerPool>(threads) : nullptr) {}
  ~WebOutbox() {
    StopHandlers();
    CloseFd(wake_fd_);
  }
  int wake_fd() const { return wake_fd_; }
  void Wake() {
    const uint64_t one = 1;
    ssize_t n = ::write(wake_fd_, &one, sizeof(one));
    (void)n;  // the eventfd can only be full if a wake-up is already pending
  }
  void Post(Item item) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_) return;
      items_.push_back(std::move(item));
    }
    Wake();
  }
  std::vector<Item> Take() {
    std::vector<Item> items;
    std::lock_guard<std::mutex> lock(mu_);
    items.swap(items_);
    return items;
  }
  bool has_threads() const { return pool_ != nullptr; }
  void Run(std::function<void()> work) {
    if (pool_) {
      pool_->Submit(std::move(work));
    } else {
      bool closed;
      {
        std::lock_guard<std::mutex> lock(mu_);
        closed = closed_;
      }
      if (!closed) work();
    }
  }
  // Later answers are dropped, queued work too; running work is waited for.
  void StopHandlers() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
      items_.clear();
    }
    if (pool_) pool_->Stop();
  }

 private:
  int wake_fd_;
  const std::unique_ptr<HandlerPool> pool_;
  std::mutex mu_;
  bool closed_ = false;
  std::vector<Item> items_;
};

void WebResponder::Respond(WebResponse response) const {
  if (outbox_) outbox_->Post({connection_, request_, std::move(response), {}, nullptr});
}

void WebResponder::RespondBy(Clock::time_point when, std::function<std::optional<WebResponse>()> late) const {
  if (outbox_) outbox_->Post({connection_, request_, std::nullopt, when, std::move(late)});
}

void WebResponder::RunOnHandlerThread(std::function<void()> work) const {
  if (outbox_) outbox_->Run(std::move(work));
}

const char* HttpReasonPhrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 422: return "Unprocessable Content";
    case 424: return "Failed Dependency";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 499: return "Client Closed Request";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    case 507: return "Insufficient Storage";
    default: return "Unknown";
  }
}

std::optional<std::string_view> WebRequest::Header(std::string_view name) const { return FindHeader(head, name); }

class WebServer::Loop {
 public:
  Loop(const WebServerConfig& config, WebHandlers handlers, int listen_fd, int wake_fd)
      : config_(config),
        handlers_(std::move(handlers)),
        listen_fd_(listen_fd),
        outbox_(std::make_shared<WebOutbox>(wake_fd, config_.handler_threads)) {}
  ~Loop() {
    StopHandlers();
    for (auto& [serial, c] : connections_) CloseFd(c.fd);
    CloseFd(listen_fd_);
  }

  void Wake() { outbox_->Wake(); }
  void RequestStop() {
    stop_.store(true);
    Wake();
  }
  void RequestDrain() {
    drain_requested_.store(true);
    Wake();
  }
  void StopHandlers() { outbox_->StopHandlers(); }
  WebServerStats Stats() const {
    std::lock_guard<std::mutex> lock(stats_mu_);
    return stats_;
  }

  void Run();

 private:
  enum class State {
    kHead,      // reading a request head (idle when `in` is empty and no byte of it came yet)
    kBody,      // reading its body
    kHandling,  // a handler has the request; watching the socket for the client's close
    kWriting,   // writing the response (or a 100 Continue, then back to kBody)
    kDraining,  // answered, write side shut down; waiting for the client's close
  };
  struct Connection {
    int fd = -1;
    std::string peer;
    int peer_port = 0;
    uint64_t serial = 0;
    State state = State::kHead;
    bool head_started = false;  // a byte of the current request head has arrived
    std::string in;             // received, not yet consumed
    HttpRequestHead head;
    BodyFraming framing;
    std::unique_ptr<ChunkedBodyDecoder> chunked;
    std::string body;
    size_t charged = 0;  // body bytes counted in buffered_body_bytes_
    int requests = 0;
    bool peer_closed = false;
    std::shared_ptr<std::atomic<bool>> gone;
    std::function<std::optional<WebResponse>()> late;  // kHandling: what to answer at `deadline`
    std::string out;
    size_t out_pos = 0;
    bool interim = false;       // `out` is a 100 Continue; the body follows
    bool close_after = false;   // after `out`, shut down and drain
    size_t drained = 0;
    Clock::time_point deadline = Clock::time_point::max();
  };
  static constexpr uint64_t kNone = ~uint64_t{0};

  short Events(const Connection& c) const;
  void AcceptSome(Clock::time_point now);
  void Close(uint64_t serial);
  uint64_t PickVictim(const std::string* peer, bool any_state) const;
  bool MakeRoom(const std::string* peer, Clock::time_point now);
  // Each returns false when the connection is finished and must be closed.
  bool OnReadable(Connection& c, Clock::time_point now);
  bool Advance(Connection& c, Clock::time_point now);
  bool OnWritable(Connection& c, Clock::time_point now);
  bool Drain(Connection& c);
  bool OnDeadline(Connection& c, Clock::time_point now);
  bool Dispatch(Connection& c, Clock::time_point now);
  bool Respond(Connection& c, WebResponse response, bool force_close, Clock::time_point now);
  bool RespondError(Connection& c, int status, const std::string& message, const HttpRequestHead* head,
                    Clock::time_point now);
  // 503 with Retry-After: the bodies being received are over max_buffered_body_bytes.
  bool RespondOverBudget(Connection& c, Clock::time_point now);
  void Charge(Connection& c, size_t bytes);
  void Uncharge(Connection& c);
  void TakeCompletions(Clock::time_point now);
  void DrainConnections();
  void FinishOnStop();
  void Count(uint64_t WebServerStats::*field) {
    std::lock_guard<std::mutex> lock(stats_mu_);
    ++(stats_.*field);
  }

  const WebServerConfig config_;
  const WebHandlers handlers_;
  int listen_fd_;
  const std::shared_ptr<WebOutbox> outbox_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> drain_requested_{false};
  bool draining_ = false;
  bool stopping_ = false;  // FinishOnStop: every request head is answered 503
  std::unordered_map<uint64_t, Connection> connections_;
  std::unordered_map<std::string, int> per_peer_;
  uint64_t next_serial_ = 0;
  Clock::time_point accept_resume_{};
  size_t buffered_body_bytes_ = 0;
  std::vector<char> read_buffer_ = std::vector<char>(kReadChunk);  // each recv's bytes, then appended
  mutable std::mutex stats_mu_;
  WebServerStats stats_;
};

short WebServer::Loop::Events(const Connection& c) const {
  switch (c.state) {
    case State::kHead:
    case State::kDraining:
      return POLLIN;
    case State::kBody:
      return static_cast<short>(POLLIN | (c.out_pos < c.out.size() ? POLLOUT : 0));
    case State::kHandling:
      // Read ahead pipelined requests up to a bound; past it, watch only for the close. Once
      // the client has closed, nothing (Run leaves the socket out of the poll).
      if (c.peer_closed) return 0;
      return static_cast<short>(POLLRDHUP | (c.in.size() < kMaxReadAhead ? POLLIN : 0));
    case State::kWriting:
      return POLLOUT;
  }
  return POLLIN;
}

void WebServer::Loop::Run() {
  std::vector<pollfd> fds;
  std::vector<uint64_t> serials;
  while (!stop_.load()) {
    Clock::time_point now = Clock::now();
    if (drain_requested_.load() && !draining_) {
      draining_ = true;
      DrainConnections();
    }
    fds.clear();
    serials.clear();
    fds.push_back({outbox_->wake_fd(), POLLIN, 0});
    const bool accepting = now >= accept_resume_;
    fds.push_back({accepting ? listen_fd_ : -1, POLLIN, 0});
    Clock::time_point wake_at = accepting ? Clock::time_point::max() : accept_resume_;
    for (const auto& [serial, c] : connections_) {
      const short events = Events(c);
      fds.push_back({events != 0 ? c.fd : -1, events, 0});
      serials.push_back(serial);
      wake_at = std::min(wake_at, c.deadline);
    }
    int timeout_ms = -1;
    if (wake_at != Clock::time_point::max()) {
      const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(wake_at - now);
      timeout_ms = static_cast<int>(std::clamp<int64_t>(wait.count() + 1, 0, 60000));
    }
    const int n = ::poll(fds.data(), fds.size(), timeout_ms);
    if (n < 0 && errno != EINTR) break;
    if (stop_.load()) break;
    now = Clock::now();
    if (n > 0 && (fds[0].revents & POLLIN)) {
      uint64_t value = 0;
      ssize_t r = ::read(outbox_->wake_fd(), &value, sizeof(value));
      (void)r;
    }
    TakeCompletions(now);

    for (size_t i = 0; i < serials.size(); ++i) {
      auto it = connections_.find(serials[i]);
      if (it == connections_.end()) continue;  // closed meanwhile
      Connection& c = it->second;
      const short revents = n > 0 ? fds[i + 2].revents : 0;
      bool alive = true;
      if (revents != 0) {
        if (c.state == State::kWriting || (c.state == State::kBody && (revents & POLLOUT))) {
          alive = OnWritable(c, now);
        }
        if (alive && (revents & (POLLIN | POLLRDHUP | POLLHUP | POLLERR))) {
          switch (c.state) {
            case State::kHead:
            case State::kBody:
            case State::kHandling:
              alive = OnReadable(c, now);
              break;
            case State::kDraining:
              alive = Drain(c);
              break;
            case State::kWriting:
              if (revents & (POLLHUP | POLLERR)) alive = false;
              break;
          }
        }
      }
      if (alive && now >= c.deadline) alive = OnDeadline(c, now);
      if (!alive) Close(serials[i]);
    }
    if (n > 0 && (fds[1].revents & POLLIN)) AcceptSome(now);
  }
  FinishOnStop();
  std::vector<uint64_t> all;
  for (const auto& [serial, c] : connections_) all.push_back(serial);
  for (uint64_t serial : all) Close(serial);
  CloseFd(listen_fd_);
}

void WebServer::Loop::FinishOnStop() {
  stopping_ = true;
  draining_ = true;
  Clock::time_point now = Clock::now();
  const Clock::time_point until = now + kStopGrace;
  // Connections the kernel accepted for us are taken, then no more: later ones are refused by
  // the kernel, which a client sees at once, rather than reset after a wait.
  for (size_t before = ~size_t{0}; before != connections_.size() && listen_fd_ >= 0;) {
    before = connections_.size();
    AcceptSome(now);
  }
  CloseFd(listen_fd_);
  std::vector<uint64_t> serials;
  for (const auto& [serial, c] : connections_) serials.push_back(serial);
  for (uint64_t serial : serials) {
    Connection& c = connections_.at(serial);
    bool alive = true;
    if (c.state == State::kHead && c.in.empty() && c.requests > 0) {
      alive = false;  // kept alive and idle: nothing to answer, nothing unread
    } else if (c.state == State::kHead && !c.in.empty()) {
      alive = Advance(c, now);  // a head already here is answered 503 (stopping_)
    } else if (c.state == State::kBody) {
      alive = RespondError(c, 503, "the server is shutting down", &c.head, now);
    }
    if (!alive) Close(serial);
  }
  // The rest: new connections whose heads are on the way, answers being written, closes being
  // drained; each for at most kStopGrace.
  std::vector<pollfd> fds;
  while ((now = Clock::now()) < until) {
    fds.clear();
    serials.clear();
    for (const auto& [serial, c] : connections_) {
      if (c.state == State::kHandling) continue;
      fds.push_back({c.fd, Events(c), 0});
      serials.push_back(serial);
    }
    if (fds.empty()) break;
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count() + 1;
    const int n = ::poll(fds.data(), fds.size(), static_cast<int>(wait));
    if (n < 0 && errno != EINTR) break;
    now = Clock::now();
    for (size_t i = 0; n > 0 && i < serials.size(); ++i) {
      auto it = connections_.find(serials[i]);
      if (it == connections_.end() || fds[i].revents == 0) continue;
      Connection& c = it->second;
      bool alive = true;
      if (c.state == State::kWriting || (c.state == State::kBody && (fds[i].revents & POLLOUT))) {
        alive = OnWritable(c, now);
      }
      if (alive && (fds[i].revents & (POLLIN | POLLRDHUP | POLLHUP | POLLERR))) {
        if (c.state == State::kHead || c.state == State::kBody) alive = OnReadable(c, now);
        else if (c.state == State::kDraining) alive = Drain(c);
        else if (c.state == State::kWriting && (fds[i].revents & (POLLHUP | POLLERR))) alive = false;
      }
      if (!alive) Close(serials[i]);
    }
  }
}

void WebServer::Loop::TakeCompletions(Clock::time_point now) {
  for (WebOutbox::Item& d : outbox_->Take()) {
    auto it = connections_.find(d.connection);
    // The client left, or the request was answered already (by its deadline).
    if (it == connections_.end() || it->second.state != State::kHandling || it->second.requests != d.request) continue;
    Connection& c = it->second;
    if (!d.response.has_value()) {
      c.deadline = d.by;
      c.late = std::move(d.late);
      continue;
    }
    Uncharge(c);
    if (!Respond(c, std::move(*d.response), false, now)) Close(d.connection);
  }
}

void WebServer::Loop::DrainConnections() {
  std::vector<uint64_t> idle;
  for (const auto& [serial, c] : connections_) {
    if (c.state == State::kHead || c.state == State::kBody) idle.push_back(serial);
  }
  for (uint64_t serial : idle) Close(serial);
}

void WebServer::Loop::Charge(Connection& c, size_t bytes) {
  if (bytes <= c.charged) return;
  buffered_body_bytes_ += bytes - c.charged;
  c.charged = bytes;
}

void WebServer::Loop::Uncharge(Connection& c) {
  buffered_body_bytes_ -= c.charged;
  c.charged = 0;
}

void WebServer::Loop::Close(uint64_t serial) {
  auto it = connections_.find(serial);
  if (it == connections_.end()) return;
  Connection& c = it->second;
  if (c.gone) c.gone->store(true);
  Uncharge(c);
  CloseFd(c.fd);
  auto peer = per_peer_.find(c.peer);
  if (peer != per_peer_.end() && --peer->second <= 0) per_peer_.erase(peer);
  connections_.erase(it);
  std::lock_guard<std::mutex> lock(stats_mu_);
  stats_.open_connections = static_cast<int>(connections_.size());
}

uint64_t WebServer::Loop::PickVictim(const std::string* peer, bool any_state) const {
  for (const State wanted : {State::kDraining, State::kHead, State::kBody, State::kWriting}) {
    if (!any_state && wanted != State::kHead) continue;
    uint64_t victim = kNone;
    for (const auto& [serial, c] : connections_) {
      if (c.state != wanted || (peer != nullptr && c.peer != *peer)) continue;
      if (wanted == State::kWriting && c.interim) continue;
      if (victim == kNone || serial < victim) victim = serial;
    }
    if (victim != kNone) return victim;
  }
  return kNone;
}

bool WebServer::Loop::MakeRoom(const std::string* peer, Clock::time_point now) {
  std::vector<uint64_t> spared;
  for (;;) {
    const uint64_t victim = PickVictim(peer, true);
    if (victim == kNone) return false;
    Connection& c = connections_.at(victim);
    // Its request may have arrived since the last poll (a probe's comes right after its
    // connect): read it first, and spare the connection if a request is now under way.
    if (c.state == State::kHead) {
      const bool alive = OnReadable(c, now);
      if (!alive) {
        Close(victim);
        Count(&WebServerStats::connections_evicted);
        return true;
      }
      if (c.state != State::kHead) continue;  // answered or handling: pick another
    }
    Close(victim);
    Count(&WebServerStats::connections_evicted);
    return true;
  }
}

void WebServer::Loop::AcceptSome(Clock::time_point now) {
  bool freed_descriptor = false;
  for (int accepted = 0; accepted < kMaxAcceptsPerRound;) {
    sockaddr_storage addr{};
    socklen_t addr_len = sizeof(addr);
    const int fd =
        ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &addr_len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR) continue;
      if (errno == EMFILE || errno == ENFILE) {
        const uint64_t victim = freed_descriptor ? kNone : PickVictim(nullptr, false);
        if (victim != kNone) {
          Close(victim);
          Count(&WebServerStats::connections_evicted);
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
    Count(&WebServerStats::connections_accepted);
    int peer_port = 0;
    std::string peer = PeerKey(addr, &peer_port);
    bool room = true;
    const auto count = per_peer_.find(peer);
    if (count != per_peer_.end() && count->second >= config_.max_connections_per_peer) room = MakeRoom(&peer, now);
    if (room && static_cast<int>(connections_.size()) >= config_.max_connections) room = MakeRoom(nullptr, now);
    if (!room) {
      // Every connection it could replace has a request being handled.
      const std::string busy = Serialize(
          handlers_.error ? handlers_.error(503, "the server has no free connection slot", nullptr)
                          : PlainError(503, "the server has no free connection slot"),
          true, true);
      ssize_t w = ::send(fd, busy.data(), busy.size(), MSG_NOSIGNAL);
      (void)w;
      ::close(fd);
      Count(&WebServerStats::connections_refused);
      continue;
    }
    const uint64_t serial = next_serial_++;
    Connection& c = connections_[serial];
    c.fd = fd;
    c.peer = std::move(peer);
    c.peer_port = peer_port;
    c.serial = serial;
    c.deadline = now + config_.head_timeout;
    c.head_started = true;  // a new connection's head deadline runs from the connect
    ++per_peer_[c.peer];
    {
      std::lock_guard<std::mutex> lock(stats_mu_);
      stats_.open_connections = static_cast<int>(connections_.size());
    }
    // Most requests are already there; serve them without another poll round.
    if (!OnReadable(c, now)) Close(serial);
  }
}

bool WebServer::Loop::OnReadable(Connection& c, Clock::time_point now) {
  size_t cap;
  switch (c.state) {
    case State::kHead:
      cap = config_.max_head_bytes + kReadChunk;
      break;
    case State::kBody:
      cap = c.framing.kind == BodyFraming::Kind::kLength ? static_cast<size_t>(c.framing.length) + kReadChunk
                                                          : kReadChunk * 2;
      break;
    default:
      cap = kMaxReadAhead;
      break;
  }
  if (c.state == State::kHandling && c.in.size() >= cap) {
    // Woken with the read-ahead full: the client closed or reset its connection.
    c.peer_closed = true;
    if (c.gone) c.gone->store(true);
    return true;
  }
  bool error = false;
  while (!c.peer_closed && c.in.size() < cap) {
    const size_t want = std::min(read_buffer_.size(), cap - c.in.size());
    const ssize_t r = ::recv(c.fd, read_buffer_.data(), want, 0);
    if (r > 0) {
      c.in.append(read_buffer_.data(), static_cast<size_t>(r));
      continue;
    }
    if (r == 0) {
      c.peer_closed = true;
      break;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    error = true;  // reset
    break;
  }
  if (c.state == State::kHandling) {
    // The client closed (or reset) while its request runs: the handler may stop; the answer is
    // still written where the socket takes it. A client that closed its side after pipelining
    // more requests still waits for their answers: it has not gone.
    if ((error || (c.peer_closed && c.in.empty())) && c.gone) c.gone->store(true);
    return !error;
  }
  if (error) return false;
  if (c.state == State::kBody && c.framing.kind == BodyFraming::Kind::kLength) {
    Charge(c, std::min<size_t>(c.in.size(), static_cast<size_t>(c.framing.length)));
  }
  return Advance(c, now);
}

bool WebServer::Loop::Advance(Connection& c, Clock::time_point now) {
  for (;;) {
    if (c.state == State::kHead) {
      if (c.in.empty()) return !c.peer_closed;  // a client closing an idle connection
      if (!c.head_started) {
        c.head_started = true;
        c.deadline = now + config_.head_timeout;
      }
      const HttpRequestParse parse = ParseHttpRequestHead(c.in, config_.max_head_bytes);
      if (parse.outcome == HttpRequestParse::Outcome::kIncomplete) {
        if (!c.peer_closed) return true;
        return RespondError(c, 400, "the client closed before the request head was complete", nullptr, now);
      }
      if (parse.outcome == HttpRequestParse::Outcome::kError) {
        return RespondError(c, parse.status, parse.error, nullptr, now);
      }
      Count(&WebServerStats::requests);
      c.head = parse.head;
      c.in.erase(0, parse.head.size);
      ++c.requests;
      c.body.clear();
      c.framing = DecideBodyFraming(c.head, config_.max_body_bytes);
      if (stopping_) return RespondError(c, 503, "the server is shutting down", &c.head, now);
      if (c.framing.kind == BodyFraming::Kind::kError) {
        return RespondError(c, c.framing.status, c.framing.error, &c.head, now);
      }
      if (handlers_.screen) {
        WebRequest probe;
        probe.head = c.head;
        probe.peer = c.peer;
        probe.peer_port = c.peer_port;
        std::optional<WebResponse> early;
        try {
          early = handlers_.screen(probe);
        } catch (const std::exception& e) {
          return RespondError(c, 500, absl::StrCat("the request could not be screened: ", e.what()), &c.head, now);
        }
        if (early.has_value()) {
          const bool has_body = c.framing.kind != BodyFraming::Kind::kNone && !(c.framing.kind == BodyFraming::Kind::kLength && c.framing.length == 0);
          return Respond(c, std::move(*early), has_body, now);
        }
      }
      if (c.framing.kind == BodyFraming::Kind::kNone) return Dispatch(c, now);
      c.state = State::kBody;
      c.deadline = now + config_.body_timeout;
      if (c.framing.kind == BodyFraming::Kind::kChunked) {
        c.chunked = std::make_unique<ChunkedBodyDecoder>(config_.max_body_bytes);
      }
      if (ExpectsContinue(c.head) && c.in.empty() &&
          !(c.framing.kind == BodyFraming::Kind::kLength && c.framing.length == 0)) {
        c.out = "HTTP/1.1 100 Continue\r\n\r\n";
        c.out_pos = 0;
        c.interim = true;
        if (!OnWritable(c, now)) return false;
      }
      continue;
    }
    if (c.state == State::kBody) {
      const size_t budget = config_.max_buffered_body_bytes;
      if (c.framing.kind == BodyFraming::Kind::kLength) {
        const size_t need = static_cast<size_t>(c.framing.length);
        if (need > c.charged) Charge(c, std::min(need, c.in.size()));
        if (buffered_body_bytes_ > budget) return RespondOverBudget(c, now);
        if (c.in.size() < need) {
          if (!c.peer_closed) return true;
          return RespondError(c, 400, absl::StrCat("the client closed after ", c.in.size(), " of the ", need,
                                                   " body bytes its Content-Length announced"),
                              &c.head, now);
        }
        c.body = c.in.substr(0, need);
        c.in.erase(0, need);
        return Dispatch(c, now);
      }
      // Chunked.
      size_t used = 0;
      const ChunkedBodyDecoder::Outcome o = c.chunked->Feed(c.in, &used, &c.body);
      c.in.erase(0, used);
      Charge(c, c.body.size());
      if (o == ChunkedBodyDecoder::Outcome::kError) {
        return RespondError(c, c.chunked->status(), c.chunked->error(), &c.head, now);
      }
      if (buffered_body_bytes_ > budget) return RespondOverBudget(c, now);
      if (o == ChunkedBodyDecoder::Outcome::kComplete) return Dispatch(c, now);
      if (!c.peer_closed) return true;
      return RespondError(c, 400, "the client closed before the chunked body was complete", &c.head, now);
    }
    return true;  // kHandling, kWriting, kDraining: nothing to parse now
  }
}

bool WebServer::Loop::Dispatch(Connection& c, Clock::time_point now) {
  c.chunked.reset();
  c.state = State::kHandling;
  c.deadline = Clock::time_point::max();
  c.gone = std::make_shared<std::atomic<bool>>(c.peer_closed && c.in.empty());
  WebRequest request;
  request.head = c.head;
  request.body = std::move(c.body);
  c.body.clear();
  request.peer = c.peer;
  request.peer_port = c.peer_port;
  std::shared_ptr<const std::atomic<bool>> gone = c.gone;
  WebResponder respond;
  respond.outbox_ = outbox_;
  respond.connection_ = c.serial;
  respond.request_ = c.requests;
  const auto failed = [this](const WebRequest& r, const std::string& message) {
    return handlers_.error ? handlers_.error(500, message, &r.head) : PlainError(500, message);
  };
  if (handlers_.start) {
    // Started on a handler thread (or here); the answer comes back through the outbox.
    auto run = [this, failed, respond, request = std::move(request), gone]() {
      try {
        handlers_.start(request, gone, respond);
      } catch (const std::exception& e) {
        respond.Respond(failed(request, absl::StrCat("the handler failed: ", e.what())));
      } catch (...) {
        respond.Respond(failed(request, "the handler failed"));
      }
    };
    if (outbox_->has_threads()) outbox_->Run(std::move(run));
    else run();
    return true;
  }
  auto run = [this, failed](const WebRequest& r, const std::shared_ptr<const std::atomic<bool>>& g) {
    try {
      return handlers_.handle(r, g);
    } catch (const std::exception& e) {
      return failed(r, absl::StrCat("the handler failed: ", e.what()));
    } catch (...) {
      return failed(r, "the handler failed");
    }
  };
  if (outbox_->has_threads()) {
    outbox_->Run([run, respond, request = std::move(request), gone]() { respond.Respond(run(request, gone)); });
    return true;
  }
  WebResponse response = run(request, gone);
  Uncharge(c);
  return Respond(c, std::move(response), false, now);
}

bool WebServer::Loop::RespondOverBudget(Connection& c, Clock::time_point now) {
  const std::string message = "too many request bodies are being received at once; retry";
  WebResponse busy = handlers_.error ? handlers_.error(503, message, &c.head) : PlainError(503, message);
  busy.headers.emplace_back("Retry-After", "1");
  Uncharge(c);
  return Respond(c, std::move(busy), true, now);
}

bool WebServer::Loop::RespondError(Connection& c, int status, const std::string& message, const HttpRequestHead* head,
                                   Clock::time_point now) {
  WebResponse r = handlers_.error ? handlers_.error(status, message, head) : PlainError(status, message);
  if (r.status == 0) r.status = status;
  return Respond(c, std::move(r), true, now);
}

bool WebServer::Loop::Respond(Connection& c, WebResponse response, bool force_close, Clock::time_point now) {
  const bool has_head = c.requests > 0 && (c.state == State::kHandling || c.state == State::kBody || c.state == State::kHead);
  // A client that closed its side may still have pipelined requests waiting in c.in: they are
  // answered in turn, the last answer closing the connection.
  const bool keep = !force_close && !response.close && !draining_ && config_.keep_alive_timeout.count() > 0 &&
                    c.requests < config_.keep_alive_max_requests && (!c.peer_closed || !c.in.empty()) &&
                    has_head && ClientKeepsAlive(c.head);
  const bool include_body = !(has_head && c.head.method == "HEAD");
  c.out = Serialize(response, include_body, !keep);
  c.out_pos = 0;
  c.interim = false;
  c.close_after = !keep;
  c.state = State::kWriting;
  c.deadline = now + config_.write_timeout;
  Uncharge(c);
  c.gone.reset();
  c.late = nullptr;
  return OnWritable(c, now);
}

bool WebServer::Loop::OnWritable(Connection& c, Clock::time_point now) {
  while (c.out_pos < c.out.size()) {
    const ssize_t w = ::send(c.fd, c.out.data() + c.out_pos, c.out.size() - c.out_pos, MSG_NOSIGNAL);
    if (w > 0) {
      c.out_pos += static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    return false;  // the client went away
  }
  c.out.clear();
  c.out_pos = 0;
  if (c.interim) {  // the 100 Continue is out; the body is still being read
    c.interim = false;
    return true;
  }
  if (c.close_after) {
    c.in.clear();
    c.in.shrink_to_fit();
    ::shutdown(c.fd, SHUT_WR);
    c.state = State::kDraining;
    c.deadline = std::min(c.deadline, now + kDrainTime);
    return Drain(c);
  }
  // Kept alive: the next request, perhaps already read (pipelined).
  c.state = State::kHead;
  c.head = HttpRequestHead{};
  c.framing = BodyFraming{};
  c.head_started = false;
  c.deadline = now + config_.keep_alive_timeout;
  return Advance(c, now);
}

bool WebServer::Loop::Drain(Connection& c) {
  char buf[4096];
  for (;;) {
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

bool WebServer::Loop::OnDeadline(Connection& c, Clock::time_point now) {
  switch (c.state) {
    case State::kHead:
      Count(&WebServerStats::head_timeouts);
      if (c.in.empty()) return false;  // nothing of a request came: an idle connection just closes
      break;
    case State::kBody:
      Count(&WebServerStats::body_timeouts);
      break;
    case State::kWriting:
      Count(&WebServerStats::write_timeouts);
      return false;
    case State::kHandling: {
      if (!c.late) return false;
      // The handler's deadline: its answer for a request not answered in time.
      auto late = std::move(c.late);
      c.late = nullptr;
      c.deadline = Clock::time_point::max();
      std::optional<WebResponse> r;
      try {
        r = late();
      } catch (const std::exception& e) {
        r = handlers_.error ? handlers_.error(500, absl::StrCat("the handler failed: ", e.what()), &c.head)
                            : PlainError(500, e.what());
      }
      if (!r.has_value()) return true;  // an answer is on its way
      Uncharge(c);
      return Respond(c, std::move(*r), false, now);
    }
    case State::kDraining:
      return false;
  }
  // A head or body past its deadline: say so in one attempt, then close.
  const HttpRequestHead* head = c.state == State::kBody ? &c.head : nullptr;
  const std::string message = c.state == State::kBody
                                  ? absl::StrCat("the request body did not arrive within ",
                                                 config_.body_timeout.count(), " ms")
                                  : absl::StrCat("the request head did not arrive within ",
                                                 config_.head_timeout.count(), " ms");
  WebResponse r = handlers_.error ? handlers_.error(408, message, head) : PlainError(408, message);
  const std::string out = Serialize(r, true, true);
  ssize_t w = ::send(c.fd, out.data(), out.size(), MSG_NOSIGNAL);
  (void)w;
  return false;
}

absl::StatusOr<std::unique_ptr<WebServer>> WebServer::Start(const WebServerConfig& config, WebHandlers handlers) {
  if (!handlers.handle == !handlers.start) {
    return absl::InvalidArgumentError(
        absl::StrCat(config.name, handlers.handle ? ": both a handle and a start handler" : ": no request handler"));
  }
  if (config.port < 0 || config.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(config.name, ": port ", config.port, " out of range"));
  }
  if (config.head_timeout.count() <= 0 || config.body_timeout.count() <= 0 || config.write_timeout.count() <= 0 ||
      config.keep_alive_timeout.count() < 0 || config.keep_alive_max_requests <= 0 || config.max_connections <= 0 ||
      config.max_connections_per_peer <= 0 || config.max_head_bytes == 0 || config.listen_backlog <= 0 ||
      config.handler_threads < 0) {
    return absl::InvalidArgumentError(absl::StrCat(config.name, ": timeouts and limits must be positive"));
  }
  WebServerConfig effective = config;
  if (effective.max_buffered_body_bytes == 0) {
    const size_t four = effective.max_body_bytes > (~size_t{0}) / 4 ? ~size_t{0} : effective.max_body_bytes * 4;
    effective.max_buffered_body_bytes = std::max<size_t>(four, size_t{64} << 20);
  }
  rlimit nofile{};
  if (::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY) {
    const rlim_t budget = std::max<rlim_t>(kMinConnections, nofile.rlim_cur / 4);
    if (budget < static_cast<rlim_t>(effective.max_connections)) effective.max_connections = static_cast<int>(budget);
  }
  const std::string where = config.address.find(':') != std::string::npos
                                ? absl::StrCat("[", config.address, "]:", config.port)
                                : absl::StrCat(config.address, ":", config.port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV | AI_NUMERICHOST;
  addrinfo* addrs = nullptr;
  const std::string service = std::to_string(config.port);
  const std::string host = config.address == "localhost" ? "127.0.0.1" : config.address;
  const int gai = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &addrs);
  if (gai != 0) {
    return absl::InvalidArgumentError(absl::StrCat(config.name, ": bad address ", where, ": ", ::gai_strerror(gai)));
  }
  int listen_fd = -1;
  int last_errno = EADDRNOTAVAIL;
  for (addrinfo* ai = addrs; ai != nullptr && listen_fd < 0; ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last_errno = errno;
      continue;
    }
    const int on = 1, off = 0;
    // SO_REUSEADDR only: SO_REUSEPORT would let a second server bind the same port and
    // silently share its calls.
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    if (ai->ai_family == AF_INET6) ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd, config.listen_backlog) != 0) {
      last_errno = errno;
      CloseFd(fd);
      continue;
    }
    listen_fd = fd;
  }
  ::freeaddrinfo(addrs);
  if (listen_fd < 0) {
    return absl::UnavailableError(
        absl::StrCat(config.name, ": cannot listen on ", where, ": ", ErrnoText(last_errno)));
  }
  sockaddr_storage bound{};
  socklen_t bound_len = sizeof(bound);
  int port = config.port;
  if (::getsockname(listen_fd, reinterpret_cast<sockaddr*>(&bound), &bound_len) == 0) {
    std::string ignored = PeerKey(bound, &port);
  }
  const int wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd < 0) {
    const int err = errno;
    CloseFd(listen_fd);
    return absl::InternalError(absl::StrCat(config.name, ": eventfd: ", ErrnoText(err)));
  }
  std::unique_ptr<WebServer> server(new WebServer());
  server->port_ = port;
  server->max_connections_ = effective.max_connections;
  try {
    server->loop_ = std::make_unique<Loop>(effective, std::move(handlers), listen_fd, wake_fd);
    server->thread_ = std::thread([loop = server->loop_.get()] { loop->Run(); });
  } catch (const std::system_error& e) {
    return absl::InternalError(absl::StrCat(config.name, ": cannot start its threads: ", e.what()));
  }
  return server;
}

WebServer::~WebServer() { Stop(); }

WebServerStats WebServer::stats() const {
  return loop_ ? loop_->Stats() : WebServerStats{};
}

void WebServer::BeginDrain() {
  if (loop_) loop_->RequestDrain();
}

void WebServer::Stop() {
  std::lock_guard<std::mutex> lock(stop_mu_);
  if (thread_.joinable()) {
    loop_->RequestStop();
    thread_.join();
  }
  if (loop_) loop_->StopHandlers();
}

}  // namespace relserve
