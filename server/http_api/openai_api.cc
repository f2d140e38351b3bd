#include "server/http_api/openai_api.h"

#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "server/http_api/http_status.h"
#include "server/http_api/json_fields.h"
#include "server/util/field_error.h"
#include "server/util/quote.h"

namespace relserve {

using nlohmann::json;

absl::StatusOr<OpenAIEmbeddingsRequest> ParseOpenAIEmbeddings(const json& body) {
  OpenAIEmbeddingsRequest r;
  auto input = Required(body, "input");
  if (!input.ok()) return input.status();
  auto inputs = ReadEmbedInputs(**input, "input");
  if (!inputs.ok()) return inputs.status();
  r.embed.inputs = std::move(*inputs);
  if (absl::Status s = ReadString(body, "model", &r.embed.model); !s.ok()) return s;
  std::string format = "float";
  if (absl::Status s = ReadString(body, "encoding_format", &format); !s.ok()) return s;
  if (format != "float" && format != "base64") {
    return FieldError(FieldErrorKind::kInvalid, "encoding_format",
                      absl::StrCat("encoding_format must be \"float\" or \"base64\", not ", Quote(format)));
  }
  r.base64 = format == "base64";
  if (absl::Status s = ReadInt(body, "dimensions", 1, 1 << 20, &r.embed.dimensions); !s.ok()) return s;
  std::string user;  // accepted and ignored, as the API allows
  if (absl::Status s = ReadString(body, "user", &user); !s.ok()) return s;
  // relserve's extension: the model's sentence-transformers prompt of that name before each text.
  if (absl::Status s = ReadString(body, "prompt_name", &r.embed.prompt_name); !s.ok()) return s;
  // relserve's extension: texts longer than the model's window embedded whole.
  if (absl::Status s = ReadWholeInput(body, &r.embed); !s.ok()) return s;
  r.embed.normalize = true;
  return r;
}

std::string Base64Floats(const std::vector<float>& values) {
  std::string bytes(values.size() * sizeof(float), '\0');
  // x86-64 and aarch64 (the platforms relserve builds for) are little-endian.
  static_assert(sizeof(float) == 4, "float32");
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return absl::Base64Escape(bytes);
}

json OpenAIEmbeddingsJson(const EmbedResult& result, bool base64) {
  json data = json::array();
  for (size_t i = 0; i < result.embeddings.size(); ++i) {
    const std::vector<float>& v = result.embeddings[i].values;
    data.push_back({{"object", "embedding"},
                    {"embedding", base64 ? json(Base64Floats(v)) : json(v)},
                    {"index", i}});
  }
  return {{"object", "list"},
          {"data", std::move(data)},
          {"model", result.model},
          {"usage", {{"prompt_tokens", result.usage.tokens}, {"total_tokens", result.usage.tokens}}}};
}

json OpenAIModelsJson(const std::vector<ModelDescription>& models, int64_t created) {
  json data = json::array();
  for (const ModelDescription& m : models) {
    data.push_back({{"id", m.name}, {"object", "model"}, {"created", created}, {"owned_by", "relserve"}});
  }
  return {{"object", "list"}, {"data", std::move(data)}};
}

json OpenAIErrorJson(const absl::Status& status, int http_status) {
  const std::string message(status.message());
  // The field the status names (field_error.h), as OpenAI's request names it: the serving
  // layer's inputs are OpenAI's input; fields OpenAI's requests do not have are no param.
  json param = nullptr;
  if (const std::optional<FieldErrorDetail> detail = FieldErrorOf(status); detail.has_value()) {
    std::string root = FieldRoot(detail->field);
    if (root == "inputs") root = "input";
    for (const char* field : {"input", "model", "encoding_format", "dimensions", "user", "query", "documents",
                              "top_n", "return_documents"}) {
      if (root == field) param = field;
    }
  }
  if (param.is_null() && status.code() == absl::StatusCode::kNotFound) param = "model";
  return {{"error",
           {{"message", CapMessage(message, kMaxHttpErrorMessageBytes)},
            {"type", OpenAIErrorType(http_status)},
            {"param", std::move(param)},
            {"code", absl::AsciiStrToLower(absl::StatusCodeToString(status.code()))}}}};
}

}  // namespace relserve
