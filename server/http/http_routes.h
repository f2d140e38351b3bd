#ifndef RELSERVE_SERVER_HTTP_HTTP_ROUTES_H_
#define RELSERVE_SERVER_HTTP_HTTP_ROUTES_H_

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
#include "server/http/tei_api.h"
#include "server/serving/encoder_serving.h"

namespace relserve {

// How a route's errors look: OpenAI's {"error": {...}} (routes under /v1/ and /embeddings),
// TEI's {"error", "error_type"}, or Cohere's {"message"} (/v2/ and /v1/embed).
enum class ErrorStyle { kOpenAI, kTei, kCohere };

// What a route's handler knows of its call: the serving layer's context (its deadline
// included), and whether the client is still there (checked while the call waits; a client
// gone sets `cancel`, which drops its queued sequences).
struct HttpCall {
  absl::Time start = absl::Now();  // when a server thread took the call (TEI's x-compute-time)
  CallContext context;
  std::shared_ptr<std::atomic<bool>> cancel;  // the flag context.cancelled reads
  std::function<bool()> client_gone;          // may be empty
  absl::Duration timeout = absl::InfiniteDuration();  // what context.deadline came from, for messages
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

// One route of the JSON API: a thin adapter from JSON to the serving layer and back. `handle`
// gets the parsed body (an empty object for GET), answers the response and sets *model to the
// model the request named ("" for the default). An `open` route is served without an API key
// (health checks); every other one needs it when keys are set.
struct HttpRoute {
  std::string method;  // "GET", "POST"
  std::string path;
  ErrorStyle errors;
  std::function<absl::StatusOr<HttpAnswer>(const nlohmann::json& body, const HttpCall& call, std::string* model)>
      handle;
  bool open = false;
  // Answered on the HTTP server's event loop as soon as its head is read, never queued behind
  // the handler threads that API calls may hold: every GET route (health, readiness, metrics,
  // model lists, /info), whose handlers never block.
  bool on_loop = false;
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
// /tokenize, /info and /health (the one open route), Cohere's and Jina's /v1/rerank. The handlers block until the
// serving layer answers (they run on the HTTP server's own threads), or until the call's
// deadline: then they answer DEADLINE_EXCEEDED at once, and the serving layer, which has the
// same deadline, drops the call's sequences still queued (a batch already running finishes,
// its answer unused).
std::vector<HttpRoute> MakeHttpRoutes(const RouteContext& context);

}  // namespace relserve

#endif  // RELSERVE_SERVER_HTTP_HTTP_ROUTES_H_
