#include "server/main/connection_closer.h"

#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
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

}  // namespace

int EndConnectionsOnPort(int port, absl::Duration wait) {
  if (port <= 0) return 0;
  int ended = 0;
  // Listeners first, so that no client reconnects in between.
  for (const PortSocket& s : SocketsOnPort(port)) {
    if (s.listening) shutdown(s.fd, SHUT_RDWR);
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
