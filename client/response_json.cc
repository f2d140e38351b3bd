#include "client/response_json.h"

#include <charconv>
#include <cstdlib>

#include "absl/status/status.h"

namespace relserve::client {
namespace {

using json = nlohmann::ordered_json;

// The double whose shortest decimal form is the float's, so that JSON shows what the server
// computed without float-to-double noise.
double Shortest(float value) {
  char buf[32];
  const auto result = std::to_chars(buf, buf + sizeof(buf) - 1, value);
  *result.ptr = '\0';
  return std::strtod(buf, nullptr);
}

template <typename Repeated>
json Floats(const Repeated& values) {
  json out = json::array();
  for (float v : values) out.push_back(Shortest(v));
  return out;
}

template <typename Repeated>
json List(const Repeated& values) {
  json out = json::array();
  for (const auto& v : values) out.push_back(v);
  return out;
}

json Usage(const v1::Usage& u) { return {{"tokens", u.tokens()}, {"sequences", u.sequences()}}; }

json Timing(const v1::Timing& t) {
  return {{"tokenize_us", t.tokenize_us()},
          {"queue_us", t.queue_us()},
          {"inference_us", t.inference_us()},
          {"total_us", t.total_us()}};
}

}  // namespace

json ToJson(const v1::EmbedResponse& r) {
  json embeddings = json::array();
  for (const v1::Embedding& e : r.embeddings()) {
    json item = {{"values", Floats(e.values())}, {"num_tokens", e.num_tokens()}, {"truncated", e.truncated()}};
    if (e.windows() > 1) item["windows"] = e.windows();
    if (e.sparse_size() > 0) {
      json sparse = json::array();
      for (const v1::SparseValue& v : e.sparse()) sparse.push_back({{"index", v.index()}, {"value", Shortest(v.value())}});
      item["sparse"] = std::move(sparse);
    }
    if (e.has_multi_vector()) {
      item["multi_vector"] = {{"dim", e.multi_vector().dim()},
                              {"count", e.multi_vector().count()},
                              {"values", Floats(e.multi_vector().values())}};
    }
    embeddings.push_back(std::move(item));
  }
  return {{"model", r.model()},
          {"embeddings", embeddings},
          {"usage", Usage(r.usage())},
          {"timing", Timing(r.timing())},
          {"request_id", r.request_id()}};
}

json ToJson(const v1::EmbedTokensResponse& r) {
  json sequences = json::array();
  for (const v1::TokenStates& s : r.sequences()) {
    sequences.push_back({{"token_ids", List(s.token_ids())},
                         {"offset_begin", List(s.offset_begin())},
                         {"offset_end", List(s.offset_end())},
                         {"hidden_size", s.hidden_size()},
                         {"values", Floats(s.values())},
                         {"truncated", s.truncated()}});
  }
  return {{"model", r.model()}, {"sequences", sequences}, {"usage", Usage(r.usage())}, {"timing", Timing(r.timing())}};
}

json ToJson(const v1::RerankResponse& r) {
  json results = json::array();
  for (const v1::RerankResult& x : r.results()) {
    results.push_back({{"index", x.index()}, {"score", Shortest(x.score())}, {"document", x.document()}});
  }
  return {{"model", r.model()}, {"results", results}, {"usage", Usage(r.usage())}, {"timing", Timing(r.timing())}};
}

json ToJson(const v1::ClassifyResponse& r) {
  json results = json::array();
  for (const v1::Classification& c : r.results()) {
    json labels = json::array();
    for (const v1::LabelScore& l : c.labels()) {
      labels.push_back({{"label", l.label()}, {"index", l.index()}, {"score", Shortest(l.score())}});
    }
    results.push_back({{"labels", labels}, {"logits", Floats(c.logits())}});
  }
  return {{"model", r.model()}, {"results", results}, {"usage", Usage(r.usage())}, {"timing", Timing(r.timing())}};
}

json ToJson(const v1::ZeroShotClassifyResponse& r) {
  json results = json::array();
  for (const v1::ZeroShotClassification& c : r.results()) {
    json labels = json::array();
    for (const v1::LabelScore& l : c.labels()) {
      labels.push_back({{"label", l.label()}, {"index", l.index()}, {"score", Shortest(l.score())}});
    }
    results.push_back({{"sequence", c.sequence()}, {"labels", labels}});
  }
  return {{"model", r.model()}, {"results", results}, {"usage", Usage(r.usage())}, {"timing", Timing(r.timing())}};
}

json ToJson(const v1::ClassifyTokensResponse& r) {
  json results = json::array();
  for (const v1::TokenEntities& t : r.results()) {
    json entities = json::array();
    for (const v1::TokenEntity& e : t.entities()) {
      entities.push_back({{"entity", e.entity()},
                          {"score", e.score()},
                          {"index", e.index()},
                          {"word", e.word()},
                          {"start", e.start()},
                          {"end", e.end()}});
    }
    results.push_back(std::move(entities));
  }
  return {{"model", r.model()}, {"results", results}, {"usage", Usage(r.usage())}, {"timing", Timing(r.timing())}};
}

json ToJson(const v1::TokenizeResponse& r) {
  json results = json::array();
  for (const v1::Tokenized& t : r.results()) {
    results.push_back({{"input_ids", List(t.input_ids())},
                       {"token_type_ids", List(t.token_type_ids())},
                       {"offset_begin", List(t.offset_begin())},
                       {"offset_end", List(t.offset_end())},
                       {"pieces", List(t.pieces())},
                       {"truncated", t.truncated()}});
  }
  return {{"model", r.model()}, {"results", results}};
}

json ToJson(const v1::ListModelsResponse& r) {
  json models = json::array();
  for (const v1::ModelInfo& m : r.models()) {
    models.push_back({{"name", m.name()},
                      {"architecture", m.architecture()},
                      {"model_type", m.model_type()},
                      {"max_length", m.max_length()},
                      {"hidden_size", m.hidden_size()},
                      {"num_layers", m.num_layers()},
                      {"vocab_size", m.vocab_size()},
                      {"embedding_dim", m.embedding_dim()},
                      {"pooling", m.pooling()},
                      {"labels", List(m.labels())},
                      {"problem_type", m.problem_type()},
                      {"dtype", m.dtype()},
                      {"device", m.device()},
                      {"has_tokenizer", m.has_tokenizer()},
                      {"token_labels", List(m.token_labels())}});
  }
  return {{"models", models}, {"default_model", r.default_model()}};
}

std::string StatusCodeName(int code) {
  // absl::StatusCode numbers its codes as gRPC does and names them the same way.
  if (code < 0 || code > 16) return "UNKNOWN";
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

json ErrorJson(const std::string& code_name, const std::string& message) {
  return {{"error", {{"code", code_name}, {"message", message}}}};
}

}  // namespace relserve::client
