#include "server/tools/model_creator.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <new>
#include <random>
#include <set>
#include <system_error>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "server/model/model_limits.h"
#include "server/safetensors/dtype.h"
#include "server/safetensors/safetensors_writer.h"
#include "server/util/file_util.h"
#include "server/util/json_util.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

using nlohmann::json;

constexpr char kTransformersVersion[] = "4.40.2";

enum class Family { kDebertaV3, kDebertaV2, kT5, kT5V11 };

bool IsT5(Family f) { return f == Family::kT5 || f == Family::kT5V11; }

absl::StatusOr<Family> ParseFamily(const std::string& name) {
  if (name == "deberta-v3") return Family::kDebertaV3;
  if (name == "deberta-v2") return Family::kDebertaV2;
  if (name == "t5") return Family::kT5;
  if (name == "t5-v1.1") return Family::kT5V11;
  return absl::InvalidArgumentError(absl::StrCat(
      "family: unknown model family \"", name, "\" (known: deberta-v3, deberta-v2, t5, t5-v1.1)"));
}

// The shortest decimal that reads back as `value`, as a double: 0.02f -> 0.02, not
// 0.019999999552965164, which is what a Python float written to config.json looks like.
double ShortestDouble(float value) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), value);
  *res.ptr = '\0';
  return std::strtod(buf, nullptr);
}

std::vector<std::string> SplitLowerStrip(const std::string& s) {
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(s, '|')) {
    out.push_back(absl::AsciiStrToLower(absl::StripAsciiWhitespace(part)));
  }
  return out;
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// T5Config.__init__: "gated-ACT" or "ACT"; "gated-gelu" means gelu_new for backwards
// compatibility.
absl::Status DeriveT5Activation(const std::string& feed_forward_proj, std::string* dense_act_fn,
                                bool* is_gated_act) {
  std::vector<std::string> act_info = absl::StrSplit(feed_forward_proj, '-');
  if ((act_info.size() > 1 && act_info.front() != "gated") || act_info.size() > 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config key \"feed_forward_proj\": \"", feed_forward_proj,
        "\" is not of the form gated-{ACT} or {ACT} (e.g. gated-gelu, relu)"));
  }
  *dense_act_fn = act_info.back();
  *is_gated_act = act_info.front() == "gated";
  if (feed_forward_proj == "gated-gelu") *dense_act_fn = "gelu_new";
  return absl::OkStatus();
}

// Typed reads of the final config with transformers' defaults for absent (or null) keys, within
// the loader's size limits (model_limits.h), so that no size makes the creator allocate toward
// a model the engine would refuse anyway.
class ConfigView {
 public:
  explicit ConfigView(const json& j) : j_(j), reader_(j, "config") {}

  bool Has(const char* key) const { return reader_.Has(key); }
  const json& At(const char* key) const { return j_.at(key); }

  absl::StatusOr<int64_t> Int(const char* key, int64_t def, int64_t min_value, int64_t max_value) const {
    int64_t out = def;
    RETURN_IF_ERROR(reader_.Int64(key, &out, min_value, max_value));
    return out;
  }

  absl::StatusOr<bool> Bool(const char* key, bool def) const {
    bool out = def;
    RETURN_IF_ERROR(reader_.Bool(key, &out));
    return out;
  }

  absl::StatusOr<std::string> String(const char* key, const std::string& def) const {
    std::string out = def;
    RETURN_IF_ERROR(reader_.String(key, &out));
    return out;
  }

  // architectures[0], or `def` when absent.
  absl::StatusOr<std::string> Architecture(const std::string& def) const {
    if (!Has("architectures")) return def;
    const json& a = j_.at("architectures");
    if (!a.is_array() || a.empty() || !a[0].is_string()) {
      return Error("architectures", "must be a non-empty list of class names");
    }
    return a[0].get<std::string>();
  }

  static absl::Status Error(const char* key, const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("config: \"", key, "\" ", what));
  }

 private:
  const json& j_;
  JsonFieldReader reader_;
};

using Init = ModelTensorSpec::Init;

class SpecList {
 public:
  void Add(std::string name, std::vector<int64_t> shape, Init init) {
    specs_.push_back(ModelTensorSpec{std::move(name), std::move(shape), init});
  }
  void Linear(const std::string& prefix, int64_t in, int64_t out, bool bias) {
    Add(prefix + ".weight", {out, in}, Init::kNormal);
    if (bias) Add(prefix + ".bias", {out}, Init::kZeros);
  }
  void LayerNorm(const std::string& prefix, int64_t n) {
    Add(prefix + ".weight", {n}, Init::kOnes);
    Add(prefix + ".bias", {n}, Init::kZeros);
  }
  std::vector<ModelTensorSpec> Take() { return std::move(specs_); }

 private:
  std::vector<ModelTensorSpec> specs_;
};

