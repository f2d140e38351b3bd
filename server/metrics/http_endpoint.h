#ifndef RELSERVE_SERVER_METRICS_HTTP_ENDPOINT_H_
#define RELSERVE_SERVER_METRICS_HTTP_ENDPOINT_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace relserve {

// Where and how the metrics endpoint listens. Only address and port matter in production;
// the limits have safe defaults and exist mostly so tests can shorten them.
struct HttpEndpointConfig {
  // Numeric IPv4/IPv6 address (or "localhost"); "::" = dual stack; "" = all interfaces.
  std::string address = "0.0.0.0";
  int port = 9090;                   // 0 = pick a free port (see MetricsHttpEndpoint::port())

  // A client must deliver its whole request head within this time after connecting.
  int read_timeout_ms = 2000;
  // A client must take the whole response within this time after the request was read.
  int write_timeout_ms = 10000;
  // Request line + headers larger than this are answered with 431.
  size_t max_request_bytes = 8192;
  // At most this many connections are served at once; further ones wait in the listen backlog
  // until a slot frees up (each slot frees within the timeouts above).
  int max_connections = 64;
};

// A minimal HTTP/1.1 server for Prometheus scrapes and health checks.
//
// Why not prometheus::Exposer: prometheus-cpp's pull exposer runs on civetweb, and Debian's
// civetweb gives its worker threads a 100 KB stack. In a process that also loads LibTorch with
// OpenBLAS-pthread the static TLS of OpenBLAS, glog and torch no longer fits in it, and the
// Exposer constructor throws "null context when constructing CivetServer". This server runs on
// one ordinary std::thread (normal stack) and needs nothing but POSIX sockets.
//
// Routes (anything after '?' is ignored):
//   GET|HEAD /metrics  200, Content-Type: text/plain; version=0.0.4; charset=utf-8, body =
//                      render_metrics() (500 if it throws)
//   GET|HEAD /healthz  200 "ok" when ready() is true (or no ready callback was given),
//                      503 "not ready" otherwise
//   other paths        404
//   other methods      405 with "Allow: GET, HEAD"
//   malformed request  400; request head over max_request_bytes: 431
// Every response carries Content-Length and "Connection: close"; the connection is closed after
// the response. The serving thread multiplexes all connections with poll() and non-blocking
// sockets, so a client that connects and sends nothing (or reads slowly) only occupies its own
// slot until read_timeout_ms / write_timeout_ms expire; it never delays other clients.
// render_metrics and ready are called on the serving thread.
class MetricsHttpEndpoint {
 public:
  // Binds, listens and starts the serving thread. UNAVAILABLE with the errno text if the address
  // cannot be bound; INVALID_ARGUMENT for a bad port, address or a null render_metrics.
  static absl::StatusOr<std::unique_ptr<MetricsHttpEndpoint>> Start(
      const HttpEndpointConfig& config, std::function<std::string()> render_metrics,
      std::function<bool()> ready);

  ~MetricsHttpEndpoint();
  MetricsHttpEndpoint(const MetricsHttpEndpoint&) = delete;
  MetricsHttpEndpoint& operator=(const MetricsHttpEndpoint&) = delete;

  // The bound port (the actual one when config.port was 0).
  int port() const { return port_; }

  // Closes the listening socket and every open connection and joins the serving thread.
  // Safe to call more than once and from several threads; must not be called from inside
  // render_metrics or ready (they run on the serving thread).
  void Stop();

 private:
  class Loop;
  MetricsHttpEndpoint() = default;

  int port_ = 0;
  std::mutex stop_mu_;  // serializes Stop()
  std::unique_ptr<Loop> loop_;
  std::thread thread_;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_METRICS_HTTP_ENDPOINT_H_
