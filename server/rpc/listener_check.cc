#include "server/rpc/listener_check.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <system_error>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/metrics/server_metrics.h"
#include "server/util/log.h"

namespace relserve {
namespace {

std::string ErrnoText(int err) { return std::error_code(err, std::generic_category()).message(); }

ListenerTarget IpTarget(int family, const void* ip, int port) {
  ListenerTarget t;
  char text[INET6_ADDRSTRLEN] = "";
  ::inet_ntop(family, ip, text, sizeof(text));
  if (family == AF_INET) {
    auto* sin = reinterpret_cast<sockaddr_in*>(&t.addr);
    sin->sin_family = AF_INET;
    sin->sin_port = htons(static_cast<uint16_t>(port));
    std::memcpy(&sin->sin_addr, ip, sizeof(in_addr));
    t.addr_len = sizeof(sockaddr_in);
    t.text = absl::StrCat(text, ":", port);
  } else {
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(&t.addr);
    sin6->sin6_family = AF_INET6;
    sin6->sin6_port = htons(static_cast<uint16_t>(port));
    std::memcpy(&sin6->sin6_addr, ip, sizeof(in6_addr));
    t.addr_len = sizeof(sockaddr_in6);
    t.text = absl::StrCat("[", text, "]:", port);
  }
  return t;
}

std::vector<ListenerTarget> Loopback(int port) {
  const in_addr v4{htonl(INADDR_LOOPBACK)};
  return {IpTarget(AF_INET, &v4, port), IpTarget(AF_INET6, &in6addr_loopback, port)};
}

absl::StatusOr<std::vector<ListenerTarget>> UnixTarget(const std::string& path, bool abstract,
                                                       const std::string& text) {
  ListenerTarget t;
  auto* sun = reinterpret_cast<sockaddr_un*>(&t.addr);
  sun->sun_family = AF_UNIX;
  const size_t offset = abstract ? 1 : 0;  // an abstract name starts with a NUL byte
  if (path.empty() || path.size() + offset + (abstract ? 0 : 1) > sizeof(sun->sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("Unix socket address ", text,
                                                   " is empty or too long"));
  }
  std::memcpy(sun->sun_path + offset, path.data(), path.size());
  t.addr_len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + offset + path.size() +
                                      (abstract ? 0 : 1));
  t.text = text;
  return std::vector<ListenerTarget>{t};
}

// A TLS 1.2/1.3 ClientHello without a server name: enough for any TLS server to answer with
// its ServerHello (see ProbeListener). The random and the X25519 key share are constants (the
// key is the curve's base point, a valid public key): the handshake is never completed, so
// nothing secret is derived from them.
std::string ClientHello() {
  auto u16 = [](std::string& s, size_t v) {
    s += static_cast<char>((v >> 8) & 0xff);
    s += static_cast<char>(v & 0xff);
  };
  auto extension = [&](std::string& out, uint16_t type, const std::string& data) {
    u16(out, type);
    u16(out, data.size());
    out += data;
  };
  auto list16 = [&](std::initializer_list<uint16_t> items) {
    std::string s;
    u16(s, items.size() * 2);
    for (uint16_t v : items) u16(s, v);
    return s;
  };
  std::string extensions;
  extension(extensions, 0x000a, list16({0x001d, 0x0017, 0x0018}));  // groups: x25519, P-256, P-384
  extension(extensions, 0x000b, std::string("\x01\x00", 2));        // uncompressed points
  extension(extensions, 0x000d,                                      // signature algorithms
            list16({0x0403, 0x0804, 0x0401, 0x0503, 0x0805, 0x0501, 0x0806, 0x0601, 0x0807}));
  extension(extensions, 0x0010, std::string("\x00\x03\x02h2", 5));  // ALPN: h2
  extension(extensions, 0x002b, std::string("\x04\x03\x04\x03\x03", 5));  // TLS 1.3, 1.2
  std::string key_share;
  u16(key_share, 2 + 2 + 32);
  u16(key_share, 0x001d);
  u16(key_share, 32);
  key_share += '\x09';
  key_share += std::string(31, '\0');
  extension(extensions, 0x0033, key_share);

  std::string hello;
  u16(hello, 0x0303);                  // legacy_version TLS 1.2
  hello += std::string(32, '\x5a');    // random
  hello += '\0';                       // no session id
  std::string suites = list16({0x1301, 0x1302, 0x1303, 0xc02b, 0xc02f, 0xc02c, 0xc030, 0xcca9,
                               0xcca8});
  hello += suites;
  hello += std::string("\x01\x00", 2);  // compression: null only
  u16(hello, extensions.size());
  hello += extensions;

  std::string handshake;
  handshake += '\x01';  // client_hello
  handshake += static_cast<char>((hello.size() >> 16) & 0xff);
  u16(handshake, hello.size() & 0xffff);
  handshake += hello;

  std::string record;
  record += '\x16';  // handshake
  u16(record, 0x0301);
  u16(record, handshake.size());
  record += handshake;
  return record;
}

// Waits until `fd` has `events`, the cancel fd fires or the deadline passes.
// 1: ready (revents in *revents), 0: deadline, -1: cancelled.
int WaitFor(int fd, short events, int cancel_fd, std::chrono::steady_clock::time_point deadline,
            short* revents) {
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return 0;
    pollfd fds[2] = {{fd, events, 0}, {cancel_fd, POLLIN, 0}};
    const int n = ::poll(fds, cancel_fd >= 0 ? 2 : 1, static_cast<int>(left.count()) + 1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return 0;
    if (cancel_fd >= 0 && fds[1].revents != 0) return -1;
    if (fds[0].revents != 0) {
      *revents = fds[0].revents;
      return 1;
    }
  }
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

absl::StatusOr<std::vector<ListenerTarget>> ListenerTargets(const std::string& grpc_address,
                                                            int bound_port) {
  std::string address = grpc_address;
  if (absl::StartsWith(address, "unix:")) {
    std::string path = address.substr(5);
    if (absl::StartsWith(path, "//")) path = path.substr(2);  // unix:///absolute/path
    return UnixTarget(path, /*abstract=*/false, address);
  }
  if (absl::StartsWith(address, "unix-abstract:")) {
    return UnixTarget(address.substr(14), /*abstract=*/true, address);
  }
  for (const char* prefix : {"dns:///", "dns:", "ipv4:", "ipv6:"}) {
    if (absl::StartsWith(address, prefix)) {
      address = address.substr(std::strlen(prefix));
      break;
    }
  }
  if (absl::StartsWith(address, "vsock:")) {
    return absl::UnimplementedError(absl::StrCat("cannot probe ", grpc_address,
                                                 ": only TCP and Unix sockets are probed"));
  }
  std::string host, port_text;
  if (absl::StartsWith(address, "[")) {
    const size_t close = address.find(']');
    if (close == std::string::npos || address.compare(close + 1, 1, ":") != 0) {
      return absl::InvalidArgumentError(absl::StrCat("gRPC address ", grpc_address,
                                                     " is not [HOST]:PORT"));
    }
    host = address.substr(1, close - 1);
    port_text = address.substr(close + 2);
  } else {
    const size_t colon = address.rfind(':');
    if (colon == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("gRPC address ", grpc_address,
                                                     " has no port"));
    }
    host = address.substr(0, colon);
    port_text = address.substr(colon + 1);
  }
  int port = bound_port;
  if (port <= 0 && (!absl::SimpleAtoi(port_text, &port) || port <= 0 || port > 65535)) {
    return absl::InvalidArgumentError(absl::StrCat("gRPC address ", grpc_address,
                                                   " has no usable port"));
  }
  if (host.empty() || host == "0.0.0.0" || host == "::" || host == "localhost") {
    return Loopback(port);
  }
  in_addr v4{};
  in6_addr v6{};
  if (::inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    return std::vector<ListenerTarget>{IpTarget(AF_INET, &v4, port)};
  }
  if (::inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
    return std::vector<ListenerTarget>{IpTarget(AF_INET6, &v6, port)};
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int gai = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (gai != 0) {
    return absl::NotFoundError(absl::StrCat("cannot resolve the host of gRPC address ",
                                            grpc_address, ": ", ::gai_strerror(gai)));
  }
  std::vector<ListenerTarget> targets;
  for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_family == AF_INET) {
      targets.push_back(
          IpTarget(AF_INET, &reinterpret_cast<sockaddr_in*>(ai->ai_addr)->sin_addr, port));
    } else if (ai->ai_family == AF_INET6) {
      targets.push_back(
          IpTarget(AF_INET6, &reinterpret_cast<sockaddr_in6*>(ai->ai_addr)->sin6_addr, port));
    }
  }
  ::freeaddrinfo(found);
  if (targets.empty()) {
    return absl::NotFoundError(absl::StrCat("gRPC address ", grpc_address,
                                            " resolves to no IP address"));
  }
  return targets;
}

