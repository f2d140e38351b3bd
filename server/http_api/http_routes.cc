#include "server/http_api/http_routes.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/http_api/cohere_api.h"
#include "server/http_api/hf_inference_api.h"
#include "server/http_api/infinity_api.h"
#include "server/http_api/json_fields.h"
#include "server/http_api/openai_api.h"
#include "server/http_api/openapi_document.h"
#include "server/http_api/request_deadline.h"
#include "server/http_api/token_classification_api.h"
#include "server/util/field_error.h"

namespace relserve {
namespace {

using nlohmann::json;

// The serving layer's callback for a call: `then` gets the answer on an HTTP handler thread
// (call.resume), never on the batcher's worker that computed it.
template <typename T, typename Then>
std::function<void(absl::StatusOr<T>)> OnHandlerThread(const HttpCall& call, Then then) {
  return [resume = call.resume, then = std::move(then)](absl::StatusOr<T> result) {
    if (!resume) return then(std::move(result));
    auto answer = std::make_shared<absl::StatusOr<T>>(std::move(result));
    resume([then, answer] { then(std::move(*answer)); });
  };
}

// A parsed request shared by the call's start and its callback.
template <typename T>
std::shared_ptr<const T> Share(T&& request) {
  return std::make_shared<const T>(std::move(request));
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
HttpAnswer WithTeiHeaders(json body, absl::Time start, int64_t characters, const Usage& usage, const Timing& timing) {
  HttpAnswer answer(std::move(body));
  answer.headers = TeiComputeHeaders(characters, usage.tokens, timing, absl::Now() - start);
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

  void OpenAIEmbed(const json& body, const HttpCall& call, std::string* model, HttpDone done) const {
    auto parsed = ParseOpenAIEmbeddings(body);
    if (!parsed.ok()) return done(parsed.status());
    auto request = Share(std::move(*parsed));
    *model = request->embed.model;
    serving_->Embed(request->embed, call.context,
                    OnHandlerThread<EmbedResult>(call, [request, start = call.start, done](auto result) {
                      if (!result.ok()) return done(WithTokenIdHint(result.status(), request->embed.inputs));
                      done(WithTeiHeaders(OpenAIEmbeddingsJson(*result, request->base64), start,
                                          Characters(request->embed.inputs), result->usage, result->timing));
                    }));
  }

  Answer OpenAIModels() const { return HttpAnswer(OpenAIModelsJson(serving_->ListModels(), c_.started_unix_seconds)); }

  void CohereRerank(const json& body, const HttpCall& call, std::string* model, HttpDone done) const {
    auto request = ParseCohereRerank(body);
    if (!request.ok()) return done(request.status());
    *model = request->model;
    serving_->Rerank(*request, call.context, OnHandlerThread<RerankResult>(call, [done](auto result) {
                       if (!result.ok()) return done(result.status());
                       done(HttpAnswer(CohereRerankJson(*result)));
                     }));
  }

  void CohereV2Rerank(const json& body, const HttpCall& call, std::string* model, HttpDone done) const {
    auto request = ParseCohereV2Rerank(body);
    if (!request.ok()) return done(request.status());
    *model = request->model;
    serving_->Rerank(*request, call.context, OnHandlerThread<RerankResult>(call, [done](auto result) {
                       if (!result.ok()) return done(result.status());
                       done(HttpAnswer(CohereV2RerankJson(*result, RandomUuid())));
                     }));
  }

  void CohereEmbed(const json& body, const HttpCall& call, std::string* model, bool v2, HttpDone done) const {
    auto parsed = ParseCohereEmbed(body, v2);
    if (!parsed.ok()) return done(parsed.status());
    *model = parsed->embed.model;
    if (!parsed->input_type.empty()) {
      auto described = serving_->DescribeModel(parsed->embed.model);
      if (!described.ok()) return done(described.status());
      parsed->embed.prompt_name = CoherePromptName(parsed->input_type, described->prompt_names());
    }
    auto request = Share(std::move(*parsed));
    serving_->Embed(request->embed, call.context, OnHandlerThread<EmbedResult>(call, [request, v2, done](auto result) {
                      // Cohere v2 calls the serving layer's `dimensions` output_dimension.
                      if (!result.ok()) {
                        return done(v2 ? RenameField(result.status(), "dimensions", "output_dimension")
                                       : result.status());
                      }
                      done(HttpAnswer(CohereEmbedJson(*request, *result, v2, RandomUuid())));
                    }));
  }

  // An embedding call answered with TEI's x-compute-* headers, its JSON written by `to_json`.
  template <typename ToJson>
  void TeiEmbedCall(std::shared_ptr<const EmbedRequest> request, const HttpCall& call, HttpDone done,
                    ToJson to_json) const {
    serving_->Embed(*request, call.context,
                    OnHandlerThread<EmbedResult>(call, [request, start = call.start, done, to_json](auto result) {
                      if (!result.ok()) return done(result.status());
                      done(WithTeiHeaders(to_json(*result), start, Characters(request->inputs), result->usage,
                                          result->timing));
                    }));
  }

  void TeiEmbed(const json& body, const HttpCall& call, std::string* model, HttpDone done) const {
    auto request = ParseTeiEmbed(body);
    if (!request.ok()) return done(request.status());
    if (absl::Status s = ReadTeiModel(body, &request->model); !s.ok()) return done(s);
    *model = request->model;
    TeiEmbedCall(Share(std::move(*request)), call, std::move(done),
                 [](const EmbedResult& r) { return TeiEmbedJson(r); });
  }

  void TeiSimilarity(const json& body, const HttpCall& call, std::string* model, HttpDone done) const {
    auto request = ParseTeiSimilarity(body);
    if (!request.ok()) return done(request.status());
    // The source sentence is embedded beside the sentences: one input of the request's limit.
    const size_t sentences = request->inputs.size() - 1;
    const int limit = c_.limits.max_client_batch_size;
    if (limit > 0 && sentences + 1 > static_cast<size_t>(limit)) {
      return done(FieldError(FieldErrorKind::kTooMany, "inputs.sentences", absl::StrCat(
          "inputs.sentences has ", sentences, " entries, more than the limit of ", limit - 1,
          " per request (", limit, " texts with the source sentence; split the request)")));
    }
    if (absl::Status s = ReadTeiModel(body, &request->model); !s.ok()) return done(s);
    *model = request->model;
    TeiEmbedCall(Share(std::move(*request)), call, std::move(done),
                 [](const EmbedResult& r) { return TeiSimilarityJson(r); });
  }

  void TeiEmbedSparse(const json& body, const HttpCall& call, std::string* model, HttpDone done) const {
    auto request = ParseTeiEmbedSparse(body);
    if (!request.ok()) return done(request.status());
    *model = request->model;
    TeiEmbedCall(Share(std::move(*request)), call, std::move(done),
                 [](const EmbedResult& r) { return TeiEmbedSparseJson(r); });
  }

  // ColBERT-style token vectors: the model's projection where it has one (bge-m3's
  // colbert_linear), else every token's last hidden state, normalised.
  void MultiVector(const json& body, const HttpCall& call, std::string* model, HttpDone done) const {
    auto request = ParseMultiVector(body);
    if (!request.ok()) return done(request.status());
    *model = request->model;
    auto described = serving_->DescribeModel(request->model);
    if (!described.ok()) return done(described.status());
    if (!described->info.multi_vector_kind.empty()) {
      return TeiEmbedCall(Share(std::move(*request)), call, std::move(done),
                          [](const EmbedResult& r) { return MultiVectorJson(r); });
    }
    if (request->whole_input.value_or(false)) {
      return done(absl::InvalidArgumentError("whole_input applies to models with a multi-vector head only"));
    }
    EmbedTokensRequest tokens;
    tokens.model = request->model;
    tokens.inputs = request->inputs;
    tokens.truncation = request->truncation;
    if (!request->prompt_name.empty()) {
      return done(absl::InvalidArgumentError("prompt_name applies to models with a multi-vector head only"));
    }
    TeiEmbedTokensCall(Share(std::move(tokens)), call, std::move(done),
                       [](const EmbedTokensResult& r) { return NormalizedTokenStatesJson(r); });
  }

  // A token-states call answered with TEI's x-compute-* headers.
  template <typename ToJson>
  void TeiEmbedTokensCall(std::shared_ptr<const EmbedTokensRequest> request, const HttpCall& call, HttpDone done,
                          ToJson to_json) const {
    serving_->EmbedTokens(
        *request, call.context,
        OnHandlerThread<EmbedTokensResult>(call, [request, start = call.start, done, to_json](auto result) {
          if (!result.ok()) return done(result.status());
          done(WithTeiHeaders(to_json(*result), start, Characters(request->inputs), result->usage, result->timing));
        }));
  }

  void ZeroShot(const json& body, const HttpCall& call, std::string* model, HttpDone done) const {
    auto parsed = ParseZeroShot(body);
    if (!parsed.ok()) return done(parsed.status());
    auto request = Share(std::move(*parsed));
    *model = request->zero_shot.model;
    serving_->ZeroShotClassify(
        request->zero_shot, call.context,
        OnHandlerThread<ZeroShotResult>(call, [request, start = call.start, done](auto result) {
          if (!result.ok()) return done(result.status());
          int64_t characters = 0;
          for (const std::string& s : request->zero_shot.sequences) {
            characters +=
                CountCharacters(Input::Text(s)) * static_cast<int64_t>(request->zero_shot.candidate_labels.size());
          }
          done(WithTeiHeaders(ZeroShotJson(*result, request->batch), start, characters, result->usage,
                              result->timing));
        }));
  }

  // The Hugging Face Inference API's token-classification task.
  void TokenClassification(const json& body, const HttpCall& call, std::string* model, HttpDone done) const {
    auto parsed = ParseTokenClassification(body);
    if (!parsed.ok()) return done(parsed.status());
    auto request = Share(std::move(*parsed));
    *model = request->request.model;
    serving_->ClassifyTokens(
        request->request, call.context,
        OnHandlerThread<TokenClassifyResult>(call, [request, start = call.start, done](auto result) {
          if (!result.ok()) return done(result.status());
          int64_t characters = 0;
          for (const std::string& s : request->request.texts) characters += CountCharacters(Input::Text(s));
          done(WithTeiHeaders(TokenClassificationJson(*result, request->request.aggregation_strategy, request->batch),
                              start, characters, result->usage, result->timing));
        }));
  }

  void TeiEmbedAll(const json& body, const HttpCall& call, std::string* model, HttpDone done) const {
    auto request = ParseTeiEmbedAll(body);
    if (!request.ok()) return done(request.status());
    *model = request->model;
    TeiEmbedTokensCall(Share(std::move(*request)), call, std::move(done),
                       [](const EmbedTokensResult& r) { return TeiEmbedAllJson(r); });
  }

  // TEI's `texts`, or Infinity's `documents` (then Infinity's answer).
  void TeiRerank(const json& body, const HttpCall& call, std::string* model, HttpDone done) const {
    if (!FieldAbsent(body, "texts") && !FieldAbsent(body, "documents")) {
      return done(FieldError(FieldErrorKind::kInvalid, "documents",
                             "texts and documents are both set: send TEI's texts or Infinity's documents, not both"));
    }
    const bool infinity = FieldAbsent(body, "texts") && !FieldAbsent(body, "documents");
    absl::StatusOr<RerankRequest> parsed = infinity ? ParseInfinityRerank(body) : ParseTeiRerank(body);
    if (!parsed.ok()) return done(parsed.status());
    if (absl::Status s = ReadTeiModel(body, &parsed->model); !s.ok()) return done(s);
    *model = parsed->model;
    auto request = Share(std::move(*parsed));
    serving_->Rerank(
        *request, call.context,
        OnHandlerThread<RerankResult>(call, [request, infinity, start = call.start, done](auto result) {
          if (!result.ok()) return done(infinity ? result.status() : AsTeiRerankStatus(result.status()));
          int64_t characters = 0;
          const int64_t query = CountCharacters(Input::Text(request->query));
          for (const std::string& d : request->documents) characters += query + CountCharacters(Input::Text(d));
          json answer = infinity ? InfinityRerankJson(*result, request->return_documents, RandomUuid(),
                                                      absl::ToUnixSeconds(absl::Now()))
                                 : TeiRerankJson(*result);
          done(WithTeiHeaders(std::move(answer), start, characters, result->usage, result->timing));
        }));
  }

  void TeiPredict(const json& body, const HttpCall& call, std::string* model, HttpDone done) const {
    auto parsed = ParseTeiPredict(body);
    if (!parsed.ok()) return done(parsed.status());
    if (absl::Status s = ReadTeiModel(body, &parsed->classify.model); !s.ok()) return done(s);
    *model = parsed->classify.model;
    auto request = Share(std::move(*parsed));
    serving_->Classify(request->classify, call.context,
                       OnHandlerThread<ClassifyResult>(call, [request, start = call.start, done](auto result) {
                         if (!result.ok()) return done(result.status());
                         done(WithTeiHeaders(TeiPredictJson(*result, request->batch), start,
                                             Characters(request->classify.inputs), result->usage, result->timing));
                       }));
  }

  void InfinityClassify(const json& body, const HttpCall& call, std::string* model, HttpDone done) const {
    auto request = ParseInfinityClassify(body);
    if (!request.ok()) return done(request.status());
    *model = request->model;
    serving_->Classify(*request, call.context, OnHandlerThread<ClassifyResult>(call, [done](auto result) {
                         if (!result.ok()) return done(result.status());
                         done(HttpAnswer(InfinityClassifyJson(*result, RandomUuid(), absl::ToUnixSeconds(absl::Now()))));
                       }));
  }

  // POST / and /invocations: what the model is for, as TEI sets these routes up by its model's
  // type: an embedding model embeds, a one-label head reranks, a classifier predicts.
  void TeiByModelType(const json& body, const HttpCall& call, std::string* model, HttpDone done) const {
    std::string name;
    if (absl::Status s = ReadTeiModel(body, &name); !s.ok()) return done(s);
    *model = name;
    auto described = serving_->DescribeModel(name);
    if (!described.ok()) return done(described.status());
    // The Inference API's token-classification task, where a token classifier is served.
    if (!described->info.token_labels.empty()) return TokenClassification(body, call, model, std::move(done));
    // The Inference API's zero-shot-classification task, where an NLI model is served.
    if (HasCandidateLabels(body)) {
      if (described->info.labels.size() >= 2) return ZeroShot(body, call, model, std::move(done));
      return done(WithFieldError(
          absl::FailedPreconditionError(absl::StrCat(
              "parameters.candidate_labels asks for zero-shot classification, which needs an NLI model (a classifier "
              "with an entailment label); model ", described->name, " is ",
              described->info.labels.empty() ? "an embedding model" : "a reranker (one label)")),
          FieldErrorKind::kInvalid, "parameters.candidate_labels"));
    }
    if (described->info.labels.empty()) return TeiEmbed(body, call, model, std::move(done));
    if (described->info.labels.size() == 1) return TeiRerank(body, call, model, std::move(done));
    return TeiPredict(body, call, model, std::move(done));
  }

  // Tokenizing is the serving layer's only synchronous call: it runs on the handler thread.
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
    l.max_input_length = m->info.max_length;
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

 private:
  RouteContext c_;
  const EncoderServing* serving_;
};

}  // namespace

std::vector<HttpRoute> MakeHttpRoutes(const RouteContext& c) {
  auto r = std::make_shared<const Routes>(c);
  std::vector<HttpRoute> routes;
  using Handler = std::function<void(const json&, const HttpCall&, std::string*, HttpDone)>;
  auto add = [&routes](const char* method, const char* path, ErrorStyle errors, Handler handle, bool open = false) {
    routes.push_back({method, path, errors, std::move(handle), open, /*on_loop=*/std::string(method) == "GET",
                      OpenApiOperation(method, path)});
  };
  // A route that answers at once (every GET route, /tokenize, /decode).
  using Now = std::function<Answer(const json&, const HttpCall&, std::string*)>;
  auto at_once = [](Now answer) -> Handler {
    return [answer = std::move(answer)](const json& b, const HttpCall& call, std::string* m, HttpDone done) {
      done(answer(b, call, m));
    };
  };
  using namespace std::placeholders;
  // OpenAI (and Infinity's /embeddings, TEI's /embeddings: the same route without /v1)
  for (const char* path : {"/v1/embeddings", "/embeddings"}) {
    add("POST", path, ErrorStyle::kOpenAI, std::bind(&Routes::OpenAIEmbed, r, _1, _2, _3, _4));
  }
  for (const char* path : {"/v1/models", "/models"}) {
    add("GET", path, ErrorStyle::kOpenAI,
        at_once([r](const json&, const HttpCall&, std::string*) { return r->OpenAIModels(); }));
  }

  // Cohere / Jina
  add("POST", "/v1/rerank", ErrorStyle::kOpenAI, std::bind(&Routes::CohereRerank, r, _1, _2, _3, _4));
  add("POST", "/v2/rerank", ErrorStyle::kCohere, std::bind(&Routes::CohereV2Rerank, r, _1, _2, _3, _4));
  add("POST", "/v2/embed", ErrorStyle::kCohere, std::bind(&Routes::CohereEmbed, r, _1, _2, _3, /*v2=*/true, _4));
  add("POST", "/v1/embed", ErrorStyle::kCohere, std::bind(&Routes::CohereEmbed, r, _1, _2, _3, /*v2=*/false, _4));

  // text-embeddings-inference
  add("POST", "/embed", ErrorStyle::kTei, std::bind(&Routes::TeiEmbed, r, _1, _2, _3, _4));
  add("POST", "/embed_all", ErrorStyle::kTei, std::bind(&Routes::TeiEmbedAll, r, _1, _2, _3, _4));
  add("POST", "/similarity", ErrorStyle::kTei, std::bind(&Routes::TeiSimilarity, r, _1, _2, _3, _4));
  add("POST", "/embed_sparse", ErrorStyle::kTei, std::bind(&Routes::TeiEmbedSparse, r, _1, _2, _3, _4));
  add("POST", "/embed_multi_vector", ErrorStyle::kTei, std::bind(&Routes::MultiVector, r, _1, _2, _3, _4));
  // The Hugging Face Inference API's zero-shot-classification task.
  add("POST", "/zero-shot-classification", ErrorStyle::kTei, std::bind(&Routes::ZeroShot, r, _1, _2, _3, _4));
  // The Hugging Face Inference API's token-classification task (named entities).
  add("POST", "/token-classification", ErrorStyle::kTei,
      std::bind(&Routes::TokenClassification, r, _1, _2, _3, _4));
  add("POST", "/rerank", ErrorStyle::kTei, std::bind(&Routes::TeiRerank, r, _1, _2, _3, _4));
  add("POST", "/predict", ErrorStyle::kTei, std::bind(&Routes::TeiPredict, r, _1, _2, _3, _4));
  for (const char* path : {"/", "/invocations"}) {
    add("POST", path, ErrorStyle::kTei, std::bind(&Routes::TeiByModelType, r, _1, _2, _3, _4));
  }
  add("POST", "/tokenize", ErrorStyle::kTei,
      at_once([r](const json& b, const HttpCall& c, std::string* m) { return r->TeiTokenize(b, c, m); }));
  add("POST", "/decode", ErrorStyle::kTei,
      at_once([r](const json& b, const HttpCall&, std::string* m) { return r->TeiDecode(b, m); }));
  add("GET", "/info", ErrorStyle::kTei, at_once([r](const json&, const HttpCall&, std::string*) { return r->TeiInfo(); }));
  // TEI's health routes: its own, the Inference API's (GET /) and SageMaker's (GET /ping).
  for (const char* path : {"/health", "/", "/ping"}) {
    add("GET", path, ErrorStyle::kTei,
        at_once([r](const json&, const HttpCall&, std::string*) { return r->Health(); }), /*open=*/true);
  }
  if (c.metrics_text) {
    add("GET", "/metrics", ErrorStyle::kTei,
        at_once([r](const json&, const HttpCall&, std::string*) { return r->Metrics(); }),
        /*open=*/!c.metrics_need_key);
  }
  // The API's description, open as TEI's (it holds nothing a caller could not read in the README),
  // generated from this table once it is complete.
  auto document = std::make_shared<std::string>();
  add("GET", "/api-doc/openapi.json", ErrorStyle::kTei,
      at_once([document](const json&, const HttpCall&, std::string*) {
        HttpAnswer answer;
        answer.text = *document;
        answer.content_type = "application/json";
        return Answer(std::move(answer));
      }),
      /*open=*/true);

  // Infinity
  add("POST", "/classify", ErrorStyle::kTei, std::bind(&Routes::InfinityClassify, r, _1, _2, _3, _4));
  *document = OpenApiDocument(routes);
  return routes;
}

}  // namespace relserve
