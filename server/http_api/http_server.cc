#include "server/http_api/http_server.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/http_api/cohere_api.h"
#include "server/http_api/http_status.h"
#include "server/http_api/json_fields.h"
#include "server/http_api/openai_api.h"
#include "server/http_api/request_deadline.h"
#include "server/http_api/tei_api.h"
#include "server/serving/status_labels.h"
#include "server/http_transport/web_server.h"

namespace relserve {
namespace {

using nlohmann::json;

// The error shape of a path the route table does not settle (an unknown path, or an error of
// the server itself before a route is found): by its prefix.
ErrorStyle StyleOfPath(const std::string& path) {
  if (path.rfind("/v2/", 0) == 0) return ErrorStyle::kCohere;
  return path.rfind("/v1/", 0) == 0 ? ErrorStyle::kOpenAI : ErrorStyle::kTei;
}

WebResponse JsonResponse(int status, const json& body) {
  WebResponse r;
  r.status = status;
  r.content_type = "application/json";
  r.body = DumpJson(body);
  return r;
}

WebResponse ErrorResponse(const absl::Status& status, ErrorStyle style) {
  switch (style) {
    case ErrorStyle::kOpenAI: {
      const int http = OpenAIHttpStatus(status);
      return JsonResponse(http, OpenAIErrorJson(status, http));
    }
    case ErrorStyle::kCohere: return JsonResponse(HttpStatusOf(status), CohereErrorJson(status));
    case ErrorStyle::kTei: break;
  }
  const int http = TeiHttpStatus(status);
  return JsonResponse(http, TeiErrorJson(status, http));
}

// The status the server's own refusals (framing, limits, timeouts) carry in the JSON error.
absl::Status StatusOfHttpError(int http_status, const std::string& message) {
  absl::Status status;
  switch (http_status) {
    case 404: status = absl::NotFoundError(message); break;
    case 500: status = absl::InternalError(message); break;
    case 501: status = absl::UnimplementedError(message); break;
    case 503: status = absl::UnavailableError(message); break;
    case 408: status = absl::DeadlineExceededError(message); break;
    default: status = absl::InvalidArgumentError(message); break;
  }
  return WithHttpStatus(status, http_status);
}

// An answer larger than --max-response-bytes, as gRPC refuses one (message_codec.cc).
absl::Status ResponseTooLarge(size_t bytes, size_t max_bytes) {
  return absl::InvalidArgumentError(absl::StrCat("the response would be ", bytes, " bytes, more than the largest ",
                                                 "response of ", max_bytes,
                                                 " bytes (--max-response-bytes); split the request"));
}

}  // namespace

struct HttpServer::Impl {
  std::unique_ptr<WebServer> web;
  // (path, method) -> route; a GET route answers HEAD too.
  std::map<std::pair<std::string, std::string>, HttpRoute> routes;
  std::map<std::string, std::string> allowed;  // path -> "GET, HEAD" / "POST"
  std::map<std::string, ErrorStyle> styles;    // path -> its routes' error shape