// transformers 4.40.2 modeling_deberta_v2.py: DebertaV2Model / DebertaV2ForSequenceClassification.
absl::StatusOr<std::vector<ModelTensorSpec>> DebertaSpecs(const ConfigView& c) {
  ASSIGN_OR_RETURN(std::string arch, c.Architecture("DebertaV2Model"));
  std::string prefix;
  if (arch == "DebertaV2ForSequenceClassification") {
    prefix = "deberta.";
  } else if (arch != "DebertaV2Model") {
    return ConfigView::Error("architectures", absl::StrCat(
        "cannot create a \"", arch,
        "\" (supported: DebertaV2Model, DebertaV2ForSequenceClassification)"));
  }
  ASSIGN_OR_RETURN(int64_t H, c.Int("hidden_size", 1536, 1, kMaxModelWidth));
  ASSIGN_OR_RETURN(int64_t layers, c.Int("num_hidden_layers", 24, 0, kMaxLayers));
  ASSIGN_OR_RETURN(int64_t heads, c.Int("num_attention_heads", 24, 1, kMaxModelWidth));
  ASSIGN_OR_RETURN(int64_t I, c.Int("intermediate_size", 6144, 1, kMaxFeedForwardSize));
  ASSIGN_OR_RETURN(int64_t V, c.Int("vocab_size", 128100, 1, kMaxVocabSize));
  ASSIGN_OR_RETURN(int64_t max_pos, c.Int("max_position_embeddings", 512, 1, kMaxSequenceLength));
  ASSIGN_OR_RETURN(int64_t type_vocab, c.Int("type_vocab_size", 0, 0, kMaxVocabSize));
  ASSIGN_OR_RETURN(int64_t E, c.Int("embedding_size", H, 1, kMaxModelWidth));
  ASSIGN_OR_RETURN(bool position_biased_input, c.Bool("position_biased_input", true));
  ASSIGN_OR_RETURN(bool relative_attention, c.Bool("relative_attention", false));
  ASSIGN_OR_RETURN(int64_t max_rel, c.Int("max_relative_positions", -1, INT32_MIN, kMaxSequenceLength));
  ASSIGN_OR_RETURN(int64_t buckets, c.Int("position_buckets", -1, INT32_MIN, kMaxSequenceLength));
  ASSIGN_OR_RETURN(std::string norm_rel_ebd, c.String("norm_rel_ebd", "none"));
  ASSIGN_OR_RETURN(int64_t conv_kernel, c.Int("conv_kernel_size", 0, INT32_MIN, kMaxSequenceLength));
  ASSIGN_OR_RETURN(int64_t conv_groups, c.Int("conv_groups", 1, 1, kMaxModelWidth));
  ASSIGN_OR_RETURN(bool share_att_key, c.Bool("share_att_key", false));
  ASSIGN_OR_RETURN(int64_t P, c.Int("pooler_hidden_size", H, 1, kMaxModelWidth));

  if (H % heads != 0) {
    return ConfigView::Error("num_attention_heads",
                             absl::StrCat(heads, " does not divide hidden_size ", H));
  }
  ASSIGN_OR_RETURN(int64_t head_size, c.Int("attention_head_size", H / heads, 1, kMaxModelWidth));
  const int64_t A = heads * head_size;

  // DebertaV2Config turns the old "p2c|c2p" string into a list; None means no extra terms.
  std::vector<std::string> pos_att_type;
  if (c.Has("pos_att_type")) {
    const json& v = c.At("pos_att_type");
    if (v.is_string()) {
      pos_att_type = SplitLowerStrip(v.get<std::string>());
    } else if (v.is_array()) {
      for (const json& e : v) {
        if (!e.is_string()) return ConfigView::Error("pos_att_type", "must hold strings");
        pos_att_type.push_back(e.get<std::string>());
      }
    } else {
      return ConfigView::Error("pos_att_type", "must be a list or a \"p2c|c2p\" string");
    }
  }

  int64_t rel_rows = 0;
  if (relative_attention) {
    const int64_t max_relative = max_rel < 1 ? max_pos : max_rel;
    rel_rows = buckets > 0 ? 2 * buckets : 2 * max_relative;
  }
  const bool conv = conv_kernel > 0;
  if (conv && H % conv_groups != 0) {
    return ConfigView::Error("conv_groups", absl::StrCat(conv_groups, " does not divide hidden_size ", H));
  }

  int64_t num_labels = 0;
  if (!prefix.empty()) {
    if (c.Has("id2label")) {
      const json& m = c.At("id2label");
      if (!m.is_object() || m.empty() || m.size() > static_cast<size_t>(kMaxLabels)) {
        return ConfigView::Error("id2label", absl::StrCat("must be a non-empty object of at most ", kMaxLabels,
                                                          " labels"));
      }
      num_labels = static_cast<int64_t>(m.size());
    } else {
      ASSIGN_OR_RETURN(num_labels, c.Int("num_labels", 2, 1, kMaxLabels));
    }
  }

  SpecList s;
  const std::string emb = prefix + "embeddings.";
  s.Add(emb + "word_embeddings.weight", {V, E}, Init::kNormal);
  if (position_biased_input) s.Add(emb + "position_embeddings.weight", {max_pos, E}, Init::kNormal);
  if (type_vocab > 0) s.Add(emb + "token_type_embeddings.weight", {type_vocab, E}, Init::kNormal);
  if (E != H) s.Linear(emb + "embed_proj", E, H, /*bias=*/false);
  s.LayerNorm(emb + "LayerNorm", H);

  const std::string enc = prefix + "encoder.";
  for (int64_t i = 0; i < layers; ++i) {
    const std::string l = absl::StrCat(enc, "layer.", i, ".");
    s.Linear(l + "attention.self.query_proj", H, A, true);
    s.Linear(l + "attention.self.key_proj", H, A, true);
    s.Linear(l + "attention.self.value_proj", H, A, true);
    if (relative_attention && !share_att_key) {
      if (Contains(pos_att_type, "c2p")) s.Linear(l + "attention.self.pos_key_proj", H, A, true);
      if (Contains(pos_att_type, "p2c")) s.Linear(l + "attention.self.pos_query_proj", H, A, true);
    }
    s.Linear(l + "attention.output.dense", A, H, true);
    s.LayerNorm(l + "attention.output.LayerNorm", H);
    s.Linear(l + "intermediate.dense", H, I, true);
    s.Linear(l + "output.dense", I, H, true);
    s.LayerNorm(l + "output.LayerNorm", H);
  }
  if (relative_attention) {
    if (rel_rows <= 0) {
      return ConfigView::Error("position_buckets",
                               "and max_relative_positions leave no relative positions");
    }
    s.Add(enc + "rel_embeddings.weight", {rel_rows, H}, Init::kNormal);
  }
  if (Contains(SplitLowerStrip(norm_rel_ebd), "layer_norm")) s.LayerNorm(enc + "LayerNorm", H);
  if (conv) {
    s.Add(enc + "conv.conv.weight", {H, H / conv_groups, conv_kernel}, Init::kNormal);
    s.Add(enc + "conv.conv.bias", {H}, Init::kZeros);
    s.LayerNorm(enc + "conv.LayerNorm", H);
  }
  if (!prefix.empty()) {
    s.Linear("pooler.dense", P, P, true);
    s.Linear("classifier", P, num_labels, true);
  }
  return s.Take();
}

