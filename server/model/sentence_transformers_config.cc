#include "server/model/sentence_transformers_config.h"

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

absl::StatusOr<PoolingConfig> ParsePooling(const std::string& dir) {
  const std::string path = JoinPath(dir, "config.json");
  ASSIGN_OR_RETURN(json j, ReadJsonFile(path));
  if (!j.is_object()) return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON object"));
  PoolingConfig p;
  if (j.contains("word_embedding_dimension") && j.at("word_embedding_dimension").is_number_integer()) {
    p.word_embedding_dimension = j.at("word_embedding_dimension").get<int>();
  }
  p.cls = JsonBool(j, "pooling_mode_cls_token");
  p.max = JsonBool(j, "pooling_mode_max_tokens");
  p.mean = JsonBool(j, "pooling_mode_mean_tokens");
  p.mean_sqrt_len = JsonBool(j, "pooling_mode_mean_sqrt_len_tokens");
  p.weighted_mean = JsonBool(j, "pooling_mode_weightedmean_tokens");
  p.last_token = JsonBool(j, "pooling_mode_lasttoken");
  if (p.output_dimension() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no pooling mode is enabled"));
  }
  return p;
}

absl::StatusOr<DenseConfig> ParseDense(const std::string& dir) {
  const std::string path = JoinPath(dir, "config.json");
  ASSIGN_OR_RETURN(json j, ReadJsonFile(path));
  DenseConfig d;
  d.directory = dir;
  try {
    d.in_features = j.at("in_features").get<int>();
    d.out_features = j.at("out_features").get<int>();
    if (j.contains("bias")) d.bias = j.at("bias").get<bool>();
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", e.what()));
  }
  if (d.in_features <= 0 || d.out_features <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": in_features and out_features must be positive"));
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
