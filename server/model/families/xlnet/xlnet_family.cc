#include "server/model/families/xlnet/xlnet_family.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "server/model/families/family_support.h"
#include "server/model/families/xlnet/xlnet_config.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

using nlohmann::json;
using Init = ModelTensorSpec::Init;

class XlnetDescriptor final : public FamilyDescriptor {
 public:
  const char* name() const override { return "xlnet"; }
  std::vector<std::string> model_types() const override { return {"xlnet"}; }
  std::vector<ArchitectureSpec> architectures(const std::string&) const override {
    return {{"XLNetModel", HeadKind::kNone, true},
            {"XLNetForSequenceClassification", HeadKind::kSequenceClassification, true},
            {"XLNetForTokenClassification", HeadKind::kTokenClassification, true},
            {"XLNetLMHeadModel", HeadKind::kNone, false}};
  }

  absl::Status ParseConfig(const JsonFieldReader& r, const json& j, ModelConfig* config) const override {
    auto c = std::make_shared<XlnetConfig>();
    RETURN_IF_ERROR(ParseXlnetConfig(r, j, c.get()));
    if (config->head == HeadKind::kSequenceClassification) {
      // The labels are the registry's to read; the summary's shape depends on their count.
      ModelConfig labels;
      RETURN_IF_ERROR(ReadClassificationLabels(r, j, &labels));
      RETURN_IF_ERROR(CheckXlnetSequenceSummary(r, *c, labels.num_labels));
    }
    config->hidden_size = c->d_model;
    config->num_layers = c->n_layer;
    config->vocab_size = c->vocab_size;
    config->type_vocab_size = 0;
    config->token_types_are_segment_ids = true;
    config->pad_token_id = c->pad_token_id;
    config->max_length = 512;  // relative positions only: nothing in the weights bounds it
    config->family_config = std::move(c);
    return absl::OkStatus();
  }

  // transformers 4.40.2 modeling_xlnet.py: XLNetModel / XLNetForSequenceClassification, in
  // state_dict order (a module's own parameters before its submodules').
  absl::StatusOr<std::vector<ModelTensorSpec>> CheckpointLayout(const ModelConfig& config) const override {
    RETURN_IF_ERROR(CheckCreatable(*this, config));
    const auto& c = config.family_config_as<XlnetConfig>();
    const bool classifier = config.head == HeadKind::kSequenceClassification;
    const bool token_classifier = config.head == HeadKind::kTokenClassification;
    const std::string p = classifier || token_classifier ? "transformer." : "";
    const int64_t H = c.d_model, N = c.n_head, D = c.d_head, F = c.d_inner;
    LayoutBuilder s;
    s.Add(p + "mask_emb", {1, 1, H});
    s.Add(p + "word_embedding.weight", {c.vocab_size, H});
    for (int i = 0; i < c.n_layer; ++i) {
      const std::string l = absl::StrCat(p, "layer.", i, ".");
      // XLNetRelativeAttention: every parameter is drawn from the normal init.
      for (const char* m : {"q", "k", "v", "o", "r"}) s.Add(l + "rel_attn." + m, {H, N, D});
      for (const char* b : {"r_r_bias", "r_s_bias", "r_w_bias"}) s.Add(l + "rel_attn." + b, {N, D});
      s.Add(l + "rel_attn.seg_embed", {2, N, D});
      s.LayerNorm(l + "rel_attn.layer_norm", H);
      s.LayerNorm(l + "ff.layer_norm", H);
      s.Linear(l + "ff.layer_1", H, F, true);
      s.Linear(l + "ff.layer_2", F, H, true);
    }
    if (classifier) {
      if (c.summary_use_proj) s.Linear("sequence_summary.summary", H, c.summary_width(config.num_labels), true);
      s.Linear("logits_proj", H, config.num_labels, true);
    }
    // XLNetForTokenClassification: the classifier on every token (no sequence summary).
    if (token_classifier) s.Linear(*TokenClassifier(config), H, config.num_labels, true);
    return s.Take();
  }

  std::vector<std::string> IgnoredPrefixes(const ModelConfig& config) const override {
    // XLNetLMHeadModel's output layer; the classification head when the architecture has none.
    std::vector<std::string> ignored = {"lm_loss."};
    if (config.head != HeadKind::kTokenClassification) ignored.push_back("classifier.");
    if (config.head != HeadKind::kSequenceClassification) {
      ignored.push_back("sequence_summary.");
      ignored.push_back("logits_proj.");
    }
    return ignored;
  }

  TokenizerFamily tokenizer_family(const ModelConfig&) const override { return TokenizerFamily::kXlnet; }