// transformers 4.40.2 modeling_t5.py: T5EncoderModel.
absl::StatusOr<std::vector<ModelTensorSpec>> T5Specs(const ConfigView& c) {
  ASSIGN_OR_RETURN(std::string arch, c.Architecture("T5EncoderModel"));
  if (arch != "T5EncoderModel") {
    return ConfigView::Error("architectures", absl::StrCat("cannot create a \"", arch,
                                                           "\" (supported: T5EncoderModel)"));
  }
  ASSIGN_OR_RETURN(int64_t D, c.Int("d_model", 512, 1, kMaxModelWidth));
  ASSIGN_OR_RETURN(int64_t d_kv, c.Int("d_kv", 64, 1, kMaxModelWidth));
  ASSIGN_OR_RETURN(int64_t d_ff, c.Int("d_ff", 2048, 1, kMaxFeedForwardSize));
  ASSIGN_OR_RETURN(int64_t layers, c.Int("num_layers", 6, 0, kMaxLayers));
  ASSIGN_OR_RETURN(int64_t heads, c.Int("num_heads", 8, 1, kMaxModelWidth));
  ASSIGN_OR_RETURN(int64_t V, c.Int("vocab_size", 32128, 1, kMaxVocabSize));
  ASSIGN_OR_RETURN(int64_t buckets, c.Int("relative_attention_num_buckets", 32, 1, kMaxSequenceLength));
  ASSIGN_OR_RETURN(std::string ff_proj, c.String("feed_forward_proj", "relu"));
  std::string act;
  bool gated = false;
  RETURN_IF_ERROR(DeriveT5Activation(ff_proj, &act, &gated));
  // PretrainedConfig sets leftover keys after T5Config.__init__, so an explicit value wins.
  ASSIGN_OR_RETURN(gated, c.Bool("is_gated_act", gated));
  const int64_t inner = heads * d_kv;

  SpecList s;
  s.Add("shared.weight", {V, D}, Init::kNormal);
  s.Add("encoder.embed_tokens.weight", {V, D}, Init::kNormal);
  for (int64_t i = 0; i < layers; ++i) {
    const std::string b = absl::StrCat("encoder.block.", i, ".layer.");
    s.Linear(b + "0.SelfAttention.q", D, inner, false);
    s.Linear(b + "0.SelfAttention.k", D, inner, false);
    s.Linear(b + "0.SelfAttention.v", D, inner, false);
    s.Linear(b + "0.SelfAttention.o", inner, D, false);
    if (i == 0) {
      s.Add(b + "0.SelfAttention.relative_attention_bias.weight", {buckets, heads}, Init::kNormal);
    }
    s.Add(b + "0.layer_norm.weight", {D}, Init::kOnes);
    if (gated) {
      s.Linear(b + "1.DenseReluDense.wi_0", D, d_ff, false);
      s.Linear(b + "1.DenseReluDense.wi_1", D, d_ff, false);
    } else {
      s.Linear(b + "1.DenseReluDense.wi", D, d_ff, false);
    }
    s.Linear(b + "1.DenseReluDense.wo", d_ff, D, false);
    s.Add(b + "1.layer_norm.weight", {D}, Init::kOnes);
  }
  s.Add("encoder.final_layer_norm.weight", {D}, Init::kOnes);
  return s.Take();
}

// ---------------------------------------------------------------------------------------------
// Options and config.json.

absl::Status CheckNonNegative(const char* option, int value) {
  if (value < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(option, ": must be positive (0 = the family default), got ", value));
  }
  return absl::OkStatus();
}

absl::StatusOr<StDType> ParseStorageDType(const std::string& dtype) {
  if (dtype == "float32") return StDType::kF32;
  if (dtype == "float16") return StDType::kF16;
  if (dtype == "bfloat16") return StDType::kBF16;
  return absl::InvalidArgumentError(
      absl::StrCat("dtype: unknown dtype \"", dtype, "\" (known: float32, float16, bfloat16)"));
}

struct Sizes {
  int hidden, layers, heads, intermediate, vocab;
};

