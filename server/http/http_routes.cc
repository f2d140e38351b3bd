#include "server/http/http_routes.h"

#include <algorithm>
#include <chrono>
#include <future>
#include <memory>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/http/cohere_api.h"
#include "server/http/hf_inference_api.h"
#include "server/http/infinity_api.h"
#include "server/http/json_fields.h"
#include "server/http/openai_api.h"
#include "server/http/openapi_document.h"
#include "server/http/request_deadline.h"
#include "server/http/token_classification_api.h"
#include "server/util/field_error.h"

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

// An error about the serving layer's field `from` (its message starting with the name, its
// field path rooted there) told with the name the route's request uses, `to`.
absl::Status RenameField(const absl::Status& s, const std::string& from, const std::string& to) {
  const std::optional<FieldErrorDetail> detail = FieldErrorOf(s);
  const std::string message(s.message());
  if (!detail.has_value() || FieldRoot(detail->field) != from || message.rfind(from, 0) != 0) return s;
  absl::Status renamed(s.code(), absl::StrCat(to, message.substr(from.size())));
  s.ForEachPayload([&](absl::string_view url, const absl::Cord& payload) { renamed.SetPayload(url, payload); });
  return WithFieldError(std::move(renamed), detail->kind, absl::StrCat(to, detail->field.substr(from.size())));
}

// The serving layer names Rerank's documents "documents"; TEI's request calls them "texts".
absl::Status AsTeiRerankStatus(const absl::Status& s) { return RenameField(s, "documents", "texts"); }

using Answer = absl::StatusOr<HttpAnswer>;

int64_t Characters(const std::vector<Input>& inputs) {
  int64_t n = 0;
  for (const Input& in : inputs) n += CountCharacters(in);
  return n;
}

// A JSON answer with TEI's x-compute-* headers.
HttpAnswer WithTeiHeaders(json body, const HttpCall& call, int64_t characters, const Usage& usage,
                          const Timing& timing) {
  HttpAnswer answer(std::move(body));
  answer.headers = TeiComputeHeaders(characters, usage.tokens, timing, absl::Now() - call.start);
  return answer;
}

// LangChain's OpenAIEmbeddings (Python) tokenizes with tiktoken and sends OpenAI's token ids,
// which mean nothing to another vocabulary: say how to make it send text.
absl::Status WithTokenIdHint(const absl::Status& s, const std::vector<Input>& inputs) {
  const std::optional<FieldErrorDetail> detail = FieldErrorOf(s);
  if (!detail.has_value() || detail->kind != FieldErrorKind::kOutOfVocabulary) return s;
  bool ids = false;
  for (const Input& in : inputs) ids = ids || in.kind == Input::Kind::kTokens;
  if (!ids) return s;
  absl::Status hinted(s.code(), absl::StrCat(s.message(),
                                             "; token ids are the model's own: a client that sends another "
                                             "tokenizer's ids (LangChain's OpenAIEmbeddings sends tiktoken's) must "
                                             "send text instead (OpenAIEmbeddings(check_embedding_ctx_length=False))"));
  s.ForEachPayload([&](absl::string_view url, const absl::Cord& payload) { hinted.SetPayload(url, payload); });
  return hinted;
}

class Routes {
 public:
  explicit Routes(const RouteContext& c) : c_(c), serving_(c.serving) {}

  Answer OpenAIEmbed(const json& body, const HttpCall& call, std::string* model) const {
    auto request = ParseOpenAIEmbeddings(body);
    if (!request.ok()) return request.status();
    *model = request->embed.model;
    auto result = Await<EmbedResult>(
        call, [&](auto done) { serving_->Embed(request->embed, call.context, std::move(done)); });
    if (!result.ok()) return WithTokenIdHint(result.status(), request->embed.inputs);
    return WithTeiHeaders(OpenAIEmbeddingsJson(*result, request->base64), call, Characters(request->embed.inputs),
                          result->usage, result->timing);
  }

  Answer OpenAIModels() const { return HttpAnswer(OpenAIModelsJson(serving_->ListModels(), c_.started_unix_seconds)); }

  Answer CohereRerank(const json& body, const HttpCall& call, std::string* model) const {
    auto request = ParseCohereRerank(body);
    if (!request.ok()) return request.status();
    *model = request->model;
    auto result = Await<RerankResult>(call, [&](auto done) { serving_->Rerank(*request, call.context, std::move(done)); });
    if (!result.ok()) return result.status();
    return HttpAnswer(CohereRerankJson(*result));
  }

