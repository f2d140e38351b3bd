#include "server/model/families/t5/t5_family.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "server/model/families/family_support.h"
#include "server/model/families/t5/t5_config.h"
#include "server/model_config/model_limits.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

using nlohmann::json;
using Init = ModelTensorSpec::Init;

// T5Config.__init__: "gated-ACT" or "ACT"; "gated-gelu" means gelu_new (the tanh
// approximation) for backwards compatibility.
bool DeriveActivation(const std::string& feed_forward_proj, std::string* dense_act_fn, bool* is_gated_act) {
  std::vector<std::string> act_info = absl::StrSplit(feed_forward_proj, '-');
  if ((act_info.size() > 1 && act_info.front() != "gated") || act_info.size() > 2) return false;
  *dense_act_fn = act_info.back();
  *is_gated_act = act_info.front() == "gated";
  if (feed_forward_proj == "gated-gelu") *dense_act_fn = "gelu_new";
  return true;
}

std::string BadFeedForwardProj(const std::string& value) {
  return absl::StrCat("\"", value, "\" is not of the form gated-{ACT} or {ACT} (e.g. gated-gelu, relu)");
}

absl::Status ParseT5(const JsonFieldReader& r, T5Config* c) {
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
  RETURN_IF_ERROR(ReadTokenId(r, "pad_token_id", c->vocab_size, &c->pad_token_id));
  RETURN_IF_ERROR(ReadTokenId(r, "eos_token_id", c->vocab_size, &c->eos_token_id));
  RETURN_IF_ERROR(r.String("feed_forward_proj", &c->feed_forward_proj));
  if (!DeriveActivation(c->feed_forward_proj, &c->dense_act_fn, &c->is_gated_act)) {
    return r.Error("feed_forward_proj", BadFeedForwardProj(c->feed_forward_proj));
  }
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

class T5Descriptor final : public FamilyDescriptor {
 public:
  const char* name() const override { return "t5"; }
  std::vector<std::string> model_types() const override { return {"t5", "mt5"}; }
  std::vector<ArchitectureSpec> architectures(const std::string&) const override {
    return {{"T5EncoderModel", HeadKind::kNone, true},
            {"T5Model", HeadKind::kNone, false},
            {"T5ForConditionalGeneration", HeadKind::kNone, false},
            {"MT5EncoderModel", HeadKind::kNone, false},
            {"MT5Model", HeadKind::kNone, false},
            {"MT5ForConditionalGeneration", HeadKind::kNone, false}};
  }

  absl::Status ParseConfig(const JsonFieldReader& r, const json&, ModelConfig* config) const override {
    auto c = std::make_shared<T5Config>();
    if (config->model_type == "mt5") {
      // MT5Config's defaults differ from T5Config's.
      c->vocab_size = 250112;
      c->d_ff = 1024;
      c->num_layers = 8;
      c->num_heads = 6;
      c->feed_forward_proj = "gated-gelu";
    }
    RETURN_IF_ERROR(ParseT5(r, c.get()));
    config->hidden_size = c->d_model;
    config->num_layers = c->num_layers;
    config->vocab_size = c->vocab_size;
    config->type_vocab_size = 0;
    config->pad_token_id = c->pad_token_id;
    config->max_length = 512;  // relative positions only: nothing in the weights bounds it
    config->family_config = std::move(c);
    return absl::OkStatus();
  }

  // transformers 4.40.2 modeling_t5.py: T5EncoderModel.
  absl::StatusOr<std::vector<ModelTensorSpec>> CheckpointLayout(const ModelConfig& config) const override {
    RETURN_IF_ERROR(CheckCreatable(*this, config));
    const auto& c = config.family_config_as<T5Config>();
    const int64_t D = c.d_model, inner = c.inner_dim(), F = c.d_ff;
    LayoutBuilder s;
    s.Add("shared.weight", {c.vocab_size, D});
    s.AddTied("encoder.embed_tokens.weight", {c.vocab_size, D}, "shared.weight");
    for (int i = 0; i < c.num_layers; ++i) {
      const std::string b = absl::StrCat("encoder.block.", i, ".layer.");
      s.Linear(b + "0.SelfAttention.q", D, inner, false);
      s.Linear(b + "0.SelfAttention.k", D, inner, false);
      s.Linear(b + "0.SelfAttention.v", D, inner, false);
      s.Linear(b + "0.SelfAttention.o", inner, D, false);
      if (i == 0) {
        s.Add(b + "0.SelfAttention.relative_attention_bias.weight", {c.relative_attention_num_buckets, c.num_heads});
      }
      s.Add(b + "0.layer_norm.weight", {D}, Init::kOnes);
      if (c.is_gated_act) {
        s.Linear(b + "1.DenseReluDense.wi_0", D, F, false);
        s.Linear(b + "1.DenseReluDense.wi_1", D, F, false);
      } else {
        s.Linear(b + "1.DenseReluDense.wi", D, F, false);
      }
      s.Linear(b + "1.DenseReluDense.wo", F, D, false);
      s.Add(b + "1.layer_norm.weight", {D}, Init::kOnes);
    }
    s.Add("encoder.final_layer_norm.weight", {D}, Init::kOnes);
    return s.Take();
  }

  std::vector<std::string> IgnoredPrefixes(const ModelConfig&) const override {
    return {"decoder.", "lm_head."};  // T5ForConditionalGeneration / T5Model: the encoder is all we run
  }

  TokenizerFamily tokenizer_family(const ModelConfig&) const override { return TokenizerFamily::kT5; }

  double FlopsPerToken(const ModelConfig& config, int64_t length) const override {
    const auto& c = config.family_config_as<T5Config>();
    const double L = static_cast<double>(length);
    const double D = c.d_model, I = c.inner_dim(), F = c.d_ff;
    const double per_layer = 2 * D * 3 * I + 2 * I * D + (c.is_gated_act ? 3 : 2) * 2 * D * F + 2 * 2 * L * I;
    return per_layer * c.num_layers;
  }

  std::vector<std::string> create_variants() const override { return {"t5", "t5-v1.1"}; }

  absl::StatusOr<json> CreateConfig(const CreateRequest& q) const override {
    if (q.embedding_size > 0) return absl::InvalidArgumentError("embedding_size: only DeBERTa and ELECTRA models have one");
    if (q.num_labels > 0) return absl::InvalidArgumentError("num_labels: T5 encoders have no classification head");
    const int hidden = q.hidden > 0 ? q.hidden : 768;
    const int heads = q.heads > 0 ? q.heads : 12;
    // d_kv may be set independently; otherwise it is d_model / num_heads.
    const bool d_kv_given = q.overrides.is_object() && q.overrides.contains("d_kv");
    if (!d_kv_given) RETURN_IF_ERROR(CheckHeadsDivideHidden(heads, hidden));
    const bool v11 = q.variant == "t5-v1.1";
    const std::string ff_proj = v11 ? "gated-gelu" : "relu";
    std::string act;
    bool gated = false;
    DeriveActivation(ff_proj, &act, &gated);
    const int layers = q.layers > 0 ? q.layers : 12;
    json j = json::object();
    j["architectures"] = json::array({"T5EncoderModel"});
    j["classifier_dropout"] = 0.0;
    j["d_ff"] = q.intermediate > 0 ? q.intermediate : (v11 ? 2048 : 3072);
    j["d_kv"] = hidden % heads == 0 ? hidden / heads : 64;  // else d_kv is overridden
    j["d_model"] = hidden;
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
    j["num_decoder_layers"] = layers;
    j["num_heads"] = heads;
    j["num_layers"] = layers;
    j["pad_token_id"] = 0;
    j["relative_attention_max_distance"] = 128;
    j["relative_attention_num_buckets"] = 32;
    j["use_cache"] = true;
    j["vocab_size"] = q.vocab > 0 ? q.vocab : 32128;
    if (v11) j["tie_word_embeddings"] = false;
    return j;
  }

  absl::Status RederiveAfterOverrides(const json& overrides, json* config) const override {
    json& j = *config;
    auto overridden = [&](const char* key) { return overrides.contains(key); };
    auto int_value = [&](const char* key, int64_t* out) {
      auto it = j.find(key);
      if (it == j.end() || !it->is_number_integer()) return false;
      // 2^64 - 1 would read as -1; ParseModelConfig refuses it with its value.
      if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) return false;
      *out = it->get<int64_t>();
      return true;
    };
    if (overridden("feed_forward_proj") && j.contains("feed_forward_proj") && j["feed_forward_proj"].is_string()) {
      const std::string proj = j["feed_forward_proj"].get<std::string>();
      std::string act;
      bool gated = false;
      if (!DeriveActivation(proj, &act, &gated)) {
        return absl::InvalidArgumentError(absl::StrCat("config key \"feed_forward_proj\": ", BadFeedForwardProj(proj)));
      }
      if (!overridden("dense_act_fn")) j["dense_act_fn"] = act;
      if (!overridden("is_gated_act")) j["is_gated_act"] = gated;
    }
    if ((overridden("d_model") || overridden("num_heads")) && !overridden("d_kv")) {
      int64_t d_model = 0, heads = 0;
      if (int_value("d_model", &d_model) && int_value("num_heads", &heads) && heads > 0) {
        if (d_model % heads != 0) {
          return absl::InvalidArgumentError(absl::StrCat("config_overrides: num_heads ", heads,
                                                         " does not divide d_model ", d_model, "; override d_kv too"));
        }
        j["d_kv"] = d_model / heads;
      }
    }
    if (overridden("num_layers") && !overridden("num_decoder_layers") && j.contains("num_layers")) {
      j["num_decoder_layers"] = j["num_layers"];
    }
    return absl::OkStatus();
  }

  CreateTokenizerSpec CreateTokenizer(const std::string&) const override {
    CreateTokenizerSpec t;
    t.format = CreateTokenizerSpec::VocabFormat::kSentencePiece;
    t.vocab_file_name = "spiece.model";
    t.tokenizer_family = TokenizerFamily::kT5;
    t.tokenizer_config = {{"extra_ids", 0}, {"model_max_length", 512}, {"tokenizer_class", "T5Tokenizer"}};
    return t;
  }
};

}  // namespace

const FamilyDescriptor& T5Family() {
  static const T5Descriptor kDescriptor;
  return kDescriptor;
}

}  // namespace relserve