absl::StatusOr<Sizes> ResolveSizes(const CreateModelOptions& o, Family family,
                                   int64_t vocab_from_file) {
  RETURN_IF_ERROR(CheckNonNegative("hidden", o.hidden));
  RETURN_IF_ERROR(CheckNonNegative("layers", o.layers));
  RETURN_IF_ERROR(CheckNonNegative("heads", o.heads));
  RETURN_IF_ERROR(CheckNonNegative("intermediate", o.intermediate));
  RETURN_IF_ERROR(CheckNonNegative("vocab", o.vocab));
  RETURN_IF_ERROR(CheckNonNegative("embedding_size", o.embedding_size));
  RETURN_IF_ERROR(CheckNonNegative("num_labels", o.num_labels));
  RETURN_IF_ERROR(CheckNonNegative("dense_out", o.dense_out));
  if (vocab_from_file < 0 || vocab_from_file > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("vocab_file: bad vocabulary size ", vocab_from_file));
  }

  Sizes s;
  s.hidden = o.hidden > 0 ? o.hidden : 768;
  s.layers = o.layers > 0 ? o.layers : 12;
  s.heads = o.heads > 0 ? o.heads : 12;
  const int default_ff = family == Family::kT5V11 ? 2048 : 3072;
  s.intermediate = o.intermediate > 0 ? o.intermediate : default_ff;
  const int default_vocab = IsT5(family) ? 32128 : 128100;
  s.vocab = o.vocab > 0 ? o.vocab
                        : (vocab_from_file > 0 ? static_cast<int>(vocab_from_file) : default_vocab);

  // T5's d_kv may be set independently; DeBERTa's attention needs heads | hidden regardless.
  const bool head_dim_overridden =
      IsT5(family) && o.config_overrides.is_object() && o.config_overrides.contains("d_kv");
  if (s.hidden % s.heads != 0 && !head_dim_overridden) {
    return absl::InvalidArgumentError(
        absl::StrCat("heads: ", s.heads, " does not divide hidden ", s.hidden));
  }
  if (IsT5(family)) {
    if (o.embedding_size > 0) {
      return absl::InvalidArgumentError("embedding_size: only DeBERTa models have one");
    }
    if (o.num_labels > 0) {
      return absl::InvalidArgumentError("num_labels: only DeBERTa models have a classification head");
    }
  }
  if (!std::isfinite(o.init_std) || o.init_std < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("init_std: must be a finite value >= 0, got ", o.init_std));
  }
  RETURN_IF_ERROR(ParseStorageDType(o.dtype).status());
  if (!o.config_overrides.is_object() && !o.config_overrides.is_null()) {
    return absl::InvalidArgumentError("config_overrides: must be a JSON object");
  }
  if (o.dense_out > 0 && !o.sentence_transformers) {
    return absl::InvalidArgumentError("dense_out: needs sentence_transformers");
  }
  return s;
}

json DebertaConfig(const CreateModelOptions& o, Family family, const Sizes& s) {
  json j = json::object();
  j["architectures"] = json::array({o.num_labels > 0 ? "DebertaV2ForSequenceClassification"
                                                     : "DebertaV2Model"});
  j["attention_probs_dropout_prob"] = 0.1;
  j["hidden_act"] = "gelu";
  j["hidden_dropout_prob"] = 0.1;
  j["hidden_size"] = s.hidden;
  j["initializer_range"] = ShortestDouble(o.init_std);
  j["intermediate_size"] = s.intermediate;
  j["layer_norm_eps"] = 1e-7;
  j["max_position_embeddings"] = 512;
  j["max_relative_positions"] = -1;
  j["model_type"] = "deberta-v2";
  j["norm_rel_ebd"] = "layer_norm";
  j["num_attention_heads"] = s.heads;
  j["num_hidden_layers"] = s.layers;
  j["pad_token_id"] = 0;
  j["pooler_dropout"] = 0;
  j["pooler_hidden_act"] = "gelu";
  j["pooler_hidden_size"] = s.hidden;
  j["pos_att_type"] = json::array({"p2c", "c2p"});
  j["position_biased_input"] = false;
  j["position_buckets"] = 256;
  j["relative_attention"] = true;
  j["share_att_key"] = true;
  j["type_vocab_size"] = 0;
  j["vocab_size"] = s.vocab;
  if (o.embedding_size > 0) j["embedding_size"] = o.embedding_size;
  if (family == Family::kDebertaV2) {
    j["conv_kernel_size"] = 3;
    j["conv_act"] = "gelu";
  }
  if (o.num_labels > 0) {
    json id2label = json::object(), label2id = json::object();
    for (int i = 0; i < o.num_labels; ++i) {
      const std::string label = absl::StrCat("LABEL_", i);
      id2label[std::to_string(i)] = label;
      label2id[label] = i;
    }
    j["id2label"] = std::move(id2label);
    j["label2id"] = std::move(label2id);
  }
  return j;
}

json T5ConfigJson(const CreateModelOptions& o, Family family, const Sizes& s) {
  json j = json::object();
  const std::string ff_proj = family == Family::kT5V11 ? "gated-gelu" : "relu";
  std::string act;
  bool gated = false;
  (void)DeriveT5Activation(ff_proj, &act, &gated);
  j["architectures"] = json::array({"T5EncoderModel"});
  j["classifier_dropout"] = 0.0;
  j["d_ff"] = s.intermediate;
  j["d_kv"] = s.hidden % s.heads == 0 ? s.hidden / s.heads : 64;  // else d_kv is overridden
  j["d_model"] = s.hidden;
  j["decoder_start_token_id"] = 0;
  j["dense_act_fn"] = act;
  j["dropout_rate"] = 0.1;
  j["eos_token_id"] = 1;
  j["feed_forward_proj"] = ff_proj;
  j["initializer_factor"] = 1.0;
  j["is_encoder_decoder"] = true;
  j["is_gated_act"] = gated;
  j["layer_norm_epsilon"] = 1e-6;
  j["model_type"] = "t5";
  j["num_decoder_layers"] = s.layers;
  j["num_heads"] = s.heads;
  j["num_layers"] = s.layers;
  j["pad_token_id"] = 0;
  j["relative_attention_max_distance"] = 128;
  j["relative_attention_num_buckets"] = 32;
  j["use_cache"] = true;
  j["vocab_size"] = s.vocab;
  if (family == Family::kT5V11) j["tie_word_embeddings"] = false;
  return j;
}