  ErrorStyle StyleOf(const std::string& path) const {
    auto it = styles.find(path);
    return it == styles.end() ? StyleOfPath(path) : it->second;
  }
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

void HttpServer::StartDraining() {
  tracker_.StartDraining();
  if (impl_->web) impl_->web->BeginDrain();
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerConfig& config, RouteContext context,
                                                              const ModelRegistry* registry, ServerMetrics* metrics) {
  std::unique_ptr<HttpServer> http(new HttpServer(registry, metrics));
  HttpServer* self = http.get();
  Impl* impl = http->impl_.get();
  for (HttpRoute& route : MakeHttpRoutes(context)) {
    std::string& allowed = impl->allowed[route.path];
    allowed += allowed.empty() ? "" : ", ";
    allowed += route.method == "GET" ? "GET, HEAD" : route.method;
    impl->styles.emplace(route.path, route.errors);
    impl->routes.emplace(std::make_pair(route.path, route.method), std::move(route));
  }
  const auto find_route = [impl](const HttpRequestHead& head) -> const HttpRoute* {
    const std::string method = head.method == "HEAD" ? "GET" : head.method;
    auto it = impl->routes.find({head.path, method});
    return it == impl->routes.end() ? nullptr : &it->second;
  };
  const ApiKeys* api_keys = config.api_keys;
  const absl::Duration timeout = config.request_timeout;

  WebHandlers handlers;
  // Before the body: the route, the API key and the drain, so that a caller without a key or
  // a request to a draining server never gets its body read.
  const auto serve_on_loop = std::make_shared<std::function<WebResponse(const WebRequest&, const HttpRoute&)>>();
  handlers.screen = [self, impl, find_route, api_keys, serve_on_loop](const WebRequest& req) -> std::optional<WebResponse> {
    const HttpRequestHead& head = req.head;
    const ErrorStyle style = impl->StyleOf(head.path);
    const HttpRoute* route = find_route(head);
    if (route == nullptr) {
      auto allowed = impl->allowed.find(head.path);
      if (allowed == impl->allowed.end()) {
        return ErrorResponse(absl::NotFoundError(absl::StrCat("no route ", head.method, " ", head.path)), style);
      }
      WebResponse r = ErrorResponse(
          WithHttpStatus(absl::InvalidArgumentError(absl::StrCat(head.path, " takes ", allowed->second, ", not ",
                                                                 head.method)),
                         405),
          style);
      r.headers.emplace_back("Allow", allowed->second);
      return r;
    }
    absl::Status refused;
    bool unauthenticated = false;
    if (api_keys != nullptr && !route->open) {
      refused = api_keys->Check(req.Header("authorization"));
      unauthenticated = !refused.ok();
    }
    if (refused.ok() && self->tracker_.draining()) refused = absl::UnavailableError("the server is shutting down");
    if (refused.ok()) {
      // Bodies are read as they come: a compressed one would be parsed as garbage JSON.
      const std::optional<std::string_view> header = req.Header("content-encoding");
      const std::string encoding(header.value_or("identity"));
      if (!absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(encoding), "identity")) {
        refused = WithHttpStatus(absl::InvalidArgumentError(absl::StrCat(
                                     "Content-Encoding ", encoding,
                                     " is not supported: send the request body uncompressed")),
                                 415);
      }
    }
    if (refused.ok()) {
      if (route->on_loop && req.head.method != "POST") return (*serve_on_loop)(req, *route);
      return std::nullopt;
    }
    if (self->metrics_ != nullptr) {
      if (unauthenticated) self->metrics_->RecordUnauthenticated("http");
      self->metrics_->RecordRequest(kUnknownModelLabel, route->name(), CodeName(refused.code()), 0);
    }
    WebResponse r = ErrorResponse(refused, route->errors);
    if (unauthenticated) r.headers.emplace_back("WWW-Authenticate", "Bearer");
    return r;
  };
  // A call from its start to its answer, shared by the handler that starts it, the serving
  // layer's callback and the event loop's deadline: whichever comes first answers, once.
  struct Call {
    const HttpRoute* route = nullptr;
    absl::Time start;
    std::string model;      // written by the route's handler before its serving call starts
    bool readable = true;   // false: the body could not be read, so no model is known
    std::atomic<bool> answered{false};
  };
  // The answer's response, counted in the metrics; nullopt when the call was answered already.
  // The caller ends the call (CallDone), then hands the response on.
  const auto conclude = [self, max_response = config.max_response_bytes](
                            Call& call, absl::StatusOr<HttpAnswer> answer) -> std::optional<WebResponse> {
    if (call.answered.exchange(true)) return std::nullopt;
    WebResponse response;
    if (answer.ok()) {
      response.status = answer->status;
      if (answer->text.has_value()) {
        response.content_type = answer->content_type;
        response.body = std::move(*answer->text);
      } else if (!answer->json.is_null()) {
        response.content_type = "application/json";
        response.body = DumpJson(answer->json);
      }
      response.headers = std::move(answer->headers);
      // What is sent is what counts: JSON writes floats and ids as text, several times their
      // binary size, so the serving layer's estimate cannot settle it.
      if (max_response > 0 && response.body.size() > max_response) {
        answer = ResponseTooLarge(response.body.size(), max_response);
      }
    }
    if (!answer.ok()) response = ErrorResponse(answer.status(), call.route->errors);
    if (self->metrics_ != nullptr) {
      const std::string label = call.readable ? self->tracker_.MetricsModelLabel(call.model) : kUnknownModelLabel;
      self->metrics_->RecordRequest(label, call.route->name(), CodeName(answer.status().code()),
                                    absl::ToDoubleSeconds(absl::Now() - call.start));
    }
    return response;
  };
  // Starts a route's call (on a handler thread, or, for an on_loop route, on the loop thread);
  // `answer` gets its response, from whichever thread finishes it. No thread waits for the
  // serving layer: its callback continues on a handler thread (`resume`), and the call's
  // deadline is the event loop's (`deadline`).
  using Resume = std::function<void(std::function<void()>)>;
  using Deadline = std::function<void(absl::Time, std::function<std::optional<WebResponse>()>)>;
  const auto serve = [self, timeout, conclude](const WebRequest& req, const HttpRoute& route,
                                               const std::shared_ptr<const std::atomic<bool>>& gone,
                                               std::function<void(WebResponse)> answer, Resume resume,
                                               Deadline deadline) {
    auto call = std::make_shared<Call>();
    call->route = &route;
    call->start = absl::Now();
    self->tracker_.CallStarted();
    const HttpDone done = [self, call, conclude, answer](absl::StatusOr<HttpAnswer> a) {
      if (std::optional<WebResponse> r = conclude(*call, std::move(a))) {
        self->tracker_.CallDone();  // before the client can see the answer, as in_flight() promises
        answer(std::move(*r));
      }
    };
    if (self->tracker_.draining()) return done(absl::UnavailableError("the server is shutting down"));
    absl::StatusOr<json> body = json::object();
    if (route.method == "POST") body = ParseJsonObject(req.body);
    const std::optional<std::string_view> asked = req.Header(kRequestTimeoutHeader);
    const absl::StatusOr<absl::Time> until = RequestDeadline(call->start, timeout, asked);
    if (!body.ok()) {
      call->readable = false;
      return done(body.status());
    }
    if (!until.ok()) return done(until.status());
    HttpCall http;
    http.start = call->start;
    http.context.cancelled = gone;  // the client's close cancels the call
    http.context.deadline = *until;
    if (resume) {
      // What the serving layer's callback continues with runs here, its exceptions answered.
      http.resume = [resume, done](std::function<void()> work) {
        resume([work = std::move(work), done] {
          try {
            work();
          } catch (const json::exception& e) {
            done(absl::InvalidArgumentError(absl::StrCat("the request could not be read: ", e.what())));
          } catch (const std::exception& e) {
            done(absl::InternalError(absl::StrCat("internal error: ", e.what())));
          }
        });
      };
    }
    try {
      route.handle(*body, http, &call->model, done);
    } catch (const json::exception& e) {  // a conversion the parsers did not foresee
      done(absl::InvalidArgumentError(absl::StrCat("the request could not be read: ", e.what())));
    } catch (const std::exception& e) {
      done(absl::InternalError(absl::StrCat("internal error: ", e.what())));
    }
    // Set after the handler (which writes call->model): an answer may already be on its way.
    // Its queued sequences expire with the same deadline in the batcher (counted there as
    // rejected for deadline_exceeded); a batch already running is not interrupted.
    if (deadline && *until != absl::InfiniteFuture() && !call->answered.load()) {
      const absl::Duration limit = *until - call->start;
      deadline(*until, [self, call, conclude, limit]() {
        std::optional<WebResponse> r = conclude(
            *call, absl::DeadlineExceededError(absl::StrCat(
                       "the request did not finish within its timeout of ", absl::FormatDuration(limit),
                       " (--http-request-timeout, or the request's ", kRequestTimeoutHeader, " header)")));
        if (r.has_value()) self->tracker_.CallDone();  // the loop writes it as soon as this returns
        return r;
      });
    }
  };
  // GET routes answer before their handler returns.
  *serve_on_loop = [serve](const WebRequest& req, const HttpRoute& route) {
    static const auto kNeverGone = std::make_shared<const std::atomic<bool>>(false);
    std::optional<WebResponse> response;
    serve(req, route, kNeverGone, [&response](WebResponse r) { response = std::move(r); }, nullptr, nullptr);
    if (!response.has_value()) return ErrorResponse(absl::InternalError("the route did not answer"), route.errors);
    return std::move(*response);
  };
  handlers.start = [impl, find_route, serve](const WebRequest& req, const std::shared_ptr<const std::atomic<bool>>& gone,
                                             const WebResponder& respond) {
    const HttpRoute* route = find_route(req.head);
    if (route == nullptr) {
      return respond.Respond(ErrorResponse(absl::NotFoundError("no route"), impl->StyleOf(req.head.path)));
    }
    serve(
        req, *route, gone, [respond](WebResponse r) { respond.Respond(std::move(r)); },
        [respond](std::function<void()> work) { respond.RunOnHandlerThread(std::move(work)); },
        [respond](absl::Time until, std::function<std::optional<WebResponse>()> late) {
          const auto left = absl::ToChronoNanoseconds(std::max(until - absl::Now(), absl::ZeroDuration()));
          respond.RespondBy(std::chrono::steady_clock::now() + left, std::move(late));
        });
  };
  // What the server refuses itself (malformed requests, limits, timeouts) is a JSON error in the
  // style of the path's API.
  handlers.error = [impl, max = config.max_body_bytes](int status, const std::string& message,
                                                       const HttpRequestHead* head) {
    std::string text = message;
    if (status == 413) absl::StrAppend(&text, " (--max-message-bytes ", max, ")");
    return ErrorResponse(StatusOfHttpError(status, text), impl->StyleOf(head != nullptr ? head->path : ""));
  };

  WebServerConfig wc;
  wc.name = "HTTP";
  wc.address = config.host;
  wc.port = config.port;
  wc.head_timeout = absl::ToChronoMilliseconds(config.header_timeout);
  wc.body_timeout = absl::ToChronoMilliseconds(config.read_timeout);
  wc.write_timeout = absl::ToChronoMilliseconds(config.write_timeout);
  wc.keep_alive_timeout = absl::ToChronoMilliseconds(config.keep_alive_timeout);
  wc.keep_alive_max_requests = std::max(1, config.keep_alive_max_requests);
  wc.max_body_bytes = config.max_body_bytes;
  wc.max_connections = config.max_connections;
  wc.max_connections_per_peer = config.max_connections_per_client;
  wc.handler_threads = std::max(1, config.threads);
  auto web = WebServer::Start(wc, std::move(handlers));
  if (!web.ok()) return web.status();
  impl->web = std::move(*web);
  http->port_ = impl->web->port();
  return http;
}

WebServerStats HttpServer::connection_stats() const {
  return impl_->web ? impl_->web->stats() : WebServerStats{};
}

void HttpServer::Stop() {
  if (impl_->web) impl_->web->Stop();
}

}  // namespace relserve
