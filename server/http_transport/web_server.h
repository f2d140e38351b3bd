#ifndef RELSERVE_SERVER_HTTP_TRANSPORT_WEB_SERVER_H_
#define RELSERVE_SERVER_HTTP_TRANSPORT_WEB_SERVER_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "server/http_transport/http_request.h"

namespace relserve {

// Where and how a WebServer listens, and the limits that keep clients from holding it.
struct WebServerConfig {
  std::string name = "HTTP";  // in its error messages: "HTTP: cannot listen on ..."
  // Numeric IPv4/IPv6 address (or "localhost"); "::" = dual stack; "" = all interfaces.
  std::string address = "0.0.0.0";
  int port = 0;  // 0 = pick a free port (see WebServer::port())

  // A client must deliver a whole request head within this time after it connected (or, on a
  // kept-alive connection, after the first byte of the request); trickled bytes do not extend it.
  std::chrono::milliseconds head_timeout{10000};
  // ... and the whole body within this time after the head.
  std::chrono::milliseconds body_timeout{30000};
  // A client must take the whole response within this time.
  std::chrono::milliseconds write_timeout{30000};
  // Idle time allowed between requests on a connection; zero: one request per connection
  // ("Connection: close" on every response).
  std::chrono::milliseconds keep_alive_timeout{5000};
  int keep_alive_max_requests = 1000;  // requests per connection before it is closed

  size_t max_head_bytes = 16 << 10;  // request line + fields; over it: 414 / 431
  size_t max_body_bytes = 16 << 20;  // over it: 413 as soon as the head or chunk sizes say so
  // Bytes of request bodies held at once, over all connections, from the first byte read to
  // the handler's answer; a body that would go over it is refused with 503 (Retry-After: 1).
  // 0: 4 x max_body_bytes, at least 64 MiB.
  size_t max_buffered_body_bytes = 0;

  // Size of the connection table; Start() lowers it to a quarter of the soft RLIMIT_NOFILE (at
  // least 8) so that a full table cannot exhaust the process's descriptors.
  int max_connections = 4096;
  int max_connections_per_peer = 256;  // connections one peer address may hold at once
  int listen_backlog = 4096;           // connections the kernel may queue (capped by somaxconn)

  // Threads that run `handle` or `start` (requests wait in a queue for one), and the work a
  // WebResponder hands back to them; 0: they run on the loop thread (for handlers that never
  // block, such as /metrics).
  int handler_threads = 0;
};

// One request, as the handlers see it.
struct WebRequest {
  HttpRequestHead head;
  std::string body;  // decoded (chunked framing removed); empty for a screened head
  std::string peer;  // the client's address (an IPv4-mapped IPv6 address as IPv4)
  int peer_port = 0;

  // The value of the first field with this name (case-insensitive), nullopt when absent.
  std::optional<std::string_view> Header(std::string_view name) const;
};

struct WebResponse {
  int status = 200;
  std::string content_type;  // empty: no Content-Type (and, normally, an empty body)
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // more fields, e.g. WWW-Authenticate
  bool close = false;  // close the connection after this response
};

class WebOutbox;  // web_server.cc: the answers on their way to the loop, and the handler threads

// One request's answer, for an asynchronous handler (`WebHandlers::start`): given from any
// thread, once the work is done, and written by the event loop. Copies answer the same
// request; only the first answer counts, and answers after the client left or the server
// stopped are dropped.
class WebResponder {
 public:
  void Respond(WebResponse response) const;
  // Unless an answer came first, the loop calls `late` at `when` (on the loop thread: it must
  // not block) and writes what it returns; nullopt: an answer is on its way, keep waiting.
  // Called again, the later deadline replaces the earlier.
  void RespondBy(std::chrono::steady_clock::time_point when,
                 std::function<std::optional<WebResponse>()> late) const;
  // Runs `work` on a handler thread (on the calling thread where the server has none), so that
  // a thread that finished a computation never writes the answer itself; dropped once the
  // server stopped. `work` must not throw.
  void RunOnHandlerThread(std::function<void()> work) const;