  Answer CohereV2Rerank(const json& body, const HttpCall& call, std::string* model) const {
    auto request = ParseCohereV2Rerank(body);
    if (!request.ok()) return request.status();
    *model = request->model;
    auto result = Await<RerankResult>(call, [&](auto done) { serving_->Rerank(*request, call.context, std::move(done)); });
    if (!result.ok()) return result.status();
    return HttpAnswer(CohereV2RerankJson(*result, RandomUuid()));
  }

  Answer CohereEmbed(const json& body, const HttpCall& call, std::string* model, bool v2) const {
    auto request = ParseCohereEmbed(body, v2);
    if (!request.ok()) return request.status();
    *model = request->embed.model;
    if (!request->input_type.empty()) {
      auto described = serving_->DescribeModel(request->embed.model);
      if (!described.ok()) return described.status();
      request->embed.prompt_name = CoherePromptName(request->input_type, described->prompt_names);
    }
    auto result = Await<EmbedResult>(
        call, [&](auto done) { serving_->Embed(request->embed, call.context, std::move(done)); });
    // Cohere v2 calls the serving layer's `dimensions` output_dimension.
    if (!result.ok()) return v2 ? RenameField(result.status(), "dimensions", "output_dimension") : result.status();
    return HttpAnswer(CohereEmbedJson(*request, *result, v2, RandomUuid()));
  }

  Answer TeiEmbed(const json& body, const HttpCall& call, std::string* model) const {
    auto request = ParseTeiEmbed(body);
    if (!request.ok()) return request.status();
    if (absl::Status s = ReadTeiModel(body, &request->model); !s.ok()) return s;
    *model = request->model;
    auto result = Await<EmbedResult>(call, [&](auto done) { serving_->Embed(*request, call.context, std::move(done)); });
    if (!result.ok()) return result.status();
    return WithTeiHeaders(TeiEmbedJson(*result), call, Characters(request->inputs), result->usage, result->timing);
  }

  Answer TeiSimilarity(const json& body, const HttpCall& call, std::string* model) const {
    auto request = ParseTeiSimilarity(body);
    if (!request.ok()) return request.status();
    // The source sentence is embedded beside the sentences: one input of the request's limit.
    const size_t sentences = request->inputs.size() - 1;
    const int limit = c_.limits.max_client_batch_size;
    if (limit > 0 && sentences + 1 > static_cast<size_t>(limit)) {
      return FieldError(FieldErrorKind::kTooMany, "inputs.sentences", absl::StrCat(
          "inputs.sentences has ", sentences, " entries, more than the limit of ", limit - 1,
          " per request (", limit, " texts with the source sentence; split the request)"));
    }
    if (absl::Status s = ReadTeiModel(body, &request->model); !s.ok()) return s;
    *model = request->model;
    auto result = Await<EmbedResult>(call, [&](auto done) { serving_->Embed(*request, call.context, std::move(done)); });
    if (!result.ok()) return result.status();
    return WithTeiHeaders(TeiSimilarityJson(*result), call, Characters(request->inputs), result->usage,
                          result->timing);
  }

  Answer TeiEmbedSparse(const json& body, const HttpCall& call, std::string* model) const {
    auto request = ParseTeiEmbedSparse(body);
    if (!request.ok()) return request.status();
    *model = request->model;
    auto result = Await<EmbedResult>(call, [&](auto done) { serving_->Embed(*request, call.context, std::move(done)); });
    if (!result.ok()) return result.status();
    return WithTeiHeaders(TeiEmbedSparseJson(*result), call, Characters(request->inputs), result->usage,
                          result->timing);
  }

  // ColBERT-style token vectors: the model's projection where it has one (bge-m3's
  // colbert_linear), else every token's last hidden state, normalised.
  Answer MultiVector(const json& body, const HttpCall& call, std::string* model) const {
    auto request = ParseMultiVector(body);
    if (!request.ok()) return request.status();
    *model = request->model;
    auto described = serving_->DescribeModel(request->model);
    if (!described.ok()) return described.status();
    if (!described->multi_vector_kind.empty()) {
      auto result =
          Await<EmbedResult>(call, [&](auto done) { serving_->Embed(*request, call.context, std::move(done)); });
      if (!result.ok()) return result.status();
      return WithTeiHeaders(MultiVectorJson(*result), call, Characters(request->inputs), result->usage,
                            result->timing);
    }
    if (request->whole_input.value_or(false)) {
      return absl::InvalidArgumentError("whole_input applies to models with a multi-vector head only");
    }
    EmbedTokensRequest tokens;
    tokens.model = request->model;
    tokens.inputs = request->inputs;
    tokens.truncation = request->truncation;
    if (!request->prompt_name.empty()) {
      return absl::InvalidArgumentError("prompt_name applies to models with a multi-vector head only");
    }
    auto result = Await<EmbedTokensResult>(
        call, [&](auto done) { serving_->EmbedTokens(tokens, call.context, std::move(done)); });
    if (!result.ok()) return result.status();
    return WithTeiHeaders(NormalizedTokenStatesJson(*result), call, Characters(tokens.inputs), result->usage,
                          result->timing);
  }

