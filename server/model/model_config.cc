#include "server/model/model_config.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
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

using ConfigReader = JsonFieldReader;

// transformers reads layer_norm_eps into nn.LayerNorm: at 0 a constant row divides 0 by 0, and
// no trained model uses a value near 1.
constexpr double kMaxLayerNormEps = 1.0;

// A token id the model's embedding table holds.
absl::Status TokenId(const ConfigReader& r, const char* key, int vocab_size, int* out) {
  RETURN_IF_ERROR(r.Int(key, out, 0, kMaxVocabSize));
  if (*out >= vocab_size) {
    return r.Error(key, absl::StrCat("is ", *out, ", outside the vocabulary [0, ", vocab_size, ") of vocab_size"));
  }
  return absl::OkStatus();
}

std::vector<std::string> SplitLowerBar(const std::string& s) {
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(s, '|')) {
    out.push_back(absl::AsciiStrToLower(absl::StripAsciiWhitespace(part)));
  }
  return out;
}

absl::Status ParseDeberta(const ConfigReader& r, const json& j, const std::string& source,
                          DebertaV2Config* c) {
  RETURN_IF_ERROR(r.Int("vocab_size", &c->vocab_size, 1, kMaxVocabSize));
  RETURN_IF_ERROR(r.Int("hidden_size", &c->hidden_size, 1, kMaxModelWidth));
  RETURN_IF_ERROR(r.Int("num_hidden_layers", &c->num_hidden_layers, 0, kMaxLayers));
  RETURN_IF_ERROR(r.Int("num_attention_heads", &c->num_attention_heads, 1, kMaxModelWidth));
  RETURN_IF_ERROR(r.Int("intermediate_size", &c->intermediate_size, 1, kMaxFeedForwardSize));
  RETURN_IF_ERROR(r.String("hidden_act", &c->hidden_act));
  RETURN_IF_ERROR(r.Int("max_position_embeddings", &c->max_position_embeddings, 1, kMaxSequenceLength));
  RETURN_IF_ERROR(r.Int("type_vocab_size", &c->type_vocab_size, 0, kMaxVocabSize));
  RETURN_IF_ERROR(r.Double("layer_norm_eps", &c->layer_norm_eps, 0, kMaxLayerNormEps, /*min_exclusive=*/true));
  RETURN_IF_ERROR(r.Bool("relative_attention", &c->relative_attention));
  // Below 1 both mean "none" (max_relative_positions then follows max_position_embeddings).
  RETURN_IF_ERROR(r.Int("max_relative_positions", &c->max_relative_positions, INT32_MIN, kMaxSequenceLength));
  RETURN_IF_ERROR(r.Int("position_buckets", &c->position_buckets, INT32_MIN, kMaxSequenceLength));
  RETURN_IF_ERROR(TokenId(r, "pad_token_id", c->vocab_size, &c->pad_token_id));
  RETURN_IF_ERROR(r.Bool("position_biased_input", &c->position_biased_input));
  RETURN_IF_ERROR(r.Bool("share_att_key", &c->share_att_key));
  RETURN_IF_ERROR(r.Int("conv_kernel_size", &c->conv_kernel_size, 0, kMaxSequenceLength));
  RETURN_IF_ERROR(r.Int("conv_groups", &c->conv_groups, 1, kMaxModelWidth));
  RETURN_IF_ERROR(r.String("conv_act", &c->conv_act));
  RETURN_IF_ERROR(r.String("pooler_hidden_act", &c->pooler_hidden_act));

  if (c->hidden_size % c->num_attention_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": hidden_size ", c->hidden_size, " is not a multiple of num_attention_heads ",
        c->num_attention_heads));
  }
  c->attention_head_size = c->hidden_size / c->num_attention_heads;
  RETURN_IF_ERROR(r.Int("attention_head_size", &c->attention_head_size, 1, kMaxModelWidth));
  if (static_cast<int64_t>(c->num_attention_heads) * c->attention_head_size > kMaxModelWidth) {
    return r.Error("attention_head_size",
                   absl::StrCat(c->attention_head_size, " x num_attention_heads ", c->num_attention_heads,
                                " must be at most ", kMaxModelWidth));
  }
  c->embedding_size = c->hidden_size;
  RETURN_IF_ERROR(r.Int("embedding_size", &c->embedding_size, 1, kMaxModelWidth));
  c->pooler_hidden_size = c->hidden_size;
  RETURN_IF_ERROR(r.Int("pooler_hidden_size", &c->pooler_hidden_size, 1, kMaxModelWidth));

  // pos_att_type: a list, or the older "p2c|c2p" string (DebertaV2Config's backwards compatibility).
  c->pos_att_type.clear();
  if (r.Has("pos_att_type")) {
    const json& v = j.at("pos_att_type");
    if (v.is_string()) {
      c->pos_att_type = SplitLowerBar(v.get<std::string>());
    } else if (v.is_array()) {
      for (const json& e : v) {
        if (!e.is_string()) {
          return r.Error("pos_att_type", absl::StrCat("must hold strings, got ", JsonValueForMessage(v)));
        }
        c->pos_att_type.push_back(e.get<std::string>());
      }
    } else {
      return r.Error("pos_att_type", absl::StrCat("must be a list or a \"c2p|p2c\" string, got ",
                                                  JsonValueForMessage(v)));
    }
    for (const std::string& t : c->pos_att_type) {
      // "p2p" belongs to DeBERTa v1; DebertaV2's attention ignores it, and so do we.
      if (t != "c2p" && t != "p2c" && t != "p2p" && !t.empty()) {
        return r.Error("pos_att_type", absl::StrCat("has unknown entry \"", t,
                                                    "\" (known: c2p, p2c)"));
      }
    }
  }
  std::string norm = "none";
  RETURN_IF_ERROR(r.String("norm_rel_ebd", &norm));
  c->norm_rel_ebd = SplitLowerBar(norm);
  for (const std::string& t : c->norm_rel_ebd) {
    if (t != "none" && t != "layer_norm") {
      return r.Error("norm_rel_ebd", absl::StrCat("has unknown entry \"", t,
                                                  "\" (known: layer_norm, none)"));
    }
  }
  for (const auto& [key, act] : {std::pair<const char*, std::string>{"hidden_act", c->hidden_act},
                                 {"pooler_hidden_act", c->pooler_hidden_act},
                                 {"conv_act", c->conv_act}}) {
    if (!IsSupportedActivation(act)) {
      return r.Error(key, absl::StrCat("names activation \"", act, "\", which is not supported (supported: ",
                                       absl::StrJoin(SupportedActivations(), ", "), ")"));
    }
  }
  if (c->conv_kernel_size > 0 && c->hidden_size % c->conv_groups != 0) {
    return r.Error("conv_groups", absl::StrCat(c->conv_groups, " must divide hidden_size ", c->hidden_size));
  }
  if (c->relative_attention && c->rel_embeddings_rows() <= 0) {
    return r.Error("position_buckets", "and max_relative_positions leave no relative positions");
  }
  if (c->relative_attention && c->position_buckets > 0) {
    // make_log_bucket_position divides by mid = position_buckets // 2 and by
    // log((max_relative_positions - 1) / mid): with either at or below 0 the reference computes
    // infinities (or fails) for every distance beyond mid.
    const int mid = c->position_buckets / 2;
    if (mid < 1) return r.Error("position_buckets", absl::StrCat("must be at least 2 (or 0 for none), got ", c->position_buckets));
    if (c->effective_max_relative_positions() - 1 <= mid) {
      return r.Error("max_relative_positions",
                     absl::StrCat("(", c->effective_max_relative_positions(),
                                  c->max_relative_positions < 1 ? ", from max_position_embeddings" : "",
                                  ") must be above position_buckets / 2 + 1 = ", mid + 1,
                                  " for log-bucketed relative positions"));
    }
  }
  return absl::OkStatus();
}

