#ifndef RELSERVE_SERVER_METRICS_HTTP_ENDPOINT_H_
#define RELSERVE_SERVER_METRICS_HTTP_ENDPOINT_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

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
//                      render_metrics() (500 if it throws); 401 when config.authorize_metrics
//                      refuses the request's Authorization header
//   GET|HEAD /healthz  200 "ok" when ready() returns OK (or no ready callback was given),
//                      503 with ready()'s message otherwise (or if it throws)
//   other paths        404
//   other methods      405 with "Allow: GET, HEAD"
//   malformed request  400; request line / head over max_request_bytes: 414 / 431;
//                      an HTTP version other than 1.x: 505
// Every response carries Content-Length and "Connection: close"; the connection is closed after
// the response. A 400 names what was malformed (see http_request.h for the parser).
//
// Slow and idle clients. The endpoint answers the orchestrator's probes and Prometheus, so no
// client that connects and then says nothing, or sends its request a byte at a time, may keep
// them from being served. The serving thread multiplexes every connection with poll() and
// non-blocking sockets (a slow client never delays another one's bytes), and the connection
// table is defended thus:
// - Total header deadline: the request head must be complete read_timeout_ms after the
//   connection was accepted. The deadline is set once at accept; trickled bytes do not move
//   it, so a connection holds its slot for at most read_timeout_ms before its request is read.
// - A new connection is always taken: the listening socket is polled even when the table is
//   full, and a connection that does not fit evicts (closes) one that is done or idle: the
//   oldest one already answered that only awaits the client's close (at most 500 ms), else the
//   oldest connection that has not yet delivered a complete request head (its bytes are read
//   first, so a request that has just arrived is served rather than dropped), else the oldest
//   one whose client is not reading its response. A probe's request arrives with its
//   connection and is read at once, so by the time later connections arrive it is no longer
//   evictable: the oldest idle connections go first, and those are the attacker's.
// - Per-peer cap: one peer address holds at most max_connections_per_peer connections; its
//   next connection evicts its own oldest one (same order as above), never someone else's.
//   A single misbehaving client therefore only churns its own slots and cannot push out the
//   connection of a kubelet probe (the node's address) or of Prometheus (its pod's address).
//   Peers are whole addresses; an IPv4-mapped IPv6 address counts as its IPv4 address. (A
//   client sharing the probe's address could still push the probe out if it opened that many
//   connections between the probe's connect and the arrival of its request.)
// - Descriptor budget: the table is bounded by a quarter of the soft RLIMIT_NOFILE at Start(),
//   leaving the rest to gRPC and the models.
// - When accept() fails for want of descriptors (EMFILE, ENFILE), the oldest connection that
//   has not delivered its head is closed to free one and accept is retried; with none to
//   close, accepting pauses for 100 ms (the pending connection waits in the listen backlog).
// render_metrics and ready are called on the serving thread.
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
  int port() const { return port_; }
  // The size of the connection table after the descriptor budget was applied.
  int max_connections() const { return max_connections_; }

  // Closes the listening socket and every open connection and joins the serving thread.
  // Safe to call more than once and from several threads; must not be called from inside
  // render_metrics or ready (they run on the serving thread).
  void Stop();

 private:
  class Loop;
  MetricsHttpEndpoint() = default;

  int port_ = 0;
  int max_connections_ = 0;
  std::mutex stop_mu_;  // serializes Stop()
  std::unique_ptr<Loop> loop_;
  std::thread thread_;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_METRICS_HTTP_ENDPOINT_H_
