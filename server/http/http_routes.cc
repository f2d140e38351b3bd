#include "server/http/http_routes.h"

#include <algorithm>
#include <chrono>
#include <future>
#include <memory>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/http/cohere_api.h"
#include "server/http/openai_api.h"
#include "server/http/request_deadline.h"
#include "server/tokenizer/tokenizer.h"

namespace relserve {
namespace {

using nlohmann::json;

// Waits for the serving layer's answer to an asynchronous call, cancelling it if the client
// goes away meanwhile (checked from 100 ms on, every 50 ms: most calls are answered sooner),
// and no longer than the call's deadline. The promise is shared with the callback, which may
// still be inside set_value when the waiter wakes up, or run after the waiter gave up.
template <typename T, typename Call>
absl::StatusOr<T> Await(const HttpCall& http, Call&& call) {
  auto promise = std::make_shared<std::promise<absl::StatusOr<T>>>();
  std::future<absl::StatusOr<T>> answer = promise->get_future();
  call([promise](absl::StatusOr<T> r) { promise->set_value(std::move(r)); });
  const absl::Time deadline = http.context.deadline;
  absl::Duration wait = absl::Milliseconds(100);
  for (;;) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      // Its queued sequences expire with the same deadline in the batcher (counted there as
      // rejected for deadline_exceeded); a batch already running is not interrupted.
      if (answer.wait_for(std::chrono::seconds(0)) == std::future_status::ready) return answer.get();
      return absl::DeadlineExceededError(
          absl::StrCat("the request did not finish within its timeout of ", absl::FormatDuration(http.timeout),
                       " (--http-request-timeout, or the request's ", kRequestTimeoutHeader, " header)"));
    }
    if (answer.wait_for(absl::ToChronoMilliseconds(std::min(wait, left)) + std::chrono::milliseconds(1)) ==
        std::future_status::ready) {
      return answer.get();
    }
    wait = absl::Milliseconds(50);
    if (http.cancel != nullptr && !http.cancel->load() && http.client_gone && http.client_gone()) {
      http.cancel->store(true);  // the serving layer answers CANCELLED once its sequences are dropped
    }
  }
}

// The serving layer names Rerank's documents "documents"; TEI's request calls them "texts".
absl::Status AsTeiRerankStatus(const absl::Status& s) {
  const std::string message(s.message());
  if (message.rfind("documents", 0) != 0) return s;
  absl::Status renamed(s.code(), absl::StrCat("texts", message.substr(9)));
  s.ForEachPayload([&](absl::string_view url, const absl::Cord& payload) { renamed.SetPayload(url, payload); });
  return renamed;
}

// The ids of the special tokens the model's tokenizer adds.
std::set<int32_t> TemplateTokenIds(const ModelRegistry* registry, const std::string& model) {
  std::set<int32_t> ids;
  if (registry == nullptr) return ids;
  auto m = registry->Find(model);
  if (!m.ok() || (*m)->tokenizer == nullptr) return ids;
  const Tokenizer& t = *(*m)->tokenizer;
  for (int id : {t.cls_id(), t.sep_id(), t.eos_id(), t.pad_id()}) {
    if (id >= 0) ids.insert(id);
  }
  return ids;
}

}  // namespace

