#include "server/http/client_watch.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstdlib>
#include <cstring>

namespace relserve {
namespace {

// The port and numeric address of a socket address; false for other families.
bool Describe(const sockaddr_storage& addr, int* port, std::string* host) {
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    *port = ntohs(a->sin_port);
    if (host != nullptr) *host = inet_ntop(AF_INET, &a->sin_addr, text, sizeof(text)) ? text : "";
    return true;
  }
  if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    *port = ntohs(a->sin6_port);
    if (host != nullptr) *host = inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof(text)) ? text : "";
    return true;
  }
  return false;
}

}  // namespace

int FindConnectedSocket(const std::string& remote_addr, int remote_port, int local_port) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int found = -1;
  while (dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    sockaddr_storage local{}, peer{};
    socklen_t local_len = sizeof(local), peer_len = sizeof(peer);
    int port = 0;
    std::string host;
    if (getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&local), &local_len) != 0) continue;
    if (!Describe(local, &port, nullptr) || port != local_port) continue;
    if (getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) continue;
    if (!Describe(peer, &port, &host) || port != remote_port) continue;
    // httplib writes IPv4 peers of an IPv6 socket as plain IPv4; inet_ntop as ::ffff:a.b.c.d.
    if (host == remote_addr || host == "::ffff:" + remote_addr) {
      found = static_cast<int>(fd);
      break;
    }
  }
  closedir(dir);
  return found;
}

bool ClientWatch::Gone() {
  if (!searched_) {
    searched_ = true;
    fd_ = FindConnectedSocket(remote_addr_, remote_port_, local_port_);
  }
  if (fd_ < 0) return false;
  pollfd p{fd_, POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

}  // namespace relserve
