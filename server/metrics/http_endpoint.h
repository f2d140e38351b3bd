#ifndef RELSERVE_SERVER_METRICS_HTTP_ENDPOINT_H_
#define RELSERVE_SERVER_METRICS_HTTP_ENDPOINT_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/http_transport/web_server.h"

namespace relserve {

// Where and how the metrics endpoint listens. Only address and port matter in production;
// the limits have safe defaults and exist mostly so tests can shorten them.
struct HttpEndpointConfig {
  // Numeric IPv4/IPv6 address (or "localhost"); "::" = dual stack; "" = all interfaces.
  std::string address = "0.0.0.0";
  int port = 9090;                   // 0 = pick a free port (see MetricsHttpEndpoint::port())

  // A client must deliver its whole request head within this time after connecting; bytes
  // that trickle in do not extend it.
  int read_timeout_ms = 2000;
  // A client must take the whole response within this time after the request was read.
  int write_timeout_ms = 10000;
  // Request line + headers larger than this are answered with 431.
  size_t max_request_bytes = 8192;
  // Size of the connection table. Start() lowers it to a quarter of the soft RLIMIT_NOFILE
  // (at least 8), so that a full table cannot exhaust the process's descriptors.
  int max_connections = 1024;
  // Connections one peer address may hold at once.
  int max_connections_per_peer = 16;

  // When set, /metrics is served only to requests for which it returns OK, given the value of
  // their Authorization header (nullopt when there is none); others get 401 with its message
  // and "WWW-Authenticate: Bearer". /healthz stays open (probes carry no key). Called on the
  // serving thread.
  std::function<absl::Status(std::optional<std::string_view> authorization)> authorize_metrics;
};

// The metrics port: /metrics for Prometheus and /healthz for probes, served by the project's one
// HTTP server (server/http_transport/web_server.h), which the API port runs too, one request per
// connection.
//
// Why not prometheus::Exposer: prometheus-cpp's pull exposer runs on civetweb, and Debian's
// civetweb gives its worker threads a 100 KB stack. In a process that also loads LibTorch with
// OpenBLAS-pthread the static TLS of OpenBLAS, glog and torch no longer fits in it, and the
// Exposer constructor throws "null context when constructing CivetServer". The web server runs
// on one ordinary std::thread (normal stack) and needs nothing but POSIX sockets.
//
// Routes (anything after '?' is ignored):
//   GET|HEAD /metrics  200, Content-Type: text/plain; version=0.0.4; charset=utf-8, body =
//                      render_metrics() (500 if it throws); 401 when config.authorize_metrics
//                      refuses the request's Authorization header
//   GET|HEAD /healthz  200 "ok" when ready() returns OK (or no ready callback was given),
//                      503 with ready()'s message otherwise (or if it throws)
//   other paths        404
//   other methods      405 with "Allow: GET, HEAD"
//   malformed request  400; request line / head over max_request_bytes: 414 / 431;
//                      an HTTP version other than 1.x: 505
// Every response carries Content-Length and "Connection: close"; the connection is closed after
// the response. A 400 names what was malformed (see http_transport/http_request.h for the parser). Slow
// and idle clients are handled as web_server.h says: a whole-head deadline of read_timeout_ms,
// a table bounded by the descriptor budget in which a newcomer evicts the oldest idle
// connection, and a per-peer cap.
class MetricsHttpEndpoint {
 public:
  // Binds, listens and starts the serving thread. UNAVAILABLE with the errno text if the address
  // cannot be bound; INVALID_ARGUMENT for a bad port, address or a null render_metrics.
  static absl::StatusOr<std::unique_ptr<MetricsHttpEndpoint>> Start(
      const HttpEndpointConfig& config, std::function<std::string()> render_metrics,
      std::function<absl::Status()> ready);

  ~MetricsHttpEndpoint();
  MetricsHttpEndpoint(const MetricsHttpEndpoint&) = delete;
  MetricsHttpEndpoint& operator=(const MetricsHttpEndpoint&) = delete;

  // The bound port (the actual one when config.port was 0).
  int port() const;
  // The size of the connection table after the descriptor budget was applied.
  int max_connections() const;
  // What the connection table has seen (evictions, timeouts, ...).
  WebServerStats stats() const;

  // Closes the listening socket and every open connection and joins the serving thread.
  // Safe to call more than once and from several threads; must not be called from inside
  // render_metrics or ready (they run on the serving thread).
  void Stop();

 private:
  MetricsHttpEndpoint() = default;
  std::unique_ptr<WebServer> server_;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_METRICS_HTTP_ENDPOINT_H_