// Applies the overrides key by key, then re-derives what depends on an overridden key.
absl::Status ApplyOverrides(const json& overrides, Family family, json* config) {
  if (overrides.is_null()) return absl::OkStatus();
  json& j = *config;
  for (const auto& [key, value] : overrides.items()) {
    if (value.is_null()) {
      j.erase(key);
    } else {
      j[key] = value;
    }
  }
  auto overridden = [&](const char* key) { return overrides.contains(key); };
  auto int_value = [&](const char* key, int64_t* out) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_number_integer()) return false;
    // 2^64 - 1 would read as -1; ModelTensorSpecs refuses it with its value.
    if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) return false;
    *out = it->get<int64_t>();
    return true;
  };
  if (!IsT5(family)) {
    if (overridden("hidden_size") && !overridden("pooler_hidden_size") && j.contains("hidden_size")) {
      j["pooler_hidden_size"] = j["hidden_size"];
    }
    return absl::OkStatus();
  }
  if (overridden("feed_forward_proj") && j.contains("feed_forward_proj") &&
      j["feed_forward_proj"].is_string()) {
    std::string act;
    bool gated = false;
    RETURN_IF_ERROR(DeriveT5Activation(j["feed_forward_proj"].get<std::string>(), &act, &gated));
    if (!overridden("dense_act_fn")) j["dense_act_fn"] = act;
    if (!overridden("is_gated_act")) j["is_gated_act"] = gated;
  }
  if ((overridden("d_model") || overridden("num_heads")) && !overridden("d_kv")) {
    int64_t d_model = 0, heads = 0;
    if (int_value("d_model", &d_model) && int_value("num_heads", &heads) && heads > 0) {
      if (d_model % heads != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "config_overrides: num_heads ", heads, " does not divide d_model ", d_model,
            "; override d_kv too"));
      }
      j["d_kv"] = d_model / heads;
    }
  }
  if (overridden("num_layers") && !overridden("num_decoder_layers") && j.contains("num_layers")) {
    j["num_decoder_layers"] = j["num_layers"];
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Weights.

uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// One independent stream per tensor: values do not depend on which other tensors exist.
uint64_t TensorSeed(uint64_t seed, std::string_view name) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (char c : name) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return SplitMix64(SplitMix64(seed) ^ h);
}

// Normal(0, stddev) by Marsaglia's polar method on 53-bit uniforms from mt19937_64: portable
// (unlike std::normal_distribution, whose algorithm is up to the standard library) and fast.
void FillNormal(uint64_t stream_seed, double stddev, float* out, size_t n) {
  if (stddev == 0.0) {
    std::fill(out, out + n, 0.0f);
    return;
  }
  std::mt19937_64 rng(stream_seed);
  constexpr double kScale = 2.0 / 9007199254740992.0;  // 2 * 2^-53
  size_t i = 0;
  while (i < n) {
    const double u = static_cast<double>(rng() >> 11) * kScale - 1.0;
    const double v = static_cast<double>(rng() >> 11) * kScale - 1.0;
    const double s = u * u + v * v;
    if (s >= 1.0 || s == 0.0) continue;
    const double m = stddev * std::sqrt(-2.0 * std::log(s) / s);
    out[i++] = static_cast<float>(u * m);
    if (i < n) out[i++] = static_cast<float>(v * m);
  }
}

size_t StorageSize(StDType dtype) { return dtype == StDType::kF32 ? 4 : 2; }

// Converts buf[0, n) in place from float32 to the 16-bit storage type (element i moves from
// byte 4i to byte 2i, so a forward pass never overwrites what it has yet to read).
void ConvertInPlace(float* buf, size_t n, StDType dtype) {
  if (dtype == StDType::kF32) return;
  auto* out = reinterpret_cast<uint16_t*>(buf);
  for (size_t i = 0; i < n; ++i) {
    float f;
    std::memcpy(&f, buf + i, sizeof(f));
    const uint16_t h = dtype == StDType::kF16 ? FloatToHalfBits(f) : FloatToBFloat16Bits(f);
    std::memcpy(out + i, &h, sizeof(h));
  }
}

// Generates each tensor into one reused buffer and hands it to the writer (which keeps a copy).
class WeightWriter {
 public:
  WeightWriter(uint64_t seed, double stddev, StDType dtype)
      : seed_(seed), stddev_(stddev), dtype_(dtype) {
    writer_.SetMetadata({{"format", "pt"}});
  }