absl::Status ProbeListener(const std::vector<ListenerTarget>& targets, absl::Duration timeout,
                           int cancel_fd) {
  using Clock = std::chrono::steady_clock;
  static const std::string hello = ClientHello();
  const auto deadline = Clock::now() + absl::ToChronoNanoseconds(timeout);
  const std::string within = absl::FormatDuration(timeout);
  // When no target connects, the first one's error is reported (the loopback of the address
  // family the server most likely listens on).
  absl::Status first_error;
  auto failed = [&first_error](absl::Status error) {
    if (first_error.ok()) first_error = std::move(error);
  };
  for (const ListenerTarget& t : targets) {
    Fd s;
    s.fd = ::socket(t.addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s.fd < 0) {
      const int err = errno;
      absl::Status error = absl::UnavailableError(
          absl::StrCat("cannot open a socket to probe ", t.text, ": ", ErrnoText(err)));
      if (err != EAFNOSUPPORT) return error;  // e.g. descriptors exhausted
      failed(std::move(error));               // no IPv6 here: try the next address
      continue;
    }
    short revents = 0;
    if (::connect(s.fd, reinterpret_cast<const sockaddr*>(&t.addr), t.addr_len) != 0) {
      if (errno != EINPROGRESS) {
        failed(absl::UnavailableError(absl::StrCat("connect to ", t.text, ": ", ErrnoText(errno))));
        continue;
      }
      const int w = WaitFor(s.fd, POLLOUT, cancel_fd, deadline, &revents);
      if (w < 0) return absl::CancelledError("probe cancelled");
      if (w == 0) {
        return absl::UnavailableError(absl::StrCat(
            "connect to ", t.text, " did not complete within ", within, " (listen backlog full)"));
      }
      int err = 0;
      socklen_t len = sizeof(err);
      ::getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) {
        failed(absl::UnavailableError(absl::StrCat("connect to ", t.text, ": ", ErrnoText(err))));
        continue;
      }
    }
    // Connected: from here on, this target's answer is the result.
    if (::send(s.fd, hello.data(), hello.size(), MSG_NOSIGNAL) < 0) {
      return absl::UnavailableError(absl::StrCat("send to ", t.text, ": ", ErrnoText(errno)));
    }
    const int w = WaitFor(s.fd, POLLIN, cancel_fd, deadline, &revents);
    if (w < 0) return absl::CancelledError("probe cancelled");
    if (w == 0) {
      return absl::UnavailableError(absl::StrCat(
          t.text, " took the connection into the kernel's listen backlog but the server sent "
          "nothing within ", within, ": it does not accept connections"));
    }
    char buf[4096];
    const ssize_t n = ::recv(s.fd, buf, sizeof(buf), 0);
    if (n >= 0) return absl::OkStatus();  // a reply, or an orderly close after accepting
    return absl::UnavailableError(
        absl::StrCat(t.text, " failed the connection before replying: ", ErrnoText(errno)));
  }
  return first_error.ok() ? absl::UnavailableError("no address to probe") : first_error;
}

