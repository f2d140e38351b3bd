#ifndef RELSERVE_SERVER_HTTP_COHERE_API_H_
#define RELSERVE_SERVER_HTTP_COHERE_API_H_

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "server/serving/serving_types.h"

namespace relserve {

// The rerank shape of Cohere and Jina (POST /v1/rerank), which RAG frameworks call:
// {query, documents: [string | {"text": string}], top_n, return_documents (default false),
// model} -> {"model", "results": [{"index", "relevance_score", "document"?: {"text"}}],
// "usage": {"total_tokens"}}, best first.
absl::StatusOr<RerankRequest> ParseCohereRerank(const nlohmann::json& body);
nlohmann::json CohereRerankJson(const RerankResult& result);

}  // namespace relserve

#endif  // RELSERVE_SERVER_HTTP_COHERE_API_H_