  double FlopsPerToken(const ModelConfig& config, int64_t length) const override {
    const auto& c = config.family_config_as<XlnetConfig>();
    const double L = static_cast<double>(length);
    const double H = c.d_model, A = c.inner_dim(), F = c.d_inner;
    // The position query against every distance the length reaches (clamp_len bounds them),
    // and the segment scores against seg_embed's two rows. The projected position table is
    // computed once per model, not per token.
    const double distances = c.clamp_len > 0 ? std::min(2 * L - 1, 2.0 * c.clamp_len + 1) : 2 * L - 1;
    const double per_layer = 2 * H * 3 * A + 2 * A * H + 2 * 2 * H * F + 2 * 2 * L * A + 2 * A * distances + 2 * A * 2;
    return per_layer * c.n_layer;
  }

  std::vector<std::string> create_variants() const override { return {"xlnet"}; }

  absl::StatusOr<json> CreateConfig(const CreateRequest& q) const override {
    if (q.embedding_size > 0) return absl::InvalidArgumentError("embedding_size: only DeBERTa and ELECTRA models have one");
    const int hidden = q.hidden > 0 ? q.hidden : 768;
    const int heads = q.heads > 0 ? q.heads : 12;
    const bool d_head_given = q.overrides.is_object() && q.overrides.contains("d_head");
    if (!d_head_given) RETURN_IF_ERROR(CheckHeadsDivideHidden(heads, hidden));
    // XLNetConfig.to_dict for xlnet-base-cased's sizes.
    json j = json::object();
    j["architectures"] = json::array({q.num_labels > 0 ? "XLNetForSequenceClassification" : "XLNetModel"});
    j["attn_type"] = "bi";
    j["bi_data"] = false;
    j["bos_token_id"] = 1;
    j["clamp_len"] = -1;
    j["d_head"] = hidden % heads == 0 ? hidden / heads : 64;  // else d_head is overridden
    j["d_inner"] = q.intermediate > 0 ? q.intermediate : 3072;
    j["d_model"] = hidden;
    j["dropout"] = 0.1;
    j["end_n_top"] = 5;
    j["eos_token_id"] = 2;
    j["ff_activation"] = "gelu";
    j["initializer_range"] = ShortestDouble(static_cast<float>(q.init_std));
    j["layer_norm_eps"] = 1e-12;
    j["mem_len"] = nullptr;
    j["model_type"] = "xlnet";
    j["n_head"] = heads;
    j["n_layer"] = q.layers > 0 ? q.layers : 12;
    j["pad_token_id"] = 5;
    j["reuse_len"] = nullptr;
    j["same_length"] = false;
    j["start_n_top"] = 5;
    j["summary_activation"] = "tanh";
    j["summary_last_dropout"] = 0.1;
    j["summary_type"] = "last";
    j["summary_use_proj"] = true;
    j["untie_r"] = true;
    j["use_mems_eval"] = true;
    j["use_mems_train"] = false;
    j["vocab_size"] = q.vocab > 0 ? q.vocab : 32000;
    if (q.num_labels > 0) AddDefaultLabels(q.num_labels, &j);
    return j;
  }

  absl::Status RederiveAfterOverrides(const json& overrides, json* config) const override {
    json& j = *config;
    if ((overrides.contains("d_model") || overrides.contains("n_head")) && !overrides.contains("d_head")) {
      auto d_model = j.find("d_model"), n_head = j.find("n_head");
      if (d_model != j.end() && n_head != j.end() && d_model->is_number_integer() && n_head->is_number_integer() &&
          n_head->get<int64_t>() > 0) {
        // XLNetConfig refuses any d_head but d_model // n_head (and n_head not dividing d_model).
        j["d_head"] = d_model->get<int64_t>() / n_head->get<int64_t>();
      }
    }
    return absl::OkStatus();
  }

  CreateTokenizerSpec CreateTokenizer(const std::string&) const override {
    CreateTokenizerSpec t;
    t.format = CreateTokenizerSpec::VocabFormat::kSentencePiece;
    t.vocab_file_name = "spiece.model";
    t.tokenizer_family = TokenizerFamily::kXlnet;
    t.tokenizer_config = {{"do_lower_case", false}, {"remove_space", true}, {"keep_accents", false},
                          {"padding_side", "left"}, {"tokenizer_class", "XLNetTokenizer"}};
    return t;
  }
};

}  // namespace

const FamilyDescriptor& XlnetFamily() {
  static const XlnetDescriptor kDescriptor;
  return kDescriptor;
}

}  // namespace relserve