  Answer ZeroShot(const json& body, const HttpCall& call, std::string* model) const {
    auto request = ParseZeroShot(body);
    if (!request.ok()) return request.status();
    *model = request->zero_shot.model;
    auto result = Await<ZeroShotResult>(
        call, [&](auto done) { serving_->ZeroShotClassify(request->zero_shot, call.context, std::move(done)); });
    if (!result.ok()) return result.status();
    int64_t characters = 0;
    for (const std::string& s : request->zero_shot.sequences) {
      characters += CountCharacters(Input::Text(s)) * static_cast<int64_t>(request->zero_shot.candidate_labels.size());
    }
    return WithTeiHeaders(ZeroShotJson(*result, request->batch), call, characters, result->usage, result->timing);
  }

  // The Hugging Face Inference API's token-classification task.
  Answer TokenClassification(const json& body, const HttpCall& call, std::string* model) const {
    auto request = ParseTokenClassification(body);
    if (!request.ok()) return request.status();
    *model = request->request.model;
    auto result = Await<TokenClassifyResult>(
        call, [&](auto done) { serving_->ClassifyTokens(request->request, call.context, std::move(done)); });
    if (!result.ok()) return result.status();
    int64_t characters = 0;
    for (const std::string& s : request->request.texts) characters += CountCharacters(Input::Text(s));
    return WithTeiHeaders(TokenClassificationJson(*result, request->request.aggregation_strategy, request->batch), call,
                          characters, result->usage, result->timing);
  }

  Answer TeiEmbedAll(const json& body, const HttpCall& call, std::string* model) const {
    auto request = ParseTeiEmbedAll(body);
    if (!request.ok()) return request.status();
    *model = request->model;
    auto result = Await<EmbedTokensResult>(
        call, [&](auto done) { serving_->EmbedTokens(*request, call.context, std::move(done)); });
    if (!result.ok()) return result.status();
    return WithTeiHeaders(TeiEmbedAllJson(*result), call, Characters(request->inputs), result->usage,
                          result->timing);
  }

  // TEI's `texts`, or Infinity's `documents` (then Infinity's answer).
  Answer TeiRerank(const json& body, const HttpCall& call, std::string* model) const {
    if (!FieldAbsent(body, "texts") && !FieldAbsent(body, "documents")) {
      return FieldError(FieldErrorKind::kInvalid, "documents",
                        "texts and documents are both set: send TEI's texts or Infinity's documents, not both");
    }
    const bool infinity = FieldAbsent(body, "texts") && !FieldAbsent(body, "documents");
    absl::StatusOr<RerankRequest> request = infinity ? ParseInfinityRerank(body) : ParseTeiRerank(body);
    if (!request.ok()) return request.status();
    if (absl::Status s = ReadTeiModel(body, &request->model); !s.ok()) return s;
    *model = request->model;
    auto result = Await<RerankResult>(call, [&](auto done) { serving_->Rerank(*request, call.context, std::move(done)); });
    if (!result.ok()) return infinity ? result.status() : AsTeiRerankStatus(result.status());
    int64_t characters = 0;
    const int64_t query = CountCharacters(Input::Text(request->query));
    for (const std::string& d : request->documents) characters += query + CountCharacters(Input::Text(d));
    json answer = infinity ? InfinityRerankJson(*result, request->return_documents, RandomUuid(),
                                                absl::ToUnixSeconds(absl::Now()))
                           : TeiRerankJson(*result);
    return WithTeiHeaders(std::move(answer), call, characters, result->usage, result->timing);
  }