  // `values_from` names the tensor whose stream to use (tied weights); "" = this one's.
  absl::Status Add(const ModelTensorSpec& spec, const std::string& values_from = "") {
    uint64_t numel = 1;
    for (int64_t d : spec.shape) {
      if (d < 0 || __builtin_mul_overflow(numel, static_cast<uint64_t>(d), &numel) ||
          numel > (uint64_t{1} << 40)) {
        return absl::InvalidArgumentError(absl::StrCat("tensor \"", spec.name, "\" is too large"));
      }
    }
    const size_t n = static_cast<size_t>(numel);
    if (n > capacity_) {
      buffer_.reset();
      capacity_ = 0;
      buffer_.reset(new (std::nothrow) float[n]);
      if (buffer_ == nullptr) {
        return absl::ResourceExhaustedError(absl::StrCat("tensor \"", spec.name, "\" ", ShapeText(spec.shape),
                                                         ": cannot allocate ", n * sizeof(float), " bytes"));
      }
      capacity_ = n;
    }
    float* buf = buffer_.get();
    switch (spec.init) {
      case Init::kNormal:
        FillNormal(TensorSeed(seed_, values_from.empty() ? spec.name : values_from), stddev_, buf, n);
        break;
      case Init::kZeros:
        std::fill(buf, buf + n, 0.0f);
        break;
      case Init::kOnes:
        std::fill(buf, buf + n, 1.0f);
        break;
    }
    ConvertInPlace(buf, n, dtype_);
    return writer_.Add(spec.name, dtype_, spec.shape, buf, n * StorageSize(dtype_));
  }

  absl::Status Write(const std::string& path) const { return writer_.WriteFile(path); }

 private:
  uint64_t seed_;
  double stddev_;
  StDType dtype_;
  SafetensorsWriter writer_;
  std::unique_ptr<float[]> buffer_;
  size_t capacity_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Files.

std::string DumpJson(const json& j) {
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

absl::Status WriteJson(const std::string& path, const json& j) {
  return WriteStringToFile(path, DumpJson(j));
}

absl::Status MakeDirs(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !IsDirectory(dir)) {
    return absl::FailedPreconditionError(absl::StrCat(
        dir, ": cannot create directory", ec ? absl::StrCat(": ", ec.message()) : ""));
  }
  return absl::OkStatus();
}

struct TokenizerFiles {
  std::string model_name;
  json tokenizer_config;
  json special_tokens_map;
};

TokenizerFiles TokenizerFilesFor(Family family) {
  TokenizerFiles t;
  if (IsT5(family)) {
    t.model_name = "spiece.model";
    t.tokenizer_config = {{"eos_token", "</s>"},      {"unk_token", "<unk>"},
                          {"pad_token", "<pad>"},     {"extra_ids", 0},
                          {"model_max_length", 512},  {"tokenizer_class", "T5Tokenizer"}};
    t.special_tokens_map = {{"eos_token", "</s>"}, {"unk_token", "<unk>"}, {"pad_token", "<pad>"}};
  } else {
    t.model_name = "spm.model";
    t.tokenizer_config = {{"do_lower_case", false},   {"split_by_punct", false},
                          {"bos_token", "[CLS]"},     {"eos_token", "[SEP]"},
                          {"unk_token", "[UNK]"},     {"sep_token", "[SEP]"},
                          {"pad_token", "[PAD]"},     {"cls_token", "[CLS]"},
                          {"mask_token", "[MASK]"},   {"model_max_length", 512},
                          {"tokenizer_class", "DebertaV2Tokenizer"}, {"vocab_type", "spm"}};
    t.special_tokens_map = {{"bos_token", "[CLS]"}, {"eos_token", "[SEP]"}, {"unk_token", "[UNK]"},
                            {"sep_token", "[SEP]"}, {"pad_token", "[PAD]"}, {"cls_token", "[CLS]"},
                            {"mask_token", "[MASK]"}};
  }
  return t;
}

// Pieces plus the special tokens the tokenizer appends because they are not pieces.
int64_t VocabNeeded(const std::vector<std::string>& pieces, const TokenizerFiles& t) {
  std::set<std::string> have(pieces.begin(), pieces.end());
  std::set<std::string> missing;
  for (const auto& [key, value] : t.special_tokens_map.items()) {
    if (value.is_string() && have.count(value.get<std::string>()) == 0) {
      missing.insert(value.get<std::string>());
    }
  }
  return static_cast<int64_t>(pieces.size() + missing.size());
}

// Files an earlier run may have left that this run does not write (on overwrite).
const char* const kManagedFiles[] = {
    "spm.model",          "spiece.model",           "tokenizer_config.json",
    "special_tokens_map.json", "modules.json",      "sentence_bert_config.json",
    "1_Pooling/config.json",   "2_Dense/config.json", "2_Dense/model.safetensors"};
const char* const kManagedDirs[] = {"1_Pooling", "2_Dense", "2_Normalize", "3_Normalize"};

void RemoveStaleFiles(const std::string& dir) {
  std::error_code ec;
  for (const char* f : kManagedFiles) std::filesystem::remove(JoinPath(dir, f), ec);
  for (const char* d : kManagedDirs) std::filesystem::remove(JoinPath(dir, d), ec);  // if empty
}

absl::Status WriteSentenceTransformers(const CreateModelOptions& o, const std::string& dir,
                                       int64_t hidden, StDType dtype) {
  json modules = json::array();
  auto add_module = [&](const std::string& path, const std::string& type) {
    const int idx = static_cast<int>(modules.size());
    modules.push_back({{"idx", idx},
                       {"name", std::to_string(idx)},
                       {"path", path},
                       {"type", "sentence_transformers.models." + type}});
  };
  add_module("", "Transformer");
  add_module("1_Pooling", "Pooling");
  RETURN_IF_ERROR(MakeDirs(JoinPath(dir, "1_Pooling")));
  RETURN_IF_ERROR(WriteJson(JoinPath(dir, "1_Pooling/config.json"),
                            {{"word_embedding_dimension", hidden},
                             {"pooling_mode_cls_token", false},
                             {"pooling_mode_mean_tokens", true},
                             {"pooling_mode_max_tokens", false},
                             {"pooling_mode_mean_sqrt_len_tokens", false},
                             {"pooling_mode_weightedmean_tokens", false},
                             {"pooling_mode_lasttoken", false},
                             {"include_prompt", true}}));
  if (o.dense_out > 0) {
    add_module("2_Dense", "Dense");
    const std::string dense_dir = JoinPath(dir, "2_Dense");
    RETURN_IF_ERROR(MakeDirs(dense_dir));
    WeightWriter w(o.seed, o.init_std, dtype);
    RETURN_IF_ERROR(w.Add({"linear.weight", {o.dense_out, hidden}, Init::kNormal}, "2_Dense/linear.weight"));
    RETURN_IF_ERROR(w.Add({"linear.bias", {o.dense_out}, Init::kZeros}));
    RETURN_IF_ERROR(w.Write(JoinPath(dense_dir, "model.safetensors")));
    RETURN_IF_ERROR(WriteJson(JoinPath(dense_dir, "config.json"),
                              {{"in_features", hidden},
                               {"out_features", o.dense_out},
                               {"bias", true},
                               {"activation_function", "torch.nn.modules.activation.Tanh"}}));
  }
  const std::string normalize = modules.size() == 3 ? "3_Normalize" : "2_Normalize";
  add_module(normalize, "Normalize");
  RETURN_IF_ERROR(MakeDirs(JoinPath(dir, normalize)));
  RETURN_IF_ERROR(WriteJson(JoinPath(dir, "sentence_bert_config.json"),
                            {{"max_seq_length", 512}, {"do_lower_case", false}}));
  return WriteJson(JoinPath(dir, "modules.json"), modules);
}

bool ReadVarint(const uint8_t*& p, const uint8_t* end, uint64_t* value) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (p == end) return false;
    const uint8_t b = *p++;
    v |= static_cast<uint64_t>(b & 0x7F) << shift;
    if ((b & 0x80) == 0) {
      *value = v;
      return true;
    }
  }
  return false;
}