absl::StatusOr<std::unique_ptr<GrpcListenerCheck>> GrpcListenerCheck::Start(
    const std::string& grpc_address, int bound_port, const ListenerCheckOptions& options,
    ServerMetrics* metrics, std::function<bool()> enabled) {
  std::unique_ptr<GrpcListenerCheck> check(new GrpcListenerCheck());
  absl::StatusOr<std::vector<ListenerTarget>> targets = ListenerTargets(grpc_address, bound_port);
  if (!targets.ok()) {
    LogWarning(absl::StrCat("gRPC listener self-check disabled: ", targets.status().message()));
    return check;
  }
  check->targets_ = std::move(*targets);
  check->options_ = options;
  check->metrics_ = metrics;
  check->enabled_ = std::move(enabled);
  check->cancel_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (check->cancel_fd_ < 0) {
    return absl::InternalError(
        absl::StrCat("gRPC listener self-check: eventfd: ", ErrnoText(errno)));
  }
  try {
    check->thread_ = std::thread([raw = check.get()] { raw->Run(); });
  } catch (const std::system_error& e) {
    return absl::InternalError(
        absl::StrCat("gRPC listener self-check: cannot start its thread: ", e.what()));
  }
  return check;
}

GrpcListenerCheck::~GrpcListenerCheck() {
  Stop();
  if (cancel_fd_ >= 0) ::close(cancel_fd_);
}

