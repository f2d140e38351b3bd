#include "server/http_api/cohere_api.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/http_api/http_status.h"
#include "server/http_api/json_fields.h"
#include "server/util/field_error.h"
#include "server/util/quote.h"

namespace relserve {

using nlohmann::json;

absl::StatusOr<RerankRequest> ParseCohereRerank(const json& body) {
  RerankRequest r;
  if (absl::Status s = ReadString(body, "model", &r.model); !s.ok()) return s;
  if (absl::Status s = ReadRequiredNonEmptyString(body, "query", &r.query); !s.ok()) return s;
  auto documents = Required(body, "documents");
  if (!documents.ok()) return documents.status();
  if (!(*documents)->is_array()) {
    return WrongTypeError("documents", "an array of strings", **documents);
  }
  if ((*documents)->empty()) return EmptyField("documents");
  for (size_t i = 0; i < (*documents)->size(); ++i) {
    const json& d = (**documents)[i];
    const std::string field = absl::StrCat("documents[", i, "]");
    const json* text = &d;
    if (d.is_object()) {  // {"text": "..."}, as Cohere and Jina also take
      auto it = d.find("text");
      if (it == d.end()) {
        return FieldError(FieldErrorKind::kMissing, field, absl::StrCat(field, " is an object without \"text\""));
      }
      text = &*it;
    }
    if (!text->is_string()) {
      return WrongTypeError(field, "a string or {\"text\": string}", *text);
    }
    if (text->get_ref<const std::string&>().empty()) {
      return EmptyField(field);
    }
    r.documents.push_back(text->get<std::string>());
  }
  if (absl::Status s = ReadInt(body, "top_n", 1, 1 << 30, &r.top_n); !s.ok()) return s;
  if (absl::Status s = ReadBool(body, "return_documents", &r.return_documents); !s.ok()) return s;
  if (absl::Status s = ReadRerankChunking(body, &r); !s.ok()) return s;
  return r;
}

json CohereRerankJson(const RerankResult& result) {
  json results = json::array();
  for (const RerankHit& h : result.results) {
    json hit = {{"index", h.index}, {"relevance_score", h.score}};
    if (!h.document.empty()) hit["document"] = {{"text", h.document}};
    AddRerankWindows(result, h, &hit);
    results.push_back(std::move(hit));
  }
  return {{"model", result.model}, {"results", std::move(results)}, {"usage", {{"total_tokens", result.usage.tokens}}}};
}


namespace {

json CohereMeta(const char* version, json billed_units, int64_t input_tokens) {
  return {{"api_version", {{"version", version}}},
          {"billed_units", std::move(billed_units)},
          {"tokens", {{"input_tokens", input_tokens}, {"output_tokens", 0}}}};
}

}  // namespace

absl::StatusOr<RerankRequest> ParseCohereV2Rerank(const json& body) {
  auto r = ParseCohereRerank(body);
  if (!r.ok()) return r.status();
  // Cohere cuts each document to its first max_tokens_per_doc tokens, 4096 unless said.
  r->max_tokens_per_doc = kCohereMaxTokensPerDoc;
  if (absl::Status s = ReadInt(body, "max_tokens_per_doc", 1, 1 << 30, &r->max_tokens_per_doc); !s.ok()) return s;
  return r;
}

json CohereV2RerankJson(const RerankResult& result, const std::string& id) {
  json results = json::array();
  for (const RerankHit& h : result.results) {
    json hit = {{"index", h.index}, {"relevance_score", h.score}};
    if (!h.document.empty()) hit["document"] = {{"text", h.document}};
    AddRerankWindows(result, h, &hit);
    results.push_back(std::move(hit));
  }
  return {{"id", id},
          {"results", std::move(results)},
          {"meta", CohereMeta("2", {{"search_units", 1}}, result.usage.tokens)}};
}

absl::StatusOr<CohereEmbedRequest> ParseCohereEmbed(const json& body, bool v2) {
  CohereEmbedRequest r;
  if (absl::Status s = ReadString(body, "model", &r.embed.model); !s.ok()) return s;
  if (!FieldAbsent(body, "images")) {
    return absl::InvalidArgumentError("images are not supported: relserve embeds texts only");
  }
  auto texts = Required(body, "texts");
  if (!texts.ok()) return texts.status();
  if (!(*texts)->is_array()) {
    return absl::InvalidArgumentError(absl::StrCat("texts must be an array of strings, not ", JsonTypeName(**texts)));
  }
  if ((*texts)->empty()) return EmptyField("texts");
  for (size_t i = 0; i < (*texts)->size(); ++i) {
    const json& t = (**texts)[i];
    const std::string field = absl::StrCat("texts[", i, "]");
    if (!t.is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(field, " must be a string, not ", JsonTypeName(t)));
    }
    if (t.get_ref<const std::string&>().empty()) {
      return EmptyField(field);
    }
    r.embed.inputs.push_back(Input::Text(t.get<std::string>()));
  }
  if (absl::Status s = ReadString(body, "input_type", &r.input_type); !s.ok()) return s;
  if (!r.input_type.empty() && r.input_type != "search_document" && r.input_type != "search_query" &&
      r.input_type != "classification" && r.input_type != "clustering") {
    return absl::InvalidArgumentError(absl::StrCat("input_type must be one of search_document, search_query, "
                                                   "classification, clustering, not ",
                                                   Quote(r.input_type)));
  }
  if (!FieldAbsent(body, "embedding_types")) {
    const json& types = body.at("embedding_types");
    if (!types.is_array()) {
      return absl::InvalidArgumentError(
          absl::StrCat("embedding_types must be an array of strings, not ", JsonTypeName(types)));
    }
    for (size_t i = 0; i < types.size(); ++i) {
      const json& t = types[i];
      const std::string name = t.is_string() ? t.get<std::string>() : "";
      if (name != "float" && name != "int8" && name != "uint8" && name != "binary" && name != "ubinary") {
        return absl::InvalidArgumentError(
            absl::StrCat("embedding_types[", i, "] must be one of float, int8, uint8, binary, ubinary, not ",
                         t.is_string() ? Quote(name) : JsonTypeName(t)));
      }
      if (std::find(r.types.begin(), r.types.end(), name) == r.types.end()) r.types.push_back(name);
    }
    if (r.types.empty()) return absl::InvalidArgumentError("embedding_types is empty");
  }
  if (!FieldAbsent(body, "truncate")) {
    std::string truncate;
    if (absl::Status s = ReadString(body, "truncate", &truncate); !s.ok()) return s;
    if (truncate == "NONE") {
      r.embed.truncation.truncate = false;
    } else if (truncate == "START") {
      r.embed.truncation.truncate = true;
      r.embed.truncation.direction = TruncationDirection::kLeft;
    } else if (truncate == "END") {
      r.embed.truncation.truncate = true;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("truncate must be \"NONE\", \"START\" or \"END\", not ", Quote(truncate)));
    }
  }
  if (v2) {
    if (absl::Status s = ReadInt(body, "output_dimension", 1, 1 << 20, &r.embed.dimensions); !s.ok()) return s;
  }
  r.embed.normalize = true;
  return r;
}