// Walks one message's fields; calls on_bytes(field, data, size) for length-delimited ones.
template <typename F>
bool WalkMessage(const uint8_t* p, const uint8_t* end, F on_bytes) {
  while (p < end) {
    uint64_t key = 0, v = 0;
    if (!ReadVarint(p, end, &key)) return false;
    const uint64_t field = key >> 3;
    if (field == 0) return false;
    switch (key & 7) {
      case 0:
        if (!ReadVarint(p, end, &v)) return false;
        break;
      case 1:
        if (end - p < 8) return false;
        p += 8;
        break;
      case 2:
        if (!ReadVarint(p, end, &v) || v > static_cast<uint64_t>(end - p)) return false;
        if (!on_bytes(field, p, static_cast<size_t>(v))) return false;
        p += v;
        break;
      case 5:
        if (end - p < 4) return false;
        p += 4;
        break;
      default:  // groups (3, 4) are not used by sentencepiece; 6, 7 do not exist
        return false;
    }
  }
  return true;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

uint16_t FloatToHalfBits(float value) {
  uint32_t x;
  std::memcpy(&x, &value, sizeof(x));
  const uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7FFFFFFFu;
  if (x >= 0x47800000u) {  // >= 65536 (or inf / NaN): always infinity or NaN in half
    if (x > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u | ((x >> 13) & 0x3FFu));
    return static_cast<uint16_t>(sign | 0x7C00u);
  }
  if (x < 0x38800000u) {  // below half's smallest normal (2^-14): subnormal or zero
    // Adding 0.5 aligns the value's bits at half's subnormal unit (2^-24); the FPU rounds
    // to nearest even.
    float f, magic;
    const uint32_t magic_bits = 0x3F000000u;  // 0.5f
    std::memcpy(&f, &x, sizeof(f));
    std::memcpy(&magic, &magic_bits, sizeof(magic));
    const float s = f + magic;
    uint32_t r;
    std::memcpy(&r, &s, sizeof(r));
    return static_cast<uint16_t>(sign | (r - magic_bits));
  }
  // Normal: rebias the exponent (127 -> 15) and round the 13 dropped bits to nearest even; a
  // carry out of the mantissa correctly bumps the exponent (up to infinity at 65520).
  const uint32_t mant_odd = (x >> 13) & 1u;
  x += 0xC8000000u + 0xFFFu + mant_odd;
  return static_cast<uint16_t>(sign | (x >> 13));
}

uint16_t FloatToBFloat16Bits(float value) {
  uint32_t x;
  std::memcpy(&x, &value, sizeof(x));
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7FFFu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

absl::StatusOr<std::vector<std::string>> ReadSentencePiecePieces(std::string_view model_proto) {
  const auto* begin = reinterpret_cast<const uint8_t*>(model_proto.data());
  const uint8_t* end = begin + model_proto.size();
  std::vector<std::string> pieces;
  const bool ok = WalkMessage(begin, end, [&](uint64_t field, const uint8_t* p, size_t n) {
    if (field != 1) return true;
    std::string piece;
    bool ok_inner = WalkMessage(p, p + n, [&](uint64_t f, const uint8_t* q, size_t m) {
      if (f == 1) piece.assign(reinterpret_cast<const char*>(q), m);
      return true;
    });
    pieces.push_back(std::move(piece));
    return ok_inner;
  });
  if (!ok) {
    return absl::InvalidArgumentError("not a serialized SentencePiece model (bad protobuf encoding)");
  }
  if (pieces.empty()) {
    return absl::InvalidArgumentError("not a SentencePiece model: it holds no pieces");
  }
  return pieces;
}

absl::StatusOr<std::vector<ModelTensorSpec>> ModelTensorSpecs(const nlohmann::json& config) {
  if (!config.is_object()) return absl::InvalidArgumentError("config: not a JSON object");
  ConfigView c(config);
  ASSIGN_OR_RETURN(std::string model_type, c.String("model_type", ""));
  if (model_type == "deberta-v2") return DebertaSpecs(c);
  if (model_type == "t5") return T5Specs(c);
  return ConfigView::Error("model_type", absl::StrCat("\"", model_type,
                                                      "\" is not supported (supported: deberta-v2, t5)"));
}

absl::StatusOr<nlohmann::json> BuildModelConfig(const CreateModelOptions& options,
                                                int64_t vocab_from_file) {
  ASSIGN_OR_RETURN(Family family, ParseFamily(options.family));
  ASSIGN_OR_RETURN(Sizes sizes, ResolveSizes(options, family, vocab_from_file));
  json config = IsT5(family) ? T5ConfigJson(options, family, sizes)
                             : DebertaConfig(options, family, sizes);
  config["torch_dtype"] = options.dtype;
  config["transformers_version"] = kTransformersVersion;
  RETURN_IF_ERROR(ApplyOverrides(options.config_overrides, family, &config));
  const std::string want_type = IsT5(family) ? "t5" : "deberta-v2";
  if (!config.contains("model_type") || config["model_type"] != want_type) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config_overrides: model_type must stay \"", want_type, "\" for family ", options.family));
  }
  return config;
}