absl::Status ParseT5(const ConfigReader& r, T5Config* c) {
  RETURN_IF_ERROR(r.Int("vocab_size", &c->vocab_size, 1, kMaxVocabSize));
  RETURN_IF_ERROR(r.Int("d_model", &c->d_model, 1, kMaxModelWidth));
  RETURN_IF_ERROR(r.Int("d_kv", &c->d_kv, 1, kMaxModelWidth));
  RETURN_IF_ERROR(r.Int("d_ff", &c->d_ff, 1, kMaxFeedForwardSize));
  RETURN_IF_ERROR(r.Int("num_layers", &c->num_layers, 0, kMaxLayers));
  RETURN_IF_ERROR(r.Int("num_heads", &c->num_heads, 1, kMaxModelWidth));
  if (static_cast<int64_t>(c->num_heads) * c->d_kv > kMaxModelWidth) {
    return r.Error("d_kv", absl::StrCat(c->d_kv, " x num_heads ", c->num_heads, " must be at most ", kMaxModelWidth));
  }
  // T5Attention halves the buckets (bidirectional) and halves them again for the exact ones.
  RETURN_IF_ERROR(r.Int("relative_attention_num_buckets", &c->relative_attention_num_buckets, 4, kMaxSequenceLength));
  RETURN_IF_ERROR(r.Int("relative_attention_max_distance", &c->relative_attention_max_distance, 1, INT32_MAX));
  const int max_exact = c->relative_attention_num_buckets / 2 / 2;
  if (c->relative_attention_max_distance <= max_exact) {
    // _relative_position_bucket divides by log(max_distance / max_exact).
    return r.Error("relative_attention_max_distance",
                   absl::StrCat("must be above relative_attention_num_buckets / 4 = ", max_exact, ", got ",
                                c->relative_attention_max_distance));
  }
  RETURN_IF_ERROR(r.Double("layer_norm_epsilon", &c->layer_norm_epsilon, 0, kMaxLayerNormEps, /*min_exclusive=*/true));
  RETURN_IF_ERROR(TokenId(r, "pad_token_id", c->vocab_size, &c->pad_token_id));
  RETURN_IF_ERROR(TokenId(r, "eos_token_id", c->vocab_size, &c->eos_token_id));
  RETURN_IF_ERROR(r.String("feed_forward_proj", &c->feed_forward_proj));

  // T5Config.__init__: "gated-ACT" or "ACT"; "gated-gelu" means the tanh approximation.
  std::vector<std::string> act_info = absl::StrSplit(c->feed_forward_proj, '-');
  c->dense_act_fn = act_info.back();
  c->is_gated_act = act_info.front() == "gated";
  if ((act_info.size() > 1 && act_info.front() != "gated") || act_info.size() > 2) {
    return r.Error("feed_forward_proj",
                   absl::StrCat("\"", c->feed_forward_proj,
                                "\" is not of the form gated-{ACT} or {ACT} (e.g. gated-gelu, relu)"));
  }
  if (c->feed_forward_proj == "gated-gelu") c->dense_act_fn = "gelu_new";
  // PretrainedConfig sets leftover keys after __init__, so explicit values in config.json win.
  RETURN_IF_ERROR(r.String("dense_act_fn", &c->dense_act_fn));
  RETURN_IF_ERROR(r.Bool("is_gated_act", &c->is_gated_act));
  if (!IsSupportedActivation(c->dense_act_fn)) {
    return r.Error("feed_forward_proj",
                   absl::StrCat("gives activation \"", c->dense_act_fn, "\", which is not supported (supported: ",
                                absl::StrJoin(SupportedActivations(), ", "), ")"));
  }
  return absl::OkStatus();
}

}  // namespace