absl::Status GrpcListenerCheck::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

void GrpcListenerCheck::Stop() {
  std::lock_guard<std::mutex> stop_lock(stop_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (cancel_fd_ >= 0) {
    const uint64_t one = 1;
    const ssize_t n = ::write(cancel_fd_, &one, sizeof(one));
    (void)n;  // the eventfd can only be full if a cancellation is already pending
  }
  if (thread_.joinable()) thread_.join();
}

void GrpcListenerCheck::Run() {
  // While disabled, `enabled` is looked at again after this (not after a whole interval), so
  // that the first probe follows soon after the server starts serving.
  constexpr auto kDisabledPoll = std::chrono::milliseconds(100);
  while (true) {
    const bool enabled = !enabled_ || enabled_();
    if (enabled) {
      const absl::Status probe = ProbeListener(targets_, options_.timeout, cancel_fd_);
      if (absl::IsCancelled(probe)) return;
      // A server that began shutting down during the probe closes its listener on purpose.
      if (enabled_ && !enabled_()) continue;
      if (metrics_ != nullptr) metrics_->SetGrpcListenerOk(probe.ok());
      bool was_ok = true;
      {
        std::lock_guard<std::mutex> lock(mu_);
        was_ok = status_.ok();
        status_ = probe.ok() ? absl::OkStatus()
                             : absl::UnavailableError(absl::StrCat(
                                   "the gRPC listener does not accept new connections: ",
                                   probe.message()));
      }
      if (was_ok && !probe.ok()) {
        LogError(absl::StrCat("gRPC listener self-check failed (/healthz answers 503 until it "
                              "passes): ", probe.message()));
      } else if (!was_ok && probe.ok()) {
        LogInfo("gRPC listener self-check passes again: new connections are accepted");
      }
    }
    const auto wait = enabled ? absl::ToChronoNanoseconds(options_.interval)
                              : std::chrono::nanoseconds(kDisabledPoll);
    std::unique_lock<std::mutex> lock(mu_);
    if (wake_.wait_for(lock, wait, [this] { return stop_; })) {
      return;
    }
  }
}

}  // namespace relserve