namespace {
absl::Status CreateModelDirectoryOrThrow(const CreateModelOptions& options, const std::string& out_dir);
}  // namespace

absl::Status CreateModelDirectory(const CreateModelOptions& options, const std::string& out_dir) {
  // The sizes are within the loader's limits, but their product can still exceed the memory
  // at hand (the writer holds every tensor until the file is written).
  try {
    return CreateModelDirectoryOrThrow(options, out_dir);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        absl::StrCat(out_dir, ": out of memory while generating the weights; choose smaller sizes"));
  }
}

namespace {

absl::Status CreateModelDirectoryOrThrow(const CreateModelOptions& options, const std::string& out_dir) {
  if (out_dir.empty()) return absl::InvalidArgumentError("out_dir: empty path");
  ASSIGN_OR_RETURN(Family family, ParseFamily(options.family));
  ASSIGN_OR_RETURN(StDType dtype, ParseStorageDType(options.dtype));
  // Validate everything that does not need the vocab file before reading it.
  RETURN_IF_ERROR(BuildModelConfig(options).status());

  const TokenizerFiles tok = TokenizerFilesFor(family);
  std::string spm_bytes;
  int64_t vocab_from_file = 0;
  if (!options.vocab_file.empty()) {
    ASSIGN_OR_RETURN(spm_bytes, ReadFileToString(options.vocab_file));
    auto pieces = ReadSentencePiecePieces(spm_bytes);
    if (!pieces.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("vocab_file: ", options.vocab_file, ": ", pieces.status().message()));
    }
    vocab_from_file = VocabNeeded(*pieces, tok);
  }
  ASSIGN_OR_RETURN(json config, BuildModelConfig(options, vocab_from_file));
  ASSIGN_OR_RETURN(std::vector<ModelTensorSpec> specs, ModelTensorSpecs(config));

  if (IsDirectory(out_dir) || FileExists(out_dir)) {
    if (!IsDirectory(out_dir)) {
      return absl::FailedPreconditionError(absl::StrCat(out_dir, ": exists and is not a directory"));
    }
    if (FileExists(JoinPath(out_dir, "config.json"))) {
      if (!options.overwrite) {
        return absl::FailedPreconditionError(absl::StrCat(
            out_dir, ": already holds a model (config.json); pass overwrite to replace it"));
      }
      std::error_code ec;
      std::filesystem::remove(JoinPath(out_dir, "config.json"), ec);
      RemoveStaleFiles(out_dir);
    }
  }
  RETURN_IF_ERROR(MakeDirs(out_dir));

  {
    WeightWriter weights(options.seed, options.init_std, dtype);
    for (const ModelTensorSpec& spec : specs) {
      // T5's encoder.embed_tokens is the shared embedding module: same values.
      const bool tied = spec.name == "encoder.embed_tokens.weight";
      RETURN_IF_ERROR(weights.Add(spec, tied ? "shared.weight" : ""));
    }
    RETURN_IF_ERROR(weights.Write(JoinPath(out_dir, "model.safetensors")));
  }

  if (!options.vocab_file.empty()) {
    RETURN_IF_ERROR(WriteStringToFile(JoinPath(out_dir, tok.model_name), spm_bytes));
    RETURN_IF_ERROR(WriteJson(JoinPath(out_dir, "tokenizer_config.json"), tok.tokenizer_config));
    RETURN_IF_ERROR(WriteJson(JoinPath(out_dir, "special_tokens_map.json"), tok.special_tokens_map));
  }
  if (options.sentence_transformers) {
    const char* hidden_key = IsT5(family) ? "d_model" : "hidden_size";
    ConfigView c(config);
    ASSIGN_OR_RETURN(int64_t hidden, c.Int(hidden_key, 0, 1, kMaxModelWidth));
    RETURN_IF_ERROR(WriteSentenceTransformers(options, out_dir, hidden, dtype));
  }
  // Last: a directory without config.json is not a model yet, so a failed run can be retried.
  return WriteJson(JoinPath(out_dir, "config.json"), config);
}

}  // namespace

}  // namespace relserve