 private:
  friend class WebServer;
  std::shared_ptr<WebOutbox> outbox_;
  uint64_t connection_ = 0;
  int request_ = 0;  // which request of its connection
};

struct WebHandlers {
  // On the loop thread when a request head is complete, before any byte of its body is read:
  // a response returned here is sent instead of reading the body and calling `handle` (a
  // missing API key, an unknown route, a drain), and the connection is closed after it if the
  // request had a body. Must not block. May be empty.
  std::function<std::optional<WebResponse>(const WebRequest& head_only)> screen;
  // The whole request (see WebServerConfig::handler_threads for the thread). `client_gone`
  // turns true when the client closes its side of the connection or resets it while the
  // handler runs; the response is still sent where the connection allows. An exception is a
  // 500 (via `error`).
  std::function<WebResponse(const WebRequest& request, const std::shared_ptr<const std::atomic<bool>>& client_gone)>
      handle;
  // Instead of `handle` (one of the two is set): the whole request, on the same thread, for a
  // handler that starts its work and returns at once; the work answers through `respond`
  // (from any thread, no thread waiting for it). `client_gone` as for `handle`. An exception
  // thrown by `start` is a 500 (via `error`).
  std::function<void(const WebRequest& request, const std::shared_ptr<const std::atomic<bool>>& client_gone,
                     const WebResponder& respond)>
      start;
  // The response to a request the server refuses itself: a malformed head or framing (400,
  // 414, 431, 505, 501), a body over a limit (413), a connection table full of busy
  // connections (503), a handler's exception (500). `head` is null when the head could not be
  // read. Empty: a plain-text body "<Reason>: <message>".
  std::function<WebResponse(int status, const std::string& message, const HttpRequestHead* head)> error;
};

// Counters of what the server did to protect itself, for metrics and tests.
struct WebServerStats {
  uint64_t connections_accepted = 0;
  uint64_t connections_evicted = 0;   // closed to make room for a newer connection
  uint64_t connections_refused = 0;   // new connections closed because nothing could be evicted
  uint64_t head_timeouts = 0;         // request heads (or idle keep-alive waits) past their deadline
  uint64_t body_timeouts = 0;
  uint64_t write_timeouts = 0;
  uint64_t requests = 0;              // complete heads
  int open_connections = 0;
};

// An event-driven HTTP/1.1 server: one thread multiplexes every connection with poll() and
// non-blocking sockets, so a slow or idle client costs a table slot, never a thread. Requests
// are framed by Content-Length or chunked encoding (request_body.h) with the limits applied
// while reading; kept-alive connections carry pipelined requests, answered in order.
//
// The connection table is defended as the metrics endpoint's always was:
// - Whole-head deadline: a request head must be complete head_timeout after the connection was
//   accepted (or after the first byte of a kept-alive connection's next request); trickled bytes
//   never extend it. The body has its own deadline, the response write its own.
// - A new connection is always taken: when the table or the peer's share of it is full, one
//   connection makes room, in this order: the oldest that was answered and only awaits the
//   client's close; the oldest that has not delivered a complete request head (its bytes are
//   read first, and it is spared if they complete a request); the oldest still sending its
//   body; the oldest not reading its response. A connection whose request a handler is running
//   is never closed for another; when every candidate is such, the newcomer is refused.
// - Per-peer cap: one peer address evicts only its own connections.
// - Descriptors: accept failing with EMFILE/ENFILE closes the oldest connection without a
//   request head and retries, else pauses accepting for 100 ms.
// - Memory: heads and bodies are bounded per connection and body bytes over all connections.
// After a response that ends the connection, the write side is shut down and what the client
// still sends is read and dropped for up to 500 ms, so that closing does not reset a response
// the client has not read yet.
class WebServer {
 public:
  // Binds, listens and starts the loop (and handler threads). UNAVAILABLE with the errno text
  // if the address cannot be bound; INVALID_ARGUMENT for a bad port, address, limit, or
  // unless exactly one of `handle` and `start` is set.
  static absl::StatusOr<std::unique_ptr<WebServer>> Start(const WebServerConfig& config, WebHandlers handlers);

  ~WebServer();
  WebServer(const WebServer&) = delete;
  WebServer& operator=(const WebServer&) = delete;

  int port() const { return port_; }
  int max_connections() const { return max_connections_; }  // after the descriptor budget
  WebServerStats stats() const;

  // The start of a graceful shutdown: connections without a request in progress (idle ones,
  // and those still sending a head or a body) are closed at once, and every later response
  // closes its connection. Requests already with a handler are answered. Thread-safe.
  void BeginDrain();

  // Closes the listening socket and every connection, then joins the loop and the handler
  // threads (a handler still running is waited for). Safe to call more than once and from
  // several threads; not from inside a handler.
  void Stop();

 private:
  class Loop;
  WebServer() = default;

  int port_ = 0;
  int max_connections_ = 0;
  std::mutex stop_mu_;
  std::unique_ptr<Loop> loop_;
  std::thread thread_;
};

// "OK", "Not Found", ...; "Unknown" for a status without a phrase here.
const char* HttpReasonPhrase(int status);

}  // namespace relserve

#endif  // RELSERVE_SERVER_HTTP_TRANSPORT_WEB_SERVER_H_
