#include "server/http/http_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/http/client_watch.h"
#include "server/http/http_status.h"
#include "server/http/json_fields.h"
#include "server/http/openai_api.h"
#include "server/http/request_deadline.h"
#include "server/http/tei_api.h"
#include "server/rpc/status_mapping.h"

namespace relserve {
namespace {

using nlohmann::json;

ErrorStyle StyleOfPath(const std::string& path) {
  return path.rfind("/v1/", 0) == 0 ? ErrorStyle::kOpenAI : ErrorStyle::kTei;
}

void SetError(const absl::Status& status, ErrorStyle style, httplib::Response& res) {
  const int http = HttpStatusOf(status);
  res.status = http;
  res.set_content(DumpJson(style == ErrorStyle::kOpenAI ? OpenAIErrorJson(status, http) : TeiErrorJson(status, http)),
                  "application/json");
}

}  // namespace

struct HttpServer::Impl {
  httplib::Server server;
  std::thread listener;
  std::atomic<bool> listener_done{false};
  std::mutex stop_mu;
  bool stopped = false;
};

absl::Status ParseHttpAddress(const std::string& address, HttpServerConfig* config) {
  const size_t colon = address.rfind(':');
  int port = -1;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--http-address: \"", address, "\" is not HOST:PORT with a port in [0, 65535]"));
  }
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.empty()) return absl::InvalidArgumentError(absl::StrCat("--http-address: \"", address, "\" has no host"));
  config->host = host;
  config->port = port;
  return absl::OkStatus();
}

HttpServer::HttpServer(const ModelRegistry* registry, ServerMetrics* metrics)
    : impl_(std::make_unique<Impl>()), tracker_(registry, 0), metrics_(metrics) {}

