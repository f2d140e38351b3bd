#ifndef RELSERVE_SERVER_HTTP_API_COHERE_API_H_
#define RELSERVE_SERVER_HTTP_API_COHERE_API_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
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

// Cohere's v2 rerank (POST /v2/rerank): {model, query, documents, top_n, max_tokens_per_doc
// (each document cut to its first that many tokens before it is paired, 4096 when absent, as
// Cohere documents it), return_documents (relserve's extension)} -> {"id", "results":
// [{"index", "relevance_score", "document"?: {"text"}}], "meta"}, best first. Both rerank
// shapes also take relserve's chunking fields (ReadRerankChunking): a chunked answer's results
// say in `windows` how many windows each document took.
inline constexpr int kCohereMaxTokensPerDoc = 4096;
absl::StatusOr<RerankRequest> ParseCohereV2Rerank(const nlohmann::json& body);
nlohmann::json CohereV2RerankJson(const RerankResult& result, const std::string& id);

// Cohere's embed, v2 (POST /v2/embed) and v1 (POST /v1/embed): {model, texts, input_type,
// embedding_types, truncate ("NONE", "START", "END"; absent: --auto-truncate),
// output_dimension (v2)}. Embeddings are unit vectors (as Cohere's). `embedding_types`:
//   float    the floats;
//   int8     each vector scaled so that its largest absolute value is 127, rounded (cosine
//            similarity is unchanged by the scale); Cohere does not publish its rule;
//   uint8    int8 + 128;
//   binary / ubinary  one bit per dimension, 1 where the value is > 0, packed eight to a byte,
//            the first dimension in the highest bit, the last byte padded with 0 bits (numpy's
//            packbits, as Cohere and sentence-transformers' quantize_embeddings pack them);
//            ubinary is the byte, binary the byte - 128.
struct CohereEmbedRequest {
  EmbedRequest embed;
  std::string input_type;                 // "search_document", ... or empty
  std::vector<std::string> types;         // embedding_types; empty: not given
};
absl::StatusOr<CohereEmbedRequest> ParseCohereEmbed(const nlohmann::json& body, bool v2);
// v2: {"id", "embeddings": {type: [[...]]}, "texts", "meta", "response_type": "embeddings_by_type"};
// v1 without embedding_types: {"id", "embeddings": [[float]], "texts", "meta",
// "response_type": "embeddings_floats"}.
nlohmann::json CohereEmbedJson(const CohereEmbedRequest& request, const EmbedResult& result, bool v2,
                               const std::string& id);

// The sentence-transformers prompt a Cohere input_type maps to: the model's prompt of that name,
// else for search_query and search_document its "query" and "document" (or "passage") prompt;
// "" when the model has none of them (input_type is then ignored).
std::string CoherePromptName(const std::string& input_type, const std::vector<std::string>& prompt_names);

std::vector<int> Int8Embedding(const std::vector<float>& unit);
std::vector<int> BinaryEmbedding(const std::vector<float>& values, bool as_unsigned);

// {"message": ...}: Cohere's error body.
nlohmann::json CohereErrorJson(const absl::Status& status);

// A random UUID (version 4), for the `id` of Cohere's and Infinity's answers.
std::string RandomUuid();

}  // namespace relserve

#endif  // RELSERVE_SERVER_HTTP_API_COHERE_API_H_
