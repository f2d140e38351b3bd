#include "server/model_config/sentence_transformers_config.h"

#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "server/model_config/model_limits.h"
#include "server/util/file_util.h"
#include "server/util/json_util.h"
#include "server/util/quote.h"
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
  RETURN_IF_ERROR(r.Bool("include_prompt", &p.include_prompt));
  if (p.cls + p.max + p.mean + p.mean_sqrt_len + p.weighted_mean + p.last_token == 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no pooling mode is enabled"));
  }
  return p;
}

// SpladePooling's config.json: pooling_strategy "max" (default) or "sum", activation_function
// "relu" (default) or "log1p_relu"; word_embedding_dimension is the vocabulary's size, not read.
absl::StatusOr<SpladePoolingConfig> ParseSpladePooling(const std::string& dir) {
  const std::string path = JoinPath(dir, "config.json");
  SpladePoolingConfig c;
  if (!FileExists(path)) return c;  // sentence-transformers' defaults
  ASSIGN_OR_RETURN(json j, ReadJsonFile(path));
  if (!j.is_object()) return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON object"));
  JsonFieldReader r(j, path);
  std::string strategy = "max", activation = "relu";
  RETURN_IF_ERROR(r.String("pooling_strategy", &strategy));
  RETURN_IF_ERROR(r.String("activation_function", &activation));
  if (strategy != "max" && strategy != "sum") {
    return r.Error("pooling_strategy", absl::StrCat("\"", strategy, "\" is not max or sum"));
  }
  if (activation != "relu" && activation != "log1p_relu") {
    return r.Error("activation_function", absl::StrCat("\"", activation, "\" is not relu or log1p_relu"));
  }
  c.sum = strategy == "sum";
  c.log1p_relu = activation == "log1p_relu";
  return c;
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

// sentence_bert_config.json: the Transformer module's max_seq_length and do_lower_case. Absent
// keys (or null) keep the defaults: no limit of its own, no lower-casing.
absl::Status ParseTransformerConfig(const std::string& path, SentenceTransformersConfig* st) {
  ASSIGN_OR_RETURN(const bool exists, OptionalFileExists(path));
  if (!exists) return absl::OkStatus();
  ASSIGN_OR_RETURN(json j, ReadJsonFile(path));
  if (!j.is_object()) return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON object"));
  JsonFieldReader r(j, path);
  st->transformer_config_path = path;
  RETURN_IF_ERROR(r.Int("max_seq_length", &st->max_seq_length, 1, std::numeric_limits<int>::max()));
  RETURN_IF_ERROR(r.Bool("do_lower_case", &st->do_lower_case));
  return absl::OkStatus();
}

// config_sentence_transformers.json: prompts, default_prompt_name, similarity_fn_name.
absl::Status ParseModelConfig(const std::string& path, SentenceTransformersConfig* st) {
  ASSIGN_OR_RETURN(const bool exists, OptionalFileExists(path));
  if (!exists) return absl::OkStatus();
  ASSIGN_OR_RETURN(json j, ReadJsonFile(path));
  if (!j.is_object()) return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON object"));
  JsonFieldReader r(j, path);
  if (r.Has("prompts")) {
    const json& prompts = j.at("prompts");
    if (!prompts.is_object()) {
      return r.Error("prompts", absl::StrCat("must be an object of prompt names to texts, got ",
                                             JsonValueForMessage(prompts)));
    }
    for (auto it = prompts.begin(); it != prompts.end(); ++it) {
      if (!it.value().is_string()) {
        return r.Error("prompts", absl::StrCat("must map each name to a text: ", Quote(it.key()), " is ",
                                               JsonValueForMessage(it.value())));
      }
      st->prompts.emplace_back(it.key(), it.value().get<std::string>());
    }
  }
  RETURN_IF_ERROR(r.String("default_prompt_name", &st->default_prompt_name));
  if (!st->default_prompt_name.empty()) {
    bool known = false;
    std::vector<std::string> names;
    for (const auto& [name, text] : st->prompts) {
      known = known || name == st->default_prompt_name;
      names.push_back(Quote(name));
    }
    if (!known) {
      return r.Error("default_prompt_name",
                     absl::StrCat(Quote(st->default_prompt_name), " is not one of the prompts (",
                                  names.empty() ? "there are none" : absl::StrJoin(names, ", "), ")"));
    }
  }
  RETURN_IF_ERROR(r.String("similarity_fn_name", &st->similarity_fn_name));
  // MaxSim: a ColBERT model's (PyLate, sentence-transformers' multi-vector encoders).
  if (!st->similarity_fn_name.empty() && st->similarity_fn_name != "cosine" && st->similarity_fn_name != "dot" &&
      st->similarity_fn_name != "euclidean" && st->similarity_fn_name != "manhattan" &&
      st->similarity_fn_name != "MaxSim") {
    return r.Error("similarity_fn_name", absl::StrCat(Quote(st->similarity_fn_name),
                                                      " is not one of cosine, dot, euclidean, manhattan, MaxSim"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<const std::string*> FindSentencePrompt(const SentencePrompts& prompts,
                                                      const std::string& default_prompt_name,
                                                      const std::string& prompt_name) {
  const std::string& name = prompt_name.empty() ? default_prompt_name : prompt_name;
  if (name.empty()) return nullptr;
  std::vector<std::string> names;
  for (const auto& [prompt, text] : prompts) {
    if (prompt == name) return &text;
    names.push_back(prompt);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("prompt_name ", Quote(name), " is not one of the model's prompts: ",
                   names.empty() ? "the model has no prompts" : absl::StrJoin(names, ", ")));
}

int PoolingConfig::output_dimension() const {
  int modes = cls + max + mean + mean_sqrt_len + weighted_mean + last_token;
  return modes * word_embedding_dimension;
}

std::vector<PoolingMode> PoolingConfig::Modes() const {
  std::vector<PoolingMode> modes;
  if (cls) modes.push_back(PoolingMode::kCls);
  if (max) modes.push_back(PoolingMode::kMax);
  if (mean) modes.push_back(PoolingMode::kMean);
  if (mean_sqrt_len) modes.push_back(PoolingMode::kMeanSqrtLen);
  if (weighted_mean) modes.push_back(PoolingMode::kWeightedMean);
  if (last_token) modes.push_back(PoolingMode::kLastToken);
  return modes;
}

std::string PoolingConfig::Describe() const { return PoolingInfo{Modes(), {}, false}.ModeNames(); }

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
  RETURN_IF_ERROR(ParseModelConfig(JoinPath(model_dir, "config_sentence_transformers.json"), &st));
  const std::string modules_path = JoinPath(model_dir, "modules.json");
  ASSIGN_OR_RETURN(const bool present, OptionalFileExists(modules_path));
  if (!present) {
    RETURN_IF_ERROR(ParseTransformerConfig(JoinPath(model_dir, "sentence_bert_config.json"), &st));
    return st;
  }
  ASSIGN_OR_RETURN(json modules, ReadJsonFile(modules_path));
  if (!modules.is_array()) return absl::InvalidArgumentError(absl::StrCat(modules_path, ": not a JSON list"));
  st.present = true;
  bool have_pooling = false;
  bool have_transformer = false;
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
    if (absl::EndsWith(type, "models.Transformer") || absl::EndsWith(type, "sparse_encoder.models.MLMTransformer")) {
      // The first one's settings (sentence-transformers has one Transformer module).
      if (!have_transformer) RETURN_IF_ERROR(ParseTransformerConfig(JoinPath(dir, "sentence_bert_config.json"), &st));
      have_transformer = true;
    } else if (absl::EndsWith(type, "models.Pooling")) {
      ASSIGN_OR_RETURN(st.pooling, ParsePooling(dir));
      have_pooling = true;
      st.has_pooling = true;
    } else if (absl::EndsWith(type, "sparse_encoder.models.SpladePooling")) {
      ASSIGN_OR_RETURN(st.splade, ParseSpladePooling(dir));
      have_pooling = true;
    } else if (type == "pylate.models.Dense.Dense") {
      if (st.colbert_dense.has_value()) return r.Error("type", "names a second PyLate Dense module");
      ASSIGN_OR_RETURN(st.colbert_dense, ParseDense(dir));
      ASSIGN_OR_RETURN(json dense, ReadJsonFile(JoinPath(dir, "config.json")));
      bool residual = false;
      RETURN_IF_ERROR(JsonFieldReader(dense, JoinPath(dir, "config.json")).Bool("use_residual", &residual));
      if (residual) {
        return absl::InvalidArgumentError(
            absl::StrCat(JoinPath(dir, "config.json"), ": \"use_residual\" true is not supported"));
      }
    } else if (absl::EndsWith(type, "models.Dense")) {
      ASSIGN_OR_RETURN(DenseConfig d, ParseDense(dir));
      st.dense.push_back(std::move(d));
    } else if (absl::EndsWith(type, "models.Normalize")) {
      st.normalize = true;
    } else {
      return r.Error("type", absl::StrCat("\"", type, "\" is not supported (supported: Transformer, Pooling, "
                                          "Dense, Normalize, the sparse encoder's MLMTransformer and "
                                          "SpladePooling, and PyLate's Dense)"));
    }
  }
  if (!have_pooling && !st.colbert_dense.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat(modules_path, ": has no sentence_transformers Pooling (or SpladePooling) module"));
  }
  if (!have_transformer) {
    RETURN_IF_ERROR(ParseTransformerConfig(JoinPath(model_dir, "sentence_bert_config.json"), &st));
  }
  return st;
}

std::string SpladePoolingConfig::Describe() const {
  return absl::StrCat("splade(", sum ? "sum" : "max", ", ", log1p_relu ? "log1p_relu" : "relu", ")");
}

}  // namespace relserve
