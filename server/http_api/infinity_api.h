#ifndef RELSERVE_SERVER_HTTP_API_INFINITY_API_H_
#define RELSERVE_SERVER_HTTP_API_INFINITY_API_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "server/serving/serving_types.h"

namespace relserve {

// The request shapes of michaelfeil/infinity where they differ from TEI's on the same path
// (its /embeddings is OpenAI's, served as such).

// POST /rerank with `documents` instead of TEI's `texts`: {query, documents: [string],
// return_documents (default false), raw_scores (default false), top_n, model} -> {"object":
// "rerank", "results": [{"relevance_score", "index", "document": string | null}], "model",
// "usage": {"prompt_tokens", "total_tokens"}, "id", "created"}, best first.
absl::StatusOr<RerankRequest> ParseInfinityRerank(const nlohmann::json& body);
nlohmann::json InfinityRerankJson(const RerankResult& result, bool return_documents, const std::string& id,
                                  int64_t created);

// POST /classify: {input: string | [string], raw_scores (default false), model} -> {"object":
// "classify", "data": [[{"score", "label"}, ...], ...], "model", "usage", "id", "created"};
// every label of each input, best first, scored as TEI's /predict scores them.
absl::StatusOr<ClassifyRequest> ParseInfinityClassify(const nlohmann::json& body);
nlohmann::json InfinityClassifyJson(const ClassifyResult& result, const std::string& id, int64_t created);

}  // namespace relserve

#endif  // RELSERVE_SERVER_HTTP_API_INFINITY_API_H_
