#include "server/model/sentence_transformers_config.h"

#include <cstdint>
#include <limits>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/util/file_util.h"
#include "server/util/json_util.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

using nlohmann::json;

bool JsonBool(const json& j, const char* key) {
  return j.contains(key) && j.at(key).is_boolean() && j.at(key).get<bool>();
}

// torch.nn activation class names that sentence-transformers' Dense stores.
absl::StatusOr<std::string> DenseActivation(const std::string& cls, const std::string& source) {
  static const std::vector<std::pair<std::string, std::string>> kMap = {
      {"torch.nn.modules.activation.Tanh", "tanh"},
      {"torch.nn.modules.linear.Identity", "linear"},
      {"torch.nn.modules.activation.ReLU", "relu"},
      {"torch.nn.modules.activation.GELU", "gelu"},
      {"torch.nn.modules.activation.Sigmoid", "sigmoid"},
      {"torch.nn.modules.activation.SiLU", "silu"},
  };
  for (const auto& [name, act] : kMap) {
    if (cls == name) return act;
  }
  return absl::InvalidArgumentError(absl::StrCat(source, ": activation_function \"", cls, "\" is not supported"));
}

// A positive integer no larger than max_value. json's get<int>() would truncate 2^32 + 1 to 1
// and is undefined for a float beyond int's range, so the JSON type and range are checked first.
absl::StatusOr<int> PositiveInt(const json& value, const char* key, int max_value,
                                const std::string& path) {
  bool in_range = false;
  if (value.is_number_unsigned()) {
    in_range = value.get<uint64_t>() >= 1 && value.get<uint64_t>() <= static_cast<uint64_t>(max_value);
  } else if (value.is_number_integer()) {
    in_range = value.get<int64_t>() >= 1 && value.get<int64_t>() <= max_value;
  }
  if (!in_range) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": \"", key, "\" must be an integer from 1 to ",
                                                   max_value, ", got ", value.dump()));
  }
  return static_cast<int>(value.get<int64_t>());
}

// Six modes of at most this many values each still fit output_dimension() in an int.
constexpr int kMaxWordEmbeddingDimension = std::numeric_limits<int>::max() / 6;

absl::StatusOr<PoolingConfig> ParsePooling(const std::string& dir) {
  const std::string path = JoinPath(dir, "config.json");
  ASSIGN_OR_RETURN(json j, ReadJsonFile(path));
  if (!j.is_object()) return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON object"));
  PoolingConfig p;
  // Absent (0), the model's hidden size is used (Pooler::Create).
  if (j.contains("word_embedding_dimension") && !j.at("word_embedding_dimension").is_null()) {
    ASSIGN_OR_RETURN(p.word_embedding_dimension,
                     PositiveInt(j.at("word_embedding_dimension"), "word_embedding_dimension",
                                 kMaxWordEmbeddingDimension, path));
  }
  p.cls = JsonBool(j, "pooling_mode_cls_token");
  p.max = JsonBool(j, "pooling_mode_max_tokens");
  p.mean = JsonBool(j, "pooling_mode_mean_tokens");
  p.mean_sqrt_len = JsonBool(j, "pooling_mode_mean_sqrt_len_tokens");
  p.weighted_mean = JsonBool(j, "pooling_mode_weightedmean_tokens");
  p.last_token = JsonBool(j, "pooling_mode_lasttoken");
  if (p.Describe().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no pooling mode is enabled"));
  }
  return p;
}

