#include "server/http/cohere_api.h"

#include "absl/strings/str_cat.h"
#include "server/http/http_status.h"
#include "server/http/json_fields.h"

namespace relserve {

using nlohmann::json;

absl::StatusOr<RerankRequest> ParseCohereRerank(const json& body) {
  RerankRequest r;
  if (absl::Status s = ReadString(body, "model", &r.model); !s.ok()) return s;
  auto query = Required(body, "query");
  if (!query.ok()) return query.status();
  if (!(*query)->is_string()) {
    return absl::InvalidArgumentError(absl::StrCat("query must be a string, not ", JsonTypeName(**query)));
  }
  r.query = (*query)->get<std::string>();
  if (r.query.empty()) return WithHttpStatus(absl::InvalidArgumentError("query is empty"), 400);
  auto documents = Required(body, "documents");
  if (!documents.ok()) return documents.status();
  if (!(*documents)->is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat("documents must be an array of strings, not ", JsonTypeName(**documents)));
  }
  if ((*documents)->empty()) return WithHttpStatus(absl::InvalidArgumentError("documents is empty"), 400);
  for (size_t i = 0; i < (*documents)->size(); ++i) {
    const json& d = (**documents)[i];
    const std::string field = absl::StrCat("documents[", i, "]");
    const json* text = &d;
    if (d.is_object()) {  // {"text": "..."}, as Cohere and Jina also take
      auto it = d.find("text");
      if (it == d.end()) return absl::InvalidArgumentError(absl::StrCat(field, " is an object without \"text\""));
      text = &*it;
    }
    if (!text->is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, " must be a string or {\"text\": string}, not ", JsonTypeName(*text)));
    }
    if (text->get_ref<const std::string&>().empty()) {
      return WithHttpStatus(absl::InvalidArgumentError(absl::StrCat(field, " is empty")), 400);
    }
    r.documents.push_back(text->get<std::string>());
  }
  if (absl::Status s = ReadInt(body, "top_n", 1, 1 << 30, &r.top_n); !s.ok()) return s;
  if (absl::Status s = ReadBool(body, "return_documents", &r.return_documents); !s.ok()) return s;
  return r;
}

json CohereRerankJson(const RerankResult& result) {
  json results = json::array();
  for (const RerankHit& h : result.results) {
    json hit = {{"index", h.index}, {"relevance_score", h.score}};
    if (!h.document.empty()) hit["document"] = {{"text", h.document}};
    results.push_back(std::move(hit));
  }
  return {{"model", result.model}, {"results", std::move(results)}, {"usage", {{"total_tokens", result.usage.tokens}}}};
}

}  // namespace relserve