bool DebertaV2Config::has_c2p() const {
  return std::find(pos_att_type.begin(), pos_att_type.end(), "c2p") != pos_att_type.end();
}
bool DebertaV2Config::has_p2c() const {
  return std::find(pos_att_type.begin(), pos_att_type.end(), "p2c") != pos_att_type.end();
}
bool DebertaV2Config::layer_norm_rel_embeddings() const {
  return std::find(norm_rel_ebd.begin(), norm_rel_ebd.end(), "layer_norm") != norm_rel_ebd.end();
}
int DebertaV2Config::effective_max_relative_positions() const {
  return max_relative_positions < 1 ? max_position_embeddings : max_relative_positions;
}
int DebertaV2Config::rel_embeddings_rows() const {
  return position_buckets > 0 ? position_buckets * 2 : effective_max_relative_positions() * 2;
}
int DebertaV2Config::attention_span() const {
  return position_buckets > 0 ? position_buckets : effective_max_relative_positions();
}

int ModelConfig::hidden_size() const {
  return family == ModelFamily::kT5 ? t5.d_model : deberta.hidden_size;
}
int ModelConfig::num_layers() const {
  return family == ModelFamily::kT5 ? t5.num_layers : deberta.num_hidden_layers;
}
int ModelConfig::vocab_size() const {
  return family == ModelFamily::kT5 ? t5.vocab_size : deberta.vocab_size;
}

const std::vector<std::string>& SupportedActivations() {
  static const std::vector<std::string> kNames = {
      "gelu",       "gelu_new",  "gelu_pytorch_tanh", "gelu_fast", "gelu_accurate", "gelu_python",
      "quick_gelu", "gelu_10",   "relu",              "relu2",     "relu6",         "leaky_relu",
      "silu",       "swish",     "mish",              "tanh",      "sigmoid",       "linear"};
  return kNames;
}

bool IsSupportedActivation(const std::string& name) {
  const auto& names = SupportedActivations();
  return std::find(names.begin(), names.end(), name) != names.end();
}

const char* ModelFamilyName(ModelFamily family) {
  return family == ModelFamily::kT5 ? "t5" : "deberta-v2";
}

