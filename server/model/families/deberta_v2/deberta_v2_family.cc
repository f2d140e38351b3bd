#include "server/model/families/deberta_v2/deberta_v2_family.h"

#include <algorithm>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/model/families/deberta_v2/deberta_v2_config.h"
#include "server/model/families/family_support.h"
#include "server/model_config/model_limits.h"
#include "server/util/status_macros.h"

namespace relserve {

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

namespace {

using nlohmann::json;
using Init = ModelTensorSpec::Init;

std::vector<std::string> SplitLowerBar(const std::string& s) {
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(s, '|')) {
    out.push_back(absl::AsciiStrToLower(absl::StripAsciiWhitespace(part)));
  }
  return out;
}

absl::Status ParseDeberta(const JsonFieldReader& r, const json& j, DebertaV2Config* c) {
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
  RETURN_IF_ERROR(ReadTokenId(r, "pad_token_id", c->vocab_size, &c->pad_token_id));
  RETURN_IF_ERROR(r.Bool("position_biased_input", &c->position_biased_input));
  RETURN_IF_ERROR(r.Bool("share_att_key", &c->share_att_key));
  RETURN_IF_ERROR(r.Int("conv_kernel_size", &c->conv_kernel_size, 0, kMaxSequenceLength));
  RETURN_IF_ERROR(r.Int("conv_groups", &c->conv_groups, 1, kMaxModelWidth));
  RETURN_IF_ERROR(r.String("conv_act", &c->conv_act));
  RETURN_IF_ERROR(r.String("pooler_hidden_act", &c->pooler_hidden_act));

  if (c->hidden_size % c->num_attention_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        r.source(), ": hidden_size ", c->hidden_size, " is not a multiple of num_attention_heads ",
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
  RETURN_IF_ERROR(CheckActivation(r, "hidden_act", c->hidden_act));
  RETURN_IF_ERROR(CheckActivation(r, "pooler_hidden_act", c->pooler_hidden_act));
  RETURN_IF_ERROR(CheckActivation(r, "conv_act", c->conv_act));
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

class DebertaV2Descriptor final : public FamilyDescriptor {
 public:
  const char* name() const override { return "deberta-v2"; }
  std::vector<std::string> model_types() const override { return {"deberta-v2"}; }
  std::vector<ArchitectureSpec> architectures(const std::string&) const override {
    return {{"DebertaV2Model", HeadKind::kNone, true},
            {"DebertaV2ForSequenceClassification", HeadKind::kSequenceClassification, true},
            {"DebertaV2ForMaskedLM", HeadKind::kMaskedLm, true},
            {"DebertaV2ForTokenClassification", HeadKind::kTokenClassification, true}};
  }

  absl::Status ParseConfig(const JsonFieldReader& r, const json& j, ModelConfig* config) const override {
    auto c = std::make_shared<DebertaV2Config>();
    RETURN_IF_ERROR(ParseDeberta(r, j, c.get()));
    config->hidden_size = c->hidden_size;
    config->num_layers = c->num_hidden_layers;
    config->vocab_size = c->vocab_size;
    config->type_vocab_size = c->type_vocab_size;
    config->pad_token_id = c->pad_token_id;
    config->max_length = c->max_position_embeddings;
    if (c->position_biased_input) {
      config->max_length_limit = c->max_position_embeddings;
      config->max_length_limit_source = absl::StrCat("max_position_embeddings ", c->max_position_embeddings);
    }
    config->family_config = std::move(c);
    return absl::OkStatus();
  }

  // transformers 4.40.2 modeling_deberta_v2.py: DebertaV2Model, DebertaV2ForSequenceClassification
  // and DebertaV2ForMaskedLM.
  absl::StatusOr<std::vector<ModelTensorSpec>> CheckpointLayout(const ModelConfig& config) const override {
    RETURN_IF_ERROR(CheckCreatable(*this, config));
    const auto& c = config.family_config_as<DebertaV2Config>();
    const bool classifier = config.head == HeadKind::kSequenceClassification;
    const bool token_classifier = config.head == HeadKind::kTokenClassification;
    const std::string prefix = classifier || token_classifier || config.head == HeadKind::kMaskedLm ? "deberta." : "";
    const int64_t H = c.hidden_size, E = c.embedding_size, A = c.all_head_size(), I = c.intermediate_size;
    LayoutBuilder s;
    const std::string emb = prefix + "embeddings.";
    s.Add(emb + "word_embeddings.weight", {c.vocab_size, E});
    if (c.position_biased_input) s.Add(emb + "position_embeddings.weight", {c.max_position_embeddings, E});
    if (c.type_vocab_size > 0) s.Add(emb + "token_type_embeddings.weight", {c.type_vocab_size, E});
    if (E != H) s.Linear(emb + "embed_proj", E, H, /*bias=*/false);
    s.LayerNorm(emb + "LayerNorm", H);
    const std::string enc = prefix + "encoder.";
    for (int i = 0; i < c.num_hidden_layers; ++i) {
      const std::string l = absl::StrCat(enc, "layer.", i, ".");
      s.Linear(l + "attention.self.query_proj", H, A, true);
      s.Linear(l + "attention.self.key_proj", H, A, true);
      s.Linear(l + "attention.self.value_proj", H, A, true);
      if (c.relative_attention && !c.share_att_key) {
        if (c.has_c2p()) s.Linear(l + "attention.self.pos_key_proj", H, A, true);
        if (c.has_p2c()) s.Linear(l + "attention.self.pos_query_proj", H, A, true);
      }
      s.Linear(l + "attention.output.dense", A, H, true);
      s.LayerNorm(l + "attention.output.LayerNorm", H);
      s.Linear(l + "intermediate.dense", H, I, true);
      s.Linear(l + "output.dense", I, H, true);
      s.LayerNorm(l + "output.LayerNorm", H);
    }
    if (c.relative_attention) s.Add(enc + "rel_embeddings.weight", {c.rel_embeddings_rows(), H});
    if (c.layer_norm_rel_embeddings()) s.LayerNorm(enc + "LayerNorm", H);
    if (c.conv_kernel_size > 0) {
      s.Add(enc + "conv.conv.weight", {H, H / c.conv_groups, c.conv_kernel_size});
      s.Add(enc + "conv.conv.bias", {H}, Init::kZeros);
      s.LayerNorm(enc + "conv.LayerNorm", H);
    }
    if (classifier) {
      const int64_t P = c.pooler_hidden_size;
      s.Linear("pooler.dense", P, P, true);
      s.Linear("classifier", P, config.num_labels, true);
    }
    if (config.head == HeadKind::kMaskedLm) AddMaskedLmHead(*MaskedLmHead(config), &s);
    // DebertaV2ForTokenClassification: the classifier on every token, no pooler.
    if (token_classifier) s.Linear(*TokenClassifier(config), H, config.num_labels, true);
    return s.Take();
  }

  // DebertaV2OnlyMLMHead: DebertaV2PredictionHeadTransform (dense from hidden_size to
  // embedding_size, hidden_act, LayerNorm of embedding_size), then the decoder (embedding_size
  // -> vocab, tied to the word embeddings, which are embedding_size wide) and the bias.
  std::optional<MaskedLmHeadLayout> MaskedLmHead(const ModelConfig& config) const override {
    if (config.head != HeadKind::kMaskedLm) return std::nullopt;
    const auto& c = config.family_config_as<DebertaV2Config>();
    MaskedLmHeadLayout h;
    h.dense = "cls.predictions.transform.dense";
    h.activation = c.hidden_act;
    h.layer_norm = "cls.predictions.transform.LayerNorm";
    h.layer_norm_eps = c.layer_norm_eps;
    h.hidden = c.hidden_size;
    h.width = c.embedding_size;
    h.vocab = c.vocab_size;
    h.decoder_weight = "cls.predictions.decoder.weight";
    h.bias = {"cls.predictions.bias", "cls.predictions.decoder.bias"};
    h.tied = config.tie_word_embeddings;
    h.word_embeddings = "deberta.embeddings.word_embeddings.weight";
    return h;
  }

  std::vector<std::string> IgnoredPrefixes(const ModelConfig& config) const override {
    // Heads of other DeBERTa architectures, which transformers also drops with a warning.
    std::vector<std::string> ignored = {"lm_predictions.", "mask_predictions.", "cls.", "qa_outputs."};
    if (config.head != HeadKind::kSequenceClassification) ignored.push_back("pooler.");
    if (config.head != HeadKind::kSequenceClassification && config.head != HeadKind::kTokenClassification) {
      ignored.push_back("classifier.");
    }
    return ignored;
  }

  TokenizerFamily tokenizer_family(const ModelConfig&) const override { return TokenizerFamily::kDeberta; }

  double FlopsPerToken(const ModelConfig& config, int64_t length) const override {
    const auto& c = config.family_config_as<DebertaV2Config>();
    const double L = static_cast<double>(length);
    const double H = c.hidden_size, A = c.all_head_size(), I = c.intermediate_size;
    double per_layer = 2 * H * 3 * A + 2 * A * H + 2 * 2 * H * I + 2 * 2 * L * A;
    if (c.relative_attention) {
      const double rows = std::min<double>(2 * L - 1, 2.0 * c.attention_span());
      per_layer += (c.has_c2p() ? 2 * A * rows : 0) + (c.has_p2c() ? 2 * A * rows : 0);
    }
    return per_layer * c.num_hidden_layers;
  }

  std::vector<std::string> create_variants() const override { return {"deberta-v3", "deberta-v2"}; }

  absl::StatusOr<json> CreateConfig(const CreateRequest& q) const override {
    const int hidden = q.hidden > 0 ? q.hidden : 768;
    const int heads = q.heads > 0 ? q.heads : 12;
    RETURN_IF_ERROR(CheckHeadsDivideHidden(heads, hidden));
    json j = json::object();
    j["architectures"] = json::array({q.num_labels > 0 ? "DebertaV2ForSequenceClassification" : "DebertaV2Model"});
    j["attention_probs_dropout_prob"] = 0.1;
    j["hidden_act"] = "gelu";
    j["hidden_dropout_prob"] = 0.1;
    j["hidden_size"] = hidden;
    j["initializer_range"] = ShortestDouble(static_cast<float>(q.init_std));
    j["intermediate_size"] = q.intermediate > 0 ? q.intermediate : 3072;
    j["layer_norm_eps"] = 1e-7;
    j["max_position_embeddings"] = 512;
    j["max_relative_positions"] = -1;
    j["model_type"] = "deberta-v2";
    j["norm_rel_ebd"] = "layer_norm";
    j["num_attention_heads"] = heads;
    j["num_hidden_layers"] = q.layers > 0 ? q.layers : 12;
    j["pad_token_id"] = 0;
    j["pooler_dropout"] = 0;
    j["pooler_hidden_act"] = "gelu";
    j["pooler_hidden_size"] = hidden;
    j["pos_att_type"] = json::array({"p2c", "c2p"});
    j["position_biased_input"] = false;
    j["position_buckets"] = 256;
    j["relative_attention"] = true;
    j["share_att_key"] = true;
    j["type_vocab_size"] = 0;
    j["vocab_size"] = q.vocab > 0 ? q.vocab : 128100;
    if (q.embedding_size > 0) j["embedding_size"] = q.embedding_size;
    if (q.variant == "deberta-v2") {
      j["conv_kernel_size"] = 3;
      j["conv_act"] = "gelu";
    }
    if (q.num_labels > 0) AddDefaultLabels(q.num_labels, &j);
    return j;
  }

  absl::Status RederiveAfterOverrides(const json& overrides, json* config) const override {
    json& j = *config;
    if (overrides.contains("hidden_size") && !overrides.contains("pooler_hidden_size") && j.contains("hidden_size")) {
      j["pooler_hidden_size"] = j["hidden_size"];
    }
    return absl::OkStatus();
  }

  CreateTokenizerSpec CreateTokenizer(const std::string&) const override {
    CreateTokenizerSpec t;
    t.format = CreateTokenizerSpec::VocabFormat::kSentencePiece;
    t.vocab_file_name = "spm.model";
    t.tokenizer_family = TokenizerFamily::kDeberta;
    t.tokenizer_config = {{"do_lower_case", false},   {"split_by_punct", false},
                          {"model_max_length", 512},  {"tokenizer_class", "DebertaV2Tokenizer"},
                          {"vocab_type", "spm"}};
    return t;
  }
};

}  // namespace

const FamilyDescriptor& DebertaV2Family() {
  static const DebertaV2Descriptor kDescriptor;
  return kDescriptor;
}

}  // namespace relserve
