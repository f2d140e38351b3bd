#include "server/metrics/http_endpoint.h"

#include <exception>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/http_transport/web_server.h"

namespace relserve {
namespace {

constexpr char kMetricsContentType[] = "text/plain; version=0.0.4; charset=utf-8";
constexpr char kPlainContentType[] = "text/plain; charset=utf-8";

WebResponse Plain(int status, std::string body) {
  WebResponse r;
  r.status = status;
  r.content_type = kPlainContentType;
  r.body = std::move(body);
  r.headers.emplace_back("Cache-Control", "no-store");
  return r;
}

// "Bad Request: the method is not a token"
WebResponse Error(int status, const std::string& detail = "") {
  std::string body = HttpReasonPhrase(status);
  if (!detail.empty()) absl::StrAppend(&body, ": ", detail);
  return Plain(status, body + "\n");
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsHttpEndpoint>> MetricsHttpEndpoint::Start(
    const HttpEndpointConfig& config, std::function<std::string()> render_metrics,
    std::function<absl::Status()> ready) {
  if (!render_metrics) return absl::InvalidArgumentError("metrics endpoint: no render callback");
  if (config.read_timeout_ms <= 0 || config.write_timeout_ms <= 0 || config.max_connections <= 0 ||
      config.max_connections_per_peer <= 0 || config.max_request_bytes == 0) {
    return absl::InvalidArgumentError("metrics endpoint: timeouts and limits must be positive");
  }
  WebServerConfig wc;
  wc.name = "metrics endpoint";
  wc.address = config.address;
  wc.port = config.port;
  wc.head_timeout = std::chrono::milliseconds(config.read_timeout_ms);
  wc.body_timeout = std::chrono::milliseconds(config.read_timeout_ms);
  wc.write_timeout = std::chrono::milliseconds(config.write_timeout_ms);
  wc.keep_alive_timeout = std::chrono::milliseconds(0);  // one request per connection
  wc.max_head_bytes = config.max_request_bytes;
  wc.max_body_bytes = 1 << 20;  // no route reads a body (screen answers from the head)
  wc.max_connections = config.max_connections;
  wc.max_connections_per_peer = config.max_connections_per_peer;
  wc.listen_backlog = 512;
  wc.handler_threads = 0;  // rendering is quick: on the loop thread

  WebHandlers handlers;
  // Every route is answered from its head: a body, if the client sends one, is not read.
  handlers.screen = [render = std::move(render_metrics), ready = std::move(ready),
                     authorize = config.authorize_metrics](const WebRequest& req) -> std::optional<WebResponse> {
    const HttpRequestHead& head = req.head;
    if (head.path != "/metrics" && head.path != "/healthz") return Error(404);
    if (head.method != "GET" && head.method != "HEAD") {
      WebResponse r = Error(405);
      r.headers.emplace_back("Allow", "GET, HEAD");
      return r;
    }
    if (head.path == "/healthz") {
      absl::Status health;
      try {
        if (ready) health = ready();
      } catch (const std::exception& e) {
        health = absl::InternalError(absl::StrCat("the health callback failed: ", e.what()));
      } catch (...) {
        health = absl::InternalError("the health callback failed");
      }
      if (health.ok()) return Plain(200, "ok\n");
      return Plain(503, health.message().empty() ? std::string("not ready\n")
                                                 : absl::StrCat(health.message(), "\n"));
    }
    if (authorize) {
      absl::Status allowed;
      try {
        allowed = authorize(req.Header("authorization"));
      } catch (...) {
        allowed = absl::UnauthenticatedError("the authorization check failed");
      }
      if (!allowed.ok()) {
        WebResponse r = Plain(401, absl::StrCat("Unauthorized: ", allowed.message(), "\n"));
        r.headers.emplace_back("WWW-Authenticate", "Bearer");
        return r;
      }
    }
    try {
      WebResponse r = Plain(200, render());
      r.content_type = kMetricsContentType;
      return r;
    } catch (const std::exception& e) {
      return Plain(500, absl::StrCat("rendering metrics failed: ", e.what(), "\n"));
    } catch (...) {
      return Error(500);
    }
  };
  handlers.handle = [](const WebRequest&, const std::shared_ptr<const std::atomic<bool>>&) { return Error(404); };
  handlers.error = [](int status, const std::string& message, const HttpRequestHead*) {
    return Error(status, message);
  };
  auto server = WebServer::Start(wc, std::move(handlers));
  if (!server.ok()) return server.status();
  std::unique_ptr<MetricsHttpEndpoint> endpoint(new MetricsHttpEndpoint());
  endpoint->server_ = std::move(*server);
  return endpoint;
}

int MetricsHttpEndpoint::port() const { return server_->port(); }
int MetricsHttpEndpoint::max_connections() const { return server_->max_connections(); }
WebServerStats MetricsHttpEndpoint::stats() const { return server_->stats(); }

MetricsHttpEndpoint::~MetricsHttpEndpoint() { Stop(); }

void MetricsHttpEndpoint::Stop() {
  if (server_) server_->Stop();
}

}  // namespace relserve