HttpServer::~HttpServer() { Stop(); }

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerConfig& config, RouteContext context,
                                                              const ModelRegistry* registry, ServerMetrics* metrics) {
  std::unique_ptr<HttpServer> http(new HttpServer(registry, metrics));
  HttpServer* self = http.get();
  httplib::Server& s = http->impl_->server;
  const int threads = std::max(1, config.threads);
  s.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  // SO_REUSEADDR only: httplib's default adds SO_REUSEPORT, which would let a second server
  // (another relserve on the same machine) bind the same port and silently share its calls.
  s.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  s.set_payload_max_length(config.max_body_bytes);
  s.set_read_timeout(std::chrono::microseconds(absl::ToInt64Microseconds(config.read_timeout)));
  s.set_write_timeout(std::chrono::microseconds(absl::ToInt64Microseconds(config.write_timeout)));
  s.set_keep_alive_timeout(std::max<time_t>(1, absl::ToInt64Seconds(config.keep_alive_timeout)));
  s.set_keep_alive_max_count(static_cast<size_t>(std::max(1, config.keep_alive_max_requests)));

  const ApiKeys* api_keys = config.api_keys;
  const absl::Duration timeout = config.request_timeout;
  for (HttpRoute& route : MakeHttpRoutes(context)) {
    auto handler = [self, route, api_keys, timeout](const httplib::Request& req, httplib::Response& res) {
      const absl::Time start = absl::Now();
      self->tracker_.CallStarted();
      std::string model;
      bool readable = true;  // false: the body could not be read, so no model is known
      absl::StatusOr<json> answer = json(nullptr);
      absl::Status auth;
      if (api_keys != nullptr && !route.open) {
        const std::string header = req.get_header_value("Authorization");  // held: Check reads a view of it
        auth = api_keys->Check(req.has_header("Authorization") ? std::optional<std::string_view>(header)
                                                               : std::nullopt);
        if (!auth.ok() && self->metrics_ != nullptr) self->metrics_->RecordUnauthenticated("http");
      }
      if (!auth.ok()) {
        readable = false;  // the body of a caller without the key is not looked at
        answer = auth;
        res.set_header("WWW-Authenticate", "Bearer");
      } else if (self->tracker_.draining()) {
        answer = absl::UnavailableError("the server is shutting down");
      } else {
        absl::StatusOr<json> body = json::object();
        if (route.method == "POST") body = ParseJsonObject(req.body);
        const std::string asked = req.get_header_value(kRequestTimeoutHeader);  // held: read as a view
        const absl::StatusOr<absl::Time> deadline = RequestDeadline(
            start, timeout,
            req.has_header(kRequestTimeoutHeader) ? std::optional<std::string_view>(asked) : std::nullopt);
        if (!body.ok()) {
          readable = false;
          answer = body.status();
        } else if (!deadline.ok()) {
          answer = deadline.status();
        } else {
          HttpCall call;
          call.cancel = std::make_shared<std::atomic<bool>>(false);
          call.context.cancelled = call.cancel;
          call.context.deadline = *deadline;
          call.timeout = *deadline - start;
          auto watch = std::make_shared<ClientWatch>(req.remote_addr, req.remote_port, req.local_port);
          call.client_gone = [watch] { return watch->Gone(); };
          try {
            answer = route.handle(*body, call, &model);
          } catch (const json::exception& e) {  // a conversion the parsers did not foresee
            answer = absl::InvalidArgumentError(absl::StrCat("the request could not be read: ", e.what()));
          } catch (const std::exception& e) {
            answer = absl::InternalError(absl::StrCat("internal error: ", e.what()));
          }
        }
      }
      if (answer.ok()) {
        res.status = 200;
        if (!answer->is_null()) res.set_content(DumpJson(*answer), "application/json");
      } else {
        SetError(answer.status(), route.errors, res);
      }
      if (self->metrics_ != nullptr) {
        const std::string label = readable ? self->tracker_.MetricsModelLabel(model) : kUnknownModelLabel;
        self->metrics_->RecordRequest(label, route.name(), CodeName(answer.status().code()),
                                      absl::ToDoubleSeconds(absl::Now() - start));
      }
      self->tracker_.CallDone();
    };
    if (route.method == "POST") {
      s.Post(route.path, handler);
    } else {
      s.Get(route.path, handler);
    }
  }
  // What httplib answers itself (no such route, a body over the limit, a malformed request)
  // gets a JSON error in the style of the path's API.
  s.set_error_handler(httplib::Server::HandlerWithResponse([max = config.max_body_bytes](const httplib::Request& req,
                                                                                       httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    absl::Status status;
    if (res.status == 413) {
      status = absl::InvalidArgumentError(
          absl::StrCat("the request body is larger than the limit of ", max, " bytes (--max-message-bytes)"));
    } else if (res.status == 404) {
      status = absl::NotFoundError(absl::StrCat("no route ", req.method, " ", req.path));
    } else {
      status = absl::InvalidArgumentError(absl::StrCat("the request could not be read (HTTP ", res.status, ")"));
    }
    const int code = res.status;
    SetError(WithHttpStatus(status, code), StyleOfPath(req.path), res);
    return httplib::Server::HandlerResponse::Handled;
  }));

  if (config.port == 0) {
    http->port_ = s.bind_to_any_port(config.host);
  } else {
    http->port_ = s.bind_to_port(config.host, config.port) ? config.port : -1;
  }
  if (http->port_ <= 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen for HTTP on ", config.host, ":", config.port));
  }
  http->impl_->listener = std::thread([self] {
    self->impl_->server.listen_after_bind();
    self->impl_->listener_done = true;
  });
  // Until the listener runs: httplib's stop() does nothing to a server not yet listening, and
  // the listener would then never end (a Stop right after Start would hang).
  while (!s.is_running() && !http->impl_->listener_done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return http;
}

void HttpServer::Stop() {
  std::lock_guard<std::mutex> lock(impl_->stop_mu);
  if (impl_->stopped) return;
  impl_->stopped = true;
  impl_->server.stop();
  if (impl_->listener.joinable()) impl_->listener.join();
}

}  // namespace relserve
