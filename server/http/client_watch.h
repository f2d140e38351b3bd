#ifndef RELSERVE_SERVER_HTTP_CLIENT_WATCH_H_
#define RELSERVE_SERVER_HTTP_CLIENT_WATCH_H_

#include <string>

namespace relserve {

// Whether the client of an HTTP request is still connected. cpp-httplib (0.11) gives a
// handler its request's addresses but not its socket, so the socket is found once, by those
// addresses, among the process's file descriptors (only when a call waits long enough to be
// worth cancelling), then polled. Not thread-safe: one per request, used by its handler's
// thread, during the handler (while the connection's socket cannot be closed or reused).
class ClientWatch {
 public:
  ClientWatch(std::string remote_addr, int remote_port, int local_port)
      : remote_addr_(std::move(remote_addr)), remote_port_(remote_port), local_port_(local_port) {}

  // True once the client has closed its side of the connection (or the connection failed).
  // False while connected, and when the socket cannot be found.
  bool Gone();

 private:
  std::string remote_addr_;
  int remote_port_;
  int local_port_;
  bool searched_ = false;
  int fd_ = -1;
};

// The descriptor of the TCP socket connected from remote_addr:remote_port to local_port in
// this process; -1 if none.
int FindConnectedSocket(const std::string& remote_addr, int remote_port, int local_port);

}  // namespace relserve

#endif  // RELSERVE_SERVER_HTTP_CLIENT_WATCH_H_
