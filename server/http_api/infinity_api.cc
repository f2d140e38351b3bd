#include "server/http_api/infinity_api.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/http_api/http_status.h"
#include "server/http_api/json_fields.h"

namespace relserve {

using nlohmann::json;

namespace {

absl::Status NonEmptyStrings(const json& v, const std::string& field, std::vector<std::string>* out) {
  if (!v.is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(field, " must be an array of strings, not ", JsonTypeName(v)));
  }
  if (v.empty()) return EmptyField(field);
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string item = absl::StrCat(field, "[", i, "]");
    if (!v[i].is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(item, " must be a string, not ", JsonTypeName(v[i])));
    }
    if (v[i].get_ref<const std::string&>().empty()) {
      return EmptyField(item);
    }
    out->push_back(v[i].get<std::string>());
  }
  return absl::OkStatus();
}

json UsageJson(int64_t tokens) { return {{"prompt_tokens", tokens}, {"total_tokens", tokens}}; }

}  // namespace

absl::StatusOr<RerankRequest> ParseInfinityRerank(const json& body) {
  RerankRequest r;
  if (absl::Status s = ReadRequiredNonEmptyString(body, "query", &r.query); !s.ok()) return s;
  auto documents = Required(body, "documents");
  if (!documents.ok()) return documents.status();
  if (absl::Status s = NonEmptyStrings(**documents, "documents", &r.documents); !s.ok()) return s;
  if (absl::Status s = ReadBool(body, "return_documents", &r.return_documents); !s.ok()) return s;
  if (absl::Status s = ReadBool(body, "raw_scores", &r.raw_scores); !s.ok()) return s;
  if (absl::Status s = ReadInt(body, "top_n", 1, 1 << 30, &r.top_n); !s.ok()) return s;
  if (absl::Status s = ReadString(body, "model", &r.model); !s.ok()) return s;
  if (absl::Status s = ReadRerankChunking(body, &r); !s.ok()) return s;
  return r;
}

json InfinityRerankJson(const RerankResult& result, bool return_documents, const std::string& id, int64_t created) {
  json results = json::array();
  for (const RerankHit& h : result.results) {
    json hit = {{"relevance_score", h.score},
                {"index", h.index},
                {"document", return_documents ? json(h.document) : json(nullptr)}};
    AddRerankWindows(result, h, &hit);
    results.push_back(std::move(hit));
  }
  return {{"object", "rerank"}, {"results", std::move(results)}, {"model", result.model},
          {"usage", UsageJson(result.usage.tokens)}, {"id", id}, {"created", created}};
}

absl::StatusOr<ClassifyRequest> ParseInfinityClassify(const json& body) {
  ClassifyRequest r;
  auto input = Required(body, "input");
  if (!input.ok()) return input.status();
  std::vector<std::string> texts;
  if ((*input)->is_string()) {
    if ((*input)->get_ref<const std::string&>().empty()) {
      return EmptyField("input");
    }
    texts.push_back((*input)->get<std::string>());
  } else if (absl::Status s = NonEmptyStrings(**input, "input", &texts); !s.ok()) {
    return s;
  }
  for (std::string& t : texts) r.inputs.push_back(Input::Text(std::move(t)));
  if (absl::Status s = ReadBool(body, "raw_scores", &r.raw_scores); !s.ok()) return s;
  if (absl::Status s = ReadString(body, "model", &r.model); !s.ok()) return s;
  r.score_rule = ScoreRule::kLogitCount;
  return r;
}

json InfinityClassifyJson(const ClassifyResult& result, const std::string& id, int64_t created) {
  json data = json::array();
  for (const Classification& c : result.results) {
    json labels = json::array();
    for (const LabelScore& l : c.labels) labels.push_back({{"score", l.score}, {"label", l.label}});
    data.push_back(std::move(labels));
  }
  return {{"object", "classify"}, {"data", std::move(data)}, {"model", result.model},
          {"usage", UsageJson(result.usage.tokens)}, {"id", id}, {"created", created}};
}

}  // namespace relserve
