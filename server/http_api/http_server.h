#ifndef RELSERVE_SERVER_HTTP_API_HTTP_SERVER_H_
#define RELSERVE_SERVER_HTTP_API_HTTP_SERVER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/auth/api_keys.h"
#include "server/http_api/http_routes.h"
#include "server/metrics/server_metrics.h"
#include "server/serving/call_tracker.h"
#include "server/serving/model_registry.h"
#include "server/http_transport/web_server.h"

namespace relserve {

struct HttpServerConfig {
  std::string host = "0.0.0.0";
  int port = 8080;  // 0: a free port
  // Threads that parse requests, tokenize them, start their serving calls and write the
  // answers' JSON; none waits for a model (a call waiting for its batch holds no thread), so a
  // few per core suffice. Connections waiting for their request's bytes use no thread either.
  int threads = 64;
  size_t max_body_bytes = 2000000;  // larger bodies: 413, as soon as Content-Length or a chunk says so
  // Larger answers are replaced by an error naming --max-response-bytes (0: no limit): the bytes
  // actually sent count, as gRPC counts its messages.
  size_t max_response_bytes = 0;
  absl::Duration header_timeout = absl::Seconds(10);  // a request head must arrive whole within this
  absl::Duration read_timeout = absl::Seconds(30);   // ... and its body within this after the head
  absl::Duration write_timeout = absl::Seconds(30);  // the client must take the response within this
  int max_connections = 4096;             // the connection table (bounded by a quarter of the open-files limit)
  int max_connections_per_client = 256;   // connections one client address may hold
  absl::Duration keep_alive_timeout = absl::Seconds(5);  // idle keep-alive connections are closed after this
  int keep_alive_max_requests = 1000;                    // requests per connection before it is closed
  // How long a call may take (--http-request-timeout; zero: no limit). A request's
  // X-Request-Timeout header may ask for less (request_deadline.h). Past it the call is
  // answered 504 and its queued sequences are dropped, as a gRPC deadline does.
  absl::Duration request_timeout = absl::Seconds(60);
  // Not null: every route but the open ones (GET /health) needs "Authorization: Bearer KEY"
  // with one of these keys; others get 401 with "WWW-Authenticate: Bearer" and the route's JSON
  // error, counted in relserve_unauthenticated_requests_total{transport="http"}. Outlives the
  // server.
  const ApiKeys* api_keys = nullptr;
};

// "HOST:PORT" ("[::1]:8080" for IPv6) into config's host and port; the port may be 0.
absl::Status ParseHttpAddress(const std::string& address, HttpServerConfig* config);

// The HTTP/JSON API on the project's HTTP server (server/http_transport/web_server.h: one event loop for
// every connection, limits applied while reading), on its own port: the routes of
// http_routes.h, each call counted in relserve_requests_total (rpc = "POST /embed", code = the
// gRPC code name of its status), refused with 503 while the server drains. The route, the API
// key and the drain are checked from the request head, before its body is read. Handlers run
// on `threads` plain std::threads (8 MB stacks), so LibTorch's and OpenBLAS's thread-local
// storage fits (PLATFORM.md; tests/http_api/http_with_torch_test.cc).
class HttpServer {
 public:
  // `registry` and `metrics` (may be null) outlive the server; the routes' serving layer too.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const HttpServerConfig& config, RouteContext routes,
                                                           const ModelRegistry* registry, ServerMetrics* metrics);
  ~HttpServer();

  int port() const { return port_; }

  // Graceful shutdown, as the gRPC service's: new calls are answered 503, running ones finish;
  // idle connections and those still sending a request are closed at once.
  void StartDraining();
  bool WaitForIdle(absl::Time deadline) const { return tracker_.WaitForIdle(deadline); }
  int64_t in_flight() const { return tracker_.in_flight(); }
  // What the connection table has seen (server/http_transport's counters).
  WebServerStats connection_stats() const;
  // Closes the port and every connection, and joins the threads. Safe to call twice.
  void Stop();

 private:
  struct Impl;
  HttpServer(const ModelRegistry* registry, ServerMetrics* metrics);
  std::unique_ptr<Impl> impl_;
  CallTracker tracker_;
  ServerMetrics* metrics_;
  int port_ = 0;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_HTTP_API_HTTP_SERVER_H_