  Answer TeiPredict(const json& body, const HttpCall& call, std::string* model) const {
    auto request = ParseTeiPredict(body);
    if (!request.ok()) return request.status();
    if (absl::Status s = ReadTeiModel(body, &request->classify.model); !s.ok()) return s;
    *model = request->classify.model;
    auto result = Await<ClassifyResult>(
        call, [&](auto done) { serving_->Classify(request->classify, call.context, std::move(done)); });
    if (!result.ok()) return result.status();
    return WithTeiHeaders(TeiPredictJson(*result, request->batch), call, Characters(request->classify.inputs),
                          result->usage, result->timing);
  }

  Answer InfinityClassify(const json& body, const HttpCall& call, std::string* model) const {
    auto request = ParseInfinityClassify(body);
    if (!request.ok()) return request.status();
    *model = request->model;
    auto result =
        Await<ClassifyResult>(call, [&](auto done) { serving_->Classify(*request, call.context, std::move(done)); });
    if (!result.ok()) return result.status();
    return HttpAnswer(InfinityClassifyJson(*result, RandomUuid(), absl::ToUnixSeconds(absl::Now())));
  }

  // POST / and /invocations: what the model is for, as TEI sets these routes up by its model's
  // type: an embedding model embeds, a one-label head reranks, a classifier predicts.
  Answer TeiByModelType(const json& body, const HttpCall& call, std::string* model) const {
    std::string name;
    if (absl::Status s = ReadTeiModel(body, &name); !s.ok()) return s;
    *model = name;
    auto described = serving_->DescribeModel(name);
    if (!described.ok()) return described.status();
    // The Inference API's token-classification task, where a token classifier is served.
    if (!described->token_labels.empty()) return TokenClassification(body, call, model);
    // The Inference API's zero-shot-classification task, where an NLI model is served.
    if (HasCandidateLabels(body)) {
      if (described->labels.size() >= 2) return ZeroShot(body, call, model);
      return WithFieldError(
          absl::FailedPreconditionError(absl::StrCat(
              "parameters.candidate_labels asks for zero-shot classification, which needs an NLI model (a classifier "
              "with an entailment label); model ", described->name, " is ",
              described->labels.empty() ? "an embedding model" : "a reranker (one label)")),
          FieldErrorKind::kInvalid, "parameters.candidate_labels");
    }
    if (described->labels.empty()) return TeiEmbed(body, call, model);
    if (described->labels.size() == 1) return TeiRerank(body, call, model);
    return TeiPredict(body, call, model);
  }

  Answer TeiTokenize(const json& body, const HttpCall& call, std::string* model) const {
    auto request = ParseTeiTokenize(body);
    if (!request.ok()) return request.status();
    if (absl::Status s = ReadTeiModel(body, &request->tokenize.model); !s.ok()) return s;
    *model = request->tokenize.model;
    auto result = serving_->Tokenize(request->tokenize, call.context);
    if (!result.ok()) return result.status();
    HttpAnswer answer;
    answer.text = TeiTokenizeText(request->tokenize, *result, request->add_special_tokens);
    answer.content_type = "application/json";
    return answer;
  }

  Answer TeiDecode(const json& body, std::string* model) const {
    auto request = ParseTeiDecode(body);
    if (!request.ok()) return request.status();
    *model = request->model;
    auto texts = serving_->Decode(request->model, request->ids, request->skip_special_tokens);
    if (!texts.ok()) return texts.status();
    return HttpAnswer(json(*texts));
  }

  Answer TeiInfo() const {
    auto m = serving_->DescribeModel("");
    if (!m.ok()) return absl::InternalError("the default model is not in the model list");
    ServerLimitsInfo l = c_.limits;
    l.max_input_length = m->max_length;
    return HttpAnswer(TeiInfoJson(*m, l));
  }

  Answer Health() const {
    if (c_.healthy && !c_.healthy()) return absl::UnavailableError("unhealthy");
    return HttpAnswer();
  }

  Answer Metrics() const {
    HttpAnswer answer;
    answer.text = c_.metrics_text();
    answer.content_type = "text/plain; version=0.0.4; charset=utf-8";
    return answer;
  }

  Answer OpenApi() const {
    HttpAnswer answer;
    answer.text = OpenApiDocument();
    answer.content_type = "application/json";
    return answer;
  }

 private:
  RouteContext c_;
  const EncoderServing* serving_;
};

}  // namespace