absl::StatusOr<ModelConfig> ParseModelConfig(const json& j, const std::string& source) {
  if (!j.is_object()) return absl::InvalidArgumentError(absl::StrCat(source, ": not a JSON object"));
  ConfigReader r(j, source);
  ModelConfig config;
  RETURN_IF_ERROR(r.String("model_type", &config.model_type));
  if (config.model_type.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": has no \"model_type\""));
  }
  if (config.model_type == "deberta-v2") {
    config.family = ModelFamily::kDebertaV2;
  } else if (config.model_type == "t5" || config.model_type == "mt5") {
    config.family = ModelFamily::kT5;
  } else {
    return r.Error("model_type", absl::StrCat("\"", config.model_type,
                                              "\" is not supported (supported: deberta-v2, t5, mt5)"));
  }

  static const std::vector<std::string> kDebertaArchs = {
      "DebertaV2Model", "DebertaV2ForSequenceClassification", "DebertaV2ForMaskedLM"};
  static const std::vector<std::string> kT5Archs = {
      "T5EncoderModel", "T5Model", "T5ForConditionalGeneration",
      "MT5EncoderModel", "MT5Model", "MT5ForConditionalGeneration"};
  const auto& supported = config.family == ModelFamily::kT5 ? kT5Archs : kDebertaArchs;
  if (r.Has("architectures")) {
    const json& a = j.at("architectures");
    if (!a.is_array() || a.empty() || !a[0].is_string()) {
      return r.Error("architectures", absl::StrCat("must be a non-empty list of class names, got ",
                                                   JsonValueForMessage(a)));
    }
    config.architecture = a[0].get<std::string>();
    if (std::find(supported.begin(), supported.end(), config.architecture) == supported.end()) {
      return r.Error("architectures", absl::StrCat(
          "names architecture \"", config.architecture, "\", which is not supported for model_type \"",
          config.model_type, "\" (supported: ", absl::StrJoin(supported, ", "), ")"));
    }
  } else {
    config.architecture = supported.front();
  }
  if (config.architecture == "DebertaV2ForSequenceClassification") {
    config.head = HeadKind::kSequenceClassification;
  }

  RETURN_IF_ERROR(r.String("torch_dtype", &config.torch_dtype));
  if (config.family == ModelFamily::kDebertaV2) {
    RETURN_IF_ERROR(ParseDeberta(r, j, source, &config.deberta));
    config.max_length = config.deberta.max_position_embeddings;
  } else {
    if (config.model_type == "mt5") {
      // MT5Config's defaults differ from T5Config's.
      config.t5.vocab_size = 250112;
      config.t5.d_ff = 1024;
      config.t5.num_layers = 8;
      config.t5.num_heads = 6;
      config.t5.feed_forward_proj = "gated-gelu";
    }
    RETURN_IF_ERROR(ParseT5(r, &config.t5));
    config.max_length = 512;
  }

  // Labels, as PretrainedConfig derives them: id2label wins, else num_labels (default 2).
  if (config.head == HeadKind::kSequenceClassification) {
    int num_labels = 2;
    RETURN_IF_ERROR(r.Int("num_labels", &num_labels, 1, kMaxLabels));
    if (r.Has("id2label")) {
      const json& m = j.at("id2label");
      if (!m.is_object() || m.empty()) {
        return r.Error("id2label", absl::StrCat("must be a non-empty object of index -> name, got ",
                                                JsonValueForMessage(m)));
      }
      if (m.size() > static_cast<size_t>(kMaxLabels)) {
        return r.Error("id2label", absl::StrCat("has ", m.size(), " labels, more than the limit of ", kMaxLabels));
      }
      num_labels = static_cast<int>(m.size());
      config.id2label.assign(num_labels, "");
      std::vector<bool> seen(num_labels, false);
      for (auto it = m.begin(); it != m.end(); ++it) {
        int index = -1;
        if (!absl::SimpleAtoi(it.key(), &index) || std::to_string(index) != it.key()) index = -1;
        if (index < 0 || index >= num_labels || seen[index] || !it.value().is_string()) {
          return r.Error("id2label", absl::StrCat("has a bad entry \"", it.key(), "\": ", JsonValueForMessage(it.value()),
                                                  " (keys must be 0..", num_labels - 1, ", each once; values strings)"));
        }
        seen[index] = true;
        config.id2label[index] = it.value().get<std::string>();
      }
    } else {
      for (int i = 0; i < num_labels; ++i) config.id2label.push_back(absl::StrCat("LABEL_", i));
    }
    config.num_labels = num_labels;
    RETURN_IF_ERROR(r.String("problem_type", &config.problem_type));
    if (!config.problem_type.empty() && config.problem_type != "single_label_classification" &&
        config.problem_type != "multi_label_classification" && config.problem_type != "regression") {
      return r.Error("problem_type", absl::StrCat("\"", config.problem_type, "\" is not one of "
                                                  "single_label_classification, multi_label_classification, regression"));
    }
  }
  return config;
}

absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& model_dir) {
  const std::string path = JoinPath(model_dir, "config.json");
  ASSIGN_OR_RETURN(json j, ReadJsonFile(path));
  return ParseModelConfig(j, path);
}

}  // namespace relserve