std::string CoherePromptName(const std::string& input_type, const std::vector<std::string>& prompt_names) {
  std::vector<std::string> candidates = {input_type};
  if (input_type == "search_query") candidates.push_back("query");
  if (input_type == "search_document") candidates.insert(candidates.end(), {"document", "passage"});
  for (const std::string& c : candidates) {
    if (std::find(prompt_names.begin(), prompt_names.end(), c) != prompt_names.end()) return c;
  }
  return "";
}

std::vector<int> Int8Embedding(const std::vector<float>& unit) {
  float largest = 0;
  for (float x : unit) largest = std::max(largest, std::fabs(x));
  std::vector<int> out(unit.size(), 0);
  if (largest <= 0) return out;
  for (size_t i = 0; i < unit.size(); ++i) {
    out[i] = std::clamp(static_cast<int>(std::lround(unit[i] / largest * 127.0f)), -127, 127);
  }
  return out;
}

std::vector<int> BinaryEmbedding(const std::vector<float>& values, bool as_unsigned) {
  std::vector<int> out((values.size() + 7) / 8, 0);
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] > 0) out[i / 8] |= 0x80 >> (i % 8);
  }
  if (!as_unsigned) {
    for (int& b : out) b -= 128;
  }
  return out;
}

json CohereEmbedJson(const CohereEmbedRequest& request, const EmbedResult& result, bool v2, const std::string& id) {
  json texts = json::array();
  for (const Input& in : request.embed.inputs) texts.push_back(in.text);
  json out = {{"id", id}};
  const std::vector<std::string> types = request.types.empty() ? std::vector<std::string>{"float"} : request.types;
  if (!v2 && request.types.empty()) {
    json floats = json::array();
    for (const Embedding& e : result.embeddings) floats.push_back(e.values);
    out["embeddings"] = std::move(floats);
    out["response_type"] = "embeddings_floats";
  } else {
    json by_type = json::object();
    for (const std::string& type : types) {
      json all = json::array();
      for (const Embedding& e : result.embeddings) {
        if (type == "float") {
          all.push_back(e.values);
        } else if (type == "int8" || type == "uint8") {
          std::vector<int> q = Int8Embedding(e.values);
          if (type == "uint8") {
            for (int& x : q) x += 128;
          }
          all.push_back(std::move(q));
        } else {
          all.push_back(BinaryEmbedding(e.values, type == "ubinary"));
        }
      }
      by_type[type] = std::move(all);
    }
    out["embeddings"] = std::move(by_type);
    out["response_type"] = "embeddings_by_type";
  }
  out["texts"] = std::move(texts);
  out["meta"] = CohereMeta(v2 ? "2" : "1", {{"input_tokens", result.usage.tokens}}, result.usage.tokens);
  return out;
}

json CohereErrorJson(const absl::Status& status) {
  return {{"message", CapMessage(std::string(status.message()), kMaxHttpErrorMessageBytes)}};
}

std::string RandomUuid() {
  thread_local std::mt19937_64 random(std::random_device{}());
  const uint64_t a = random(), b = random();
  // Version 4 (random), variant 10.
  const uint64_t hi = (a & ~uint64_t{0xF000}) | 0x4000;
  const uint64_t lo = (b & ~(uint64_t{0xC} << 60)) | (uint64_t{0x8} << 60);
  return absl::StrFormat("%08x-%04x-%04x-%04x-%012x", hi >> 32, (hi >> 16) & 0xFFFF, hi & 0xFFFF, lo >> 48,
                         lo & 0xFFFFFFFFFFFFULL);
}

}  // namespace relserve