std::vector<HttpRoute> MakeHttpRoutes(const RouteContext& c) {
  auto r = std::make_shared<const Routes>(c);
  std::vector<HttpRoute> routes;
  using Handler = std::function<Answer(const json&, const HttpCall&, std::string*)>;
  auto add = [&routes](const char* method, const char* path, ErrorStyle errors, Handler handle, bool open = false) {
    routes.push_back({method, path, errors, std::move(handle), open, /*on_loop=*/std::string(method) == "GET"});
  };
  using namespace std::placeholders;
  // OpenAI (and Infinity's /embeddings, TEI's /embeddings: the same route without /v1)
  for (const char* path : {"/v1/embeddings", "/embeddings"}) {
    add("POST", path, ErrorStyle::kOpenAI, std::bind(&Routes::OpenAIEmbed, r, _1, _2, _3));
  }
  for (const char* path : {"/v1/models", "/models"}) {
    add("GET", path, ErrorStyle::kOpenAI, [r](const json&, const HttpCall&, std::string*) { return r->OpenAIModels(); });
  }

  // Cohere / Jina
  add("POST", "/v1/rerank", ErrorStyle::kOpenAI, std::bind(&Routes::CohereRerank, r, _1, _2, _3));
  add("POST", "/v2/rerank", ErrorStyle::kCohere, std::bind(&Routes::CohereV2Rerank, r, _1, _2, _3));
  add("POST", "/v2/embed", ErrorStyle::kCohere,
      [r](const json& b, const HttpCall& call, std::string* m) { return r->CohereEmbed(b, call, m, /*v2=*/true); });
  add("POST", "/v1/embed", ErrorStyle::kCohere,
      [r](const json& b, const HttpCall& call, std::string* m) { return r->CohereEmbed(b, call, m, /*v2=*/false); });

  // text-embeddings-inference
  add("POST", "/embed", ErrorStyle::kTei, std::bind(&Routes::TeiEmbed, r, _1, _2, _3));
  add("POST", "/embed_all", ErrorStyle::kTei, std::bind(&Routes::TeiEmbedAll, r, _1, _2, _3));
  add("POST", "/similarity", ErrorStyle::kTei, std::bind(&Routes::TeiSimilarity, r, _1, _2, _3));
  add("POST", "/embed_sparse", ErrorStyle::kTei, std::bind(&Routes::TeiEmbedSparse, r, _1, _2, _3));
  add("POST", "/embed_multi_vector", ErrorStyle::kTei, std::bind(&Routes::MultiVector, r, _1, _2, _3));
  // The Hugging Face Inference API's zero-shot-classification task.
  add("POST", "/zero-shot-classification", ErrorStyle::kTei, std::bind(&Routes::ZeroShot, r, _1, _2, _3));
  // The Hugging Face Inference API's token-classification task (named entities).
  add("POST", "/token-classification", ErrorStyle::kTei, std::bind(&Routes::TokenClassification, r, _1, _2, _3));
  add("POST", "/rerank", ErrorStyle::kTei, std::bind(&Routes::TeiRerank, r, _1, _2, _3));
  add("POST", "/predict", ErrorStyle::kTei, std::bind(&Routes::TeiPredict, r, _1, _2, _3));
  for (const char* path : {"/", "/invocations"}) {
    add("POST", path, ErrorStyle::kTei, std::bind(&Routes::TeiByModelType, r, _1, _2, _3));
  }
  add("POST", "/tokenize", ErrorStyle::kTei,
      [r](const json& b, const HttpCall& c, std::string* m) { return r->TeiTokenize(b, c, m); });
  add("POST", "/decode", ErrorStyle::kTei,
      [r](const json& b, const HttpCall&, std::string* m) { return r->TeiDecode(b, m); });
  add("GET", "/info", ErrorStyle::kTei, [r](const json&, const HttpCall&, std::string*) { return r->TeiInfo(); });
  // TEI's health routes: its own, the Inference API's (GET /) and SageMaker's (GET /ping).
  for (const char* path : {"/health", "/", "/ping"}) {
    add("GET", path, ErrorStyle::kTei, [r](const json&, const HttpCall&, std::string*) { return r->Health(); },
        /*open=*/true);
  }
  if (c.metrics_text) {
    add("GET", "/metrics", ErrorStyle::kTei, [r](const json&, const HttpCall&, std::string*) { return r->Metrics(); },
        /*open=*/!c.metrics_need_key);
  }
  // The API's description, open as TEI's (it holds nothing a caller could not read in the README).
  add("GET", "/api-doc/openapi.json", ErrorStyle::kTei,
      [r](const json&, const HttpCall&, std::string*) { return r->OpenApi(); }, /*open=*/true);

  // Infinity
  add("POST", "/classify", ErrorStyle::kTei, std::bind(&Routes::InfinityClassify, r, _1, _2, _3));
  return routes;
}

}  // namespace relserve