absl::StatusOr<DenseConfig> ParseDense(const std::string& dir) {
  const std::string path = JoinPath(dir, "config.json");
  ASSIGN_OR_RETURN(json j, ReadJsonFile(path));
  if (!j.is_object()) return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON object"));
  DenseConfig d;
  d.directory = dir;
  for (auto [key, out] : {std::pair{"in_features", &d.in_features}, {"out_features", &d.out_features}}) {
    if (!j.contains(key)) return absl::InvalidArgumentError(absl::StrCat(path, ": \"", key, "\" is missing"));
    ASSIGN_OR_RETURN(*out, PositiveInt(j.at(key), key, std::numeric_limits<int>::max(), path));
  }
  if (j.contains("bias")) {
    if (!j.at("bias").is_boolean()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": \"bias\" must be true or false, got ", j.at("bias").dump()));
    }
    d.bias = j.at("bias").get<bool>();
  }
  std::string act = "torch.nn.modules.activation.Tanh";  // Dense's default
  if (j.contains("activation_function") && j.at("activation_function").is_string()) {
    act = j.at("activation_function").get<std::string>();
  }
  ASSIGN_OR_RETURN(d.activation, DenseActivation(act, path));
  return d;
}

}  // namespace

int PoolingConfig::output_dimension() const {
  int modes = cls + max + mean + mean_sqrt_len + weighted_mean + last_token;
  return modes * word_embedding_dimension;
}

std::string PoolingConfig::Describe() const {
  std::vector<std::string> modes;
  if (cls) modes.push_back("cls");
  if (max) modes.push_back("max");
  if (mean) modes.push_back("mean");
  if (mean_sqrt_len) modes.push_back("mean_sqrt_len");
  if (weighted_mean) modes.push_back("weightedmean");
  if (last_token) modes.push_back("lasttoken");
  return absl::StrJoin(modes, ",");
}

absl::StatusOr<PoolingConfig> PoolingFromMode(const std::string& mode, int hidden_size) {
  PoolingConfig p;
  p.word_embedding_dimension = hidden_size;
  if (mode == "mean") p.mean = true;
  else if (mode == "cls") p.cls = true;
  else if (mode == "max") p.max = true;
  else if (mode == "mean_sqrt_len") p.mean_sqrt_len = true;
  else if (mode == "weightedmean") p.weighted_mean = true;
  else if (mode == "lasttoken") p.last_token = true;
  else {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown pooling mode \"", mode, "\" (known: mean, cls, max, mean_sqrt_len, weightedmean, lasttoken)"));
  }
  return p;
}

absl::StatusOr<SentenceTransformersConfig> LoadSentenceTransformersConfig(const std::string& model_dir) {
  SentenceTransformersConfig st;
  const std::string modules_path = JoinPath(model_dir, "modules.json");
  if (!FileExists(modules_path)) return st;
  ASSIGN_OR_RETURN(json modules, ReadJsonFile(modules_path));
  if (!modules.is_array()) return absl::InvalidArgumentError(absl::StrCat(modules_path, ": not a JSON list"));
  st.present = true;
  bool have_pooling = false;
  for (const json& m : modules) {
    if (!m.is_object() || !m.contains("type") || !m.at("type").is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(modules_path, ": entry without a \"type\": ", m.dump()));
    }
    const std::string type = m.at("type").get<std::string>();
    const std::string sub = m.contains("path") && m.at("path").is_string() ? m.at("path").get<std::string>() : "";
    const std::string dir = JoinPath(model_dir, sub);
    if (absl::EndsWith(type, "models.Transformer")) {
      continue;
    } else if (absl::EndsWith(type, "models.Pooling")) {
      ASSIGN_OR_RETURN(st.pooling, ParsePooling(dir));
      have_pooling = true;
    } else if (absl::EndsWith(type, "models.Dense")) {
      ASSIGN_OR_RETURN(DenseConfig d, ParseDense(dir));
      st.dense.push_back(std::move(d));
    } else if (absl::EndsWith(type, "models.Normalize")) {
      st.normalize = true;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(modules_path, ": module type \"", type,
                                                     "\" is not supported (supported: Transformer, Pooling, "
                                                     "Dense, Normalize)"));
    }
  }
  if (!have_pooling) {
    return absl::InvalidArgumentError(absl::StrCat(modules_path, ": has no sentence_transformers Pooling module"));
  }
  return st;
}

}  // namespace relserve
