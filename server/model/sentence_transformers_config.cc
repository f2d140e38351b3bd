#include "server/model/sentence_transformers_config.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "server/model/model_limits.h"
#include "server/util/file_util.h"
#include "server/util/json_util.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

using nlohmann::json;

// A module folder of modules.json: like shard names, kept inside the model directory.
bool IsSafeRelativePath(const std::string& path) {
  if (!path.empty() && path.front() == '/') return false;
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    if (part == "..") return false;
  }
  return true;
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
  JsonFieldReader r(j, path);
  PoolingConfig p;
  RETURN_IF_ERROR(r.Int("word_embedding_dimension", &p.word_embedding_dimension, 1, kMaxModelWidth));
  RETURN_IF_ERROR(r.Bool("pooling_mode_cls_token", &p.cls));
  RETURN_IF_ERROR(r.Bool("pooling_mode_max_tokens", &p.max));
  RETURN_IF_ERROR(r.Bool("pooling_mode_mean_tokens", &p.mean));
  RETURN_IF_ERROR(r.Bool("pooling_mode_mean_sqrt_len_tokens", &p.mean_sqrt_len));
  RETURN_IF_ERROR(r.Bool("pooling_mode_weightedmean_tokens", &p.weighted_mean));
  RETURN_IF_ERROR(r.Bool("pooling_mode_lasttoken", &p.last_token));
  if (p.cls + p.max + p.mean + p.mean_sqrt_len + p.weighted_mean + p.last_token == 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no pooling mode is enabled"));
  }
  return p;
}

absl::StatusOr<DenseConfig> ParseDense(const std::string& dir) {
  const std::string path = JoinPath(dir, "config.json");
  ASSIGN_OR_RETURN(json j, ReadJsonFile(path));
  if (!j.is_object()) return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON object"));
  JsonFieldReader r(j, path);
  DenseConfig d;
  d.directory = dir;
  for (const char* key : {"in_features", "out_features"}) {
    if (!r.Has(key)) return r.Error(key, "is missing");
  }
  RETURN_IF_ERROR(r.Int("in_features", &d.in_features, 1, kMaxModelWidth));
  RETURN_IF_ERROR(r.Int("out_features", &d.out_features, 1, kMaxModelWidth));
  RETURN_IF_ERROR(r.Bool("bias", &d.bias));
  std::string act = "torch.nn.modules.activation.Tanh";  // Dense's default
  RETURN_IF_ERROR(r.String("activation_function", &act));
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
  ASSIGN_OR_RETURN(const bool present, OptionalFileExists(modules_path));
  if (!present) return st;
  ASSIGN_OR_RETURN(json modules, ReadJsonFile(modules_path));
  if (!modules.is_array()) return absl::InvalidArgumentError(absl::StrCat(modules_path, ": not a JSON list"));
  st.present = true;
  bool have_pooling = false;
  for (size_t i = 0; i < modules.size(); ++i) {
    const json& m = modules[i];
    if (!m.is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(modules_path, ": entry ", i, " is not an object: ",
                                                     JsonValueForMessage(m)));
    }
    JsonFieldReader r(m, absl::StrCat(modules_path, ": entry ", i));
    std::string type, sub;
    RETURN_IF_ERROR(r.String("type", &type));
    if (type.empty()) return r.Error("type", "is missing");
    RETURN_IF_ERROR(r.String("path", &sub));
    if (!IsSafeRelativePath(sub)) {
      return r.Error("path", absl::StrCat("\"", sub, "\" is not a folder inside the model directory"));
    }
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
      return r.Error("type", absl::StrCat("\"", type, "\" is not supported (supported: Transformer, Pooling, "
                                          "Dense, Normalize)"));
    }
  }
  if (!have_pooling) {
    return absl::InvalidArgumentError(absl::StrCat(modules_path, ": has no sentence_transformers Pooling module"));
  }
  return st;
}

}  // namespace relserve