std::vector<HttpRoute> MakeHttpRoutes(const RouteContext& c) {
  const EncoderServing* serving = c.serving;
  std::vector<HttpRoute> routes;

  // OpenAI
  routes.push_back({"POST", "/v1/embeddings", ErrorStyle::kOpenAI,
                    [serving](const json& body, const HttpCall& call, std::string* model) -> absl::StatusOr<json> {
                      auto request = ParseOpenAIEmbeddings(body);
                      if (!request.ok()) return request.status();
                      *model = request->embed.model;
                      auto result = Await<EmbedResult>(
                          call, [&](auto done) { serving->Embed(request->embed, call.context, std::move(done)); });
                      if (!result.ok()) return result.status();
                      return OpenAIEmbeddingsJson(*result, request->base64);
                    }});
  routes.push_back({"GET", "/v1/models", ErrorStyle::kOpenAI,
                    [serving, created = c.started_unix_seconds](const json&, const HttpCall&,
                                                                std::string*) -> absl::StatusOr<json> {
                      return OpenAIModelsJson(serving->ListModels(), created);
                    }});

  // Cohere / Jina
  routes.push_back({"POST", "/v1/rerank", ErrorStyle::kOpenAI,
                    [serving](const json& body, const HttpCall& call, std::string* model) -> absl::StatusOr<json> {
                      auto request = ParseCohereRerank(body);
                      if (!request.ok()) return request.status();
                      *model = request->model;
                      auto result = Await<RerankResult>(
                          call, [&](auto done) { serving->Rerank(*request, call.context, std::move(done)); });
                      if (!result.ok()) return result.status();
                      return CohereRerankJson(*result);
                    }});

  // text-embeddings-inference
  routes.push_back({"POST", "/embed", ErrorStyle::kTei,
                    [serving](const json& body, const HttpCall& call, std::string*) -> absl::StatusOr<json> {
                      auto request = ParseTeiEmbed(body);
                      if (!request.ok()) return request.status();
                      auto result = Await<EmbedResult>(
                          call, [&](auto done) { serving->Embed(*request, call.context, std::move(done)); });
                      if (!result.ok()) return result.status();
                      return TeiEmbedJson(*result);
                    }});
  routes.push_back({"POST", "/rerank", ErrorStyle::kTei,
                    [serving](const json& body, const HttpCall& call, std::string*) -> absl::StatusOr<json> {
                      auto request = ParseTeiRerank(body);
                      if (!request.ok()) return request.status();
                      auto result = Await<RerankResult>(
                          call, [&](auto done) { serving->Rerank(*request, call.context, std::move(done)); });
                      if (!result.ok()) return AsTeiRerankStatus(result.status());
                      return TeiRerankJson(*result);
                    }});
  routes.push_back({"POST", "/predict", ErrorStyle::kTei,
                    [serving](const json& body, const HttpCall& call, std::string*) -> absl::StatusOr<json> {
                      auto request = ParseTeiPredict(body);
                      if (!request.ok()) return request.status();
                      auto result = Await<ClassifyResult>(call, [&](auto done) {
                        serving->Classify(request->classify, call.context, std::move(done));
                      });
                      if (!result.ok()) return result.status();
                      return TeiPredictJson(*result, request->batch);
                    }});
  routes.push_back({"POST", "/tokenize", ErrorStyle::kTei,
                    [serving, registry = c.registry](const json& body, const HttpCall&,
                                                     std::string*) -> absl::StatusOr<json> {
                      auto request = ParseTeiTokenize(body);
                      if (!request.ok()) return request.status();
                      auto result = serving->Tokenize(request->tokenize);
                      if (!result.ok()) return result.status();
                      return TeiTokenizeJson(request->tokenize, *result, request->add_special_tokens,
                                             TemplateTokenIds(registry, result->model));
                    }});
  routes.push_back({"GET", "/info", ErrorStyle::kTei,
                    [serving, limits = c.limits](const json&, const HttpCall&,
                                                 std::string*) -> absl::StatusOr<json> {
                      for (const ModelDescription& m : serving->ListModels()) {
                        if (m.name != serving->default_model()) continue;
                        ServerLimitsInfo l = limits;
                        l.max_input_length = m.max_length;
                        return TeiInfoJson(m, l);
                      }
                      return absl::InternalError("the default model is not in the model list");
                    }});
  routes.push_back({"GET", "/health", ErrorStyle::kTei,
                    [healthy = c.healthy](const json&, const HttpCall&, std::string*) -> absl::StatusOr<json> {
                      if (healthy && !healthy()) return absl::UnavailableError("unhealthy");
                      return json(nullptr);
                    },
                    /*open=*/true});
  return routes;
}

}  // namespace relserve
