#ifndef RELSERVE_SERVER_HTTP_API_HTTP_ROUTES_H_
#define RELSERVE_SERVER_HTTP_API_HTTP_ROUTES_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "server/http_api/tei_api.h"
#include "server/serving/encoder_serving.h"

namespace relserve {

// How a route's errors look: OpenAI's {"error": {...}} (routes under /v1/ and /embeddings),
// TEI's {"error", "error_type"}, or Cohere's {"message"} (/v2/ and /v1/embed).
enum class ErrorStyle { kOpenAI, kTei, kCohere };

// What a route's handler knows of its call: the serving layer's context, with its deadline and
// its cancel flag (the HTTP server's client-gone flag: a client that closes its connection
// cancels the call, which drops its queued sequences), and where to continue once the serving
// layer answers.
struct HttpCall {
  absl::Time start = absl::Now();  // when a server thread took the call (TEI's x-compute-time)
  CallContext context;
  // Runs work on one of the HTTP server's handler threads (the serving layer answers on a
  // batcher's worker, which must not spend its time writing JSON). Empty: on the calling thread.
  std::function<void(std::function<void()>)> resume;
};

// What a route answers: JSON (null: an empty body) with status 200, or, where a route needs
// them, response headers (TEI's x-compute-time, ...) and a body that is not JSON (/metrics).
struct HttpAnswer {
  HttpAnswer() = default;
  HttpAnswer(nlohmann::json j) : json(std::move(j)) {}  // NOLINT: a plain JSON answer converts
  int status = 200;
  nlohmann::json json;                   // the body, unless `text` is set
  std::optional<std::string> text;       // a body that is not JSON, of type `content_type`
  std::string content_type;              // with `text`
  std::vector<std::pair<std::string, std::string>> headers;
};

// How a route answers: once, from any thread.
using HttpDone = std::function<void(absl::StatusOr<HttpAnswer>)>;

// One route of the JSON API: a thin adapter from JSON to the serving layer and back. `handle`
// gets the parsed body (an empty object for GET), sets *model to the model the request named
// ("" for the default) before it starts a serving call, starts that call and returns; the
// call's callback answers through `done`, never a thread waiting for it. A GET route answers
// before `handle` returns. An `open` route is served without an API key (health checks); every
// other one needs it when keys are set.
struct HttpRoute {
  std::string method;  // "GET", "POST"
  std::string path;
  ErrorStyle errors;
  std::function<void(const nlohmann::json& body, const HttpCall& call, std::string* model, HttpDone done)> handle;
  bool open = false;
  // Answered on the HTTP server's event loop as soon as its head is read, never queued behind
  // the handler threads that API calls may hold: every GET route (health, readiness, metrics,
  // model lists, /info), whose handlers never block.
  bool on_loop = false;
  // Its OpenAPI operation (openapi_document.h), from which the document's paths are generated.
  std::string openapi;
  std::string name() const { return method + " " + path; }  // the `rpc` label of its metrics
};

struct RouteContext {
  const EncoderServing* serving = nullptr;
  std::function<bool()> healthy;  // /health: whether the server reports SERVING
  ServerLimitsInfo limits;        // /info
  int64_t started_unix_seconds = 0;  // /v1/models' `created`
  // GET /metrics on the API port: the metrics port's Prometheus text (null: no such route),
  // served without an API key unless `metrics_need_key` (--metrics-api-key-required).
  std::function<std::string()> metrics_text;
  bool metrics_need_key = false;
};

// Every route: OpenAI's /v1/embeddings and /v1/models, TEI's /embed, /rerank, /predict,
// /tokenize, /info and /health (the one open route), Cohere's and Jina's /v1/rerank. The
// handlers start the serving layer's asynchronous call and return; its answer comes back
// through `done`. The HTTP server answers DEADLINE_EXCEEDED at the call's deadline if the
// answer has not come (http_server.cc), and the serving layer, which has the same deadline,
// drops the call's sequences still queued (a batch already running finishes, its answer
// unused).
std::vector<HttpRoute> MakeHttpRoutes(const RouteContext& context);

}  // namespace relserve

#endif  // RELSERVE_SERVER_HTTP_API_HTTP_ROUTES_H_
