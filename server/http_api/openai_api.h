#ifndef RELSERVE_SERVER_HTTP_API_OPENAI_API_H_
#define RELSERVE_SERVER_HTTP_API_OPENAI_API_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "server/serving/serving_types.h"

namespace relserve {

// OpenAI's embeddings API (POST /v1/embeddings, GET /v1/models), converted to and from the
// serving layer's types. OpenAI's embeddings are unit vectors: normalize is always on.
struct OpenAIEmbeddingsRequest {
  EmbedRequest embed;
  bool base64 = false;  // encoding_format "base64": little-endian float32 bytes, base64-encoded
};
absl::StatusOr<OpenAIEmbeddingsRequest> ParseOpenAIEmbeddings(const nlohmann::json& body);
nlohmann::json OpenAIEmbeddingsJson(const EmbedResult& result, bool base64);

// `created`: Unix seconds (when the server started).
nlohmann::json OpenAIModelsJson(const std::vector<ModelDescription>& models, int64_t created);

// {"error": {"message", "type", "param", "code"}}: param is the request field the error is
// about when the message starts with one (null otherwise), code the status code's name.
nlohmann::json OpenAIErrorJson(const absl::Status& status, int http_status);

// Little-endian float32 bytes, base64-encoded (what OpenAI's encoding_format=base64 answers).
std::string Base64Floats(const std::vector<float>& values);

}  // namespace relserve

#endif  // RELSERVE_SERVER_HTTP_API_OPENAI_API_H_
