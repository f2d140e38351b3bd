#include "server/rpc/connection_closer.h"

#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

#include "absl/time/clock.h"

namespace relserve {
namespace {

struct PortSocket {
  int fd;
  bool listening;
};

// TCP sockets of this process whose local port is `port`.
std::vector<PortSocket> SocketsOnPort(int port) {
  std::vector<PortSocket> out;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return out;
  const int dir_fd = dirfd(dir);
  while (dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == dir_fd) continue;
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    if (getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&addr), &len) != 0) continue;
    int local_port = -1;
    if (addr.ss_family == AF_INET) local_port = ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
    if (addr.ss_family == AF_INET6) local_port = ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
    if (local_port != port) continue;
    int type = 0, listening = 0;
    socklen_t optlen = sizeof(type);
    if (getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_TYPE, &type, &optlen) != 0 || type != SOCK_STREAM) continue;
    optlen = sizeof(listening);
    getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_ACCEPTCONN, &listening, &optlen);
    out.push_back({static_cast<int>(fd), listening != 0});
  }
  closedir(dir);
  return out;
}

// Closes gRPC's listening socket `fd` without gRPC noticing: the descriptor is replaced (dup3)
// by a listening Unix socket with an autobound abstract name that nobody connects to, so the
// TCP socket is closed (connections waiting in its backlog are reset, new ones refused) while
// `fd` stays a listening, non-blocking socket. gRPC polls it in vain and, in its own shutdown,
// shuts it down and closes it as ever.
// Shutting the TCP socket down instead (shutdown(2)) wakes gRPC's poller, whose accept4 then
// fails with EINVAL and, before gRPC's own shutdown has begun, logs
// "Failed accept4: Invalid argument" as an error at every stop; that remains the fallback when
// no placeholder can be made (descriptors exhausted, say).
void CloseListener(int fd) {
  const int placeholder = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (placeholder >= 0 && bind(placeholder, reinterpret_cast<sockaddr*>(&addr), sizeof(sa_family_t)) == 0 &&
      listen(placeholder, 1) == 0 && dup3(placeholder, fd, O_CLOEXEC) == fd) {
    close(placeholder);
    return;
  }
  if (placeholder >= 0) close(placeholder);
  shutdown(fd, SHUT_RDWR);
}

}  // namespace

int EndConnectionsOnPort(int port, absl::Duration wait) {
  if (port <= 0) return 0;
  int ended = 0;
  // Listeners first, so that no client reconnects in between.
  for (const PortSocket& s : SocketsOnPort(port)) {
    if (s.listening) CloseListener(s.fd);
  }
  for (const PortSocket& s : SocketsOnPort(port)) {
    if (!s.listening && shutdown(s.fd, SHUT_WR) == 0) ++ended;
  }
  const absl::Time deadline = absl::Now() + wait;
  while (absl::Now() < deadline) {
    bool open = false;
    for (const PortSocket& s : SocketsOnPort(port)) open = open || !s.listening;
    if (!open) break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return ended;
}

}  // namespace relserve
