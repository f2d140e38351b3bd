#include "server/tokenizer/tokenizer_config.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
#include "server/util/file_util.h"
#include "server/util/json_util.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

absl::Status WrongType(const std::string& what, const std::string& key, const char* want,
                       const nlohmann::json& value) {
  return absl::InvalidArgumentError(
      absl::StrCat(what, ": \"", key, "\" must be ", want, ", got ", JsonValueForMessage(value)));
}

// transformers writes special tokens either as plain strings or as serialized AddedToken
// objects whose text is under "content".
absl::Status ApplyToken(const nlohmann::json& json, const std::string& what, const std::string& key,
                        std::string* name) {
  auto it = json.find(key);
  if (it == json.end() || it->is_null()) return absl::OkStatus();
  if (it->is_string()) {
    *name = it->get<std::string>();
    return absl::OkStatus();
  }
  if (it->is_object()) {
    auto content = it->find("content");
    if (content != it->end() && content->is_string()) {
      *name = content->get<std::string>();
      return absl::OkStatus();
    }
  }
  return WrongType(what, key, "a string or an object with a string \"content\"", *it);
}

absl::Status ApplyMaxLength(const nlohmann::json& json, const std::string& what,
                            std::optional<int>* max_length) {
  auto it = json.find("model_max_length");
  if (it == json.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_number()) return WrongType(what, "model_max_length", "a number", *it);
  const double value = it->get<double>();
  if (!(value >= 1) || std::floor(value) != value) {
    return WrongType(what, "model_max_length", "a positive integer", *it);
  }
  // transformers saves int(1e30) when a tokenizer has no limit of its own.
  if (value > std::numeric_limits<int32_t>::max()) return absl::OkStatus();
  *max_length = static_cast<int>(value);
  return absl::OkStatus();
}

absl::Status ApplyJsonFileIfPresent(const std::string& path, TokenizerConfig* config) {
  ASSIGN_OR_RETURN(const bool present, OptionalFileExists(path));
  if (!present) return absl::OkStatus();
  ASSIGN_OR_RETURN(nlohmann::json json, ReadJsonFile(path));
  return ApplyTokenizerConfigJson(json, path, config);
}

}  // namespace

TokenizerConfig DefaultTokenizerConfig(TokenizerFamily family) {
  TokenizerConfig config;
  config.special_tokens = DefaultSpecialTokenNames(family);
  return config;
}

absl::Status ApplyTokenizerConfigJson(const nlohmann::json& json, const std::string& what,
                                      TokenizerConfig* config) {
  if (!json.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": not a JSON object"));
  }
  if (auto it = json.find("do_lower_case"); it != json.end() && !it->is_null()) {
    if (!it->is_boolean()) return WrongType(what, "do_lower_case", "true or false", *it);
    config->do_lower_case = it->get<bool>();
  }
  RETURN_IF_ERROR(ApplyMaxLength(json, what, &config->model_max_length));
  SpecialTokenNames& names = config->special_tokens;
  RETURN_IF_ERROR(ApplyToken(json, what, "pad_token", &names.pad));
  RETURN_IF_ERROR(ApplyToken(json, what, "unk_token", &names.unk));
  RETURN_IF_ERROR(ApplyToken(json, what, "cls_token", &names.cls));
  RETURN_IF_ERROR(ApplyToken(json, what, "sep_token", &names.sep));
  RETURN_IF_ERROR(ApplyToken(json, what, "eos_token", &names.eos));
  return absl::OkStatus();
}

absl::StatusOr<TokenizerConfig> ReadTokenizerConfig(const std::string& model_dir,
                                                    TokenizerFamily family) {
  TokenizerConfig config = DefaultTokenizerConfig(family);
  RETURN_IF_ERROR(ApplyJsonFileIfPresent(JoinPath(model_dir, "tokenizer_config.json"), &config));
  RETURN_IF_ERROR(ApplyJsonFileIfPresent(JoinPath(model_dir, "special_tokens_map.json"), &config));
  return config;
}

}  // namespace relserve
