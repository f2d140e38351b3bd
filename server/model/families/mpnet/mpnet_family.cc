#include "server/model/families/mpnet/mpnet_family.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "server/model/families/family_support.h"
#include "server/model/families/mpnet/mpnet_config.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

using nlohmann::json;

class MpnetDescriptor final : public FamilyDescriptor {
 public:
  const char* name() const override { return "mpnet"; }
  std::vector<std::string> model_types() const override { return {"mpnet"}; }
  std::vector<ArchitectureSpec> architectures(const std::string&) const override {
    return {{"MPNetModel", HeadKind::kNone, true},
            {"MPNetForSequenceClassification", HeadKind::kSequenceClassification, true},
            {"MPNetForMaskedLM", HeadKind::kMaskedLm, true},
            {"MPNetForTokenClassification", HeadKind::kTokenClassification, true}};
  }

  absl::Status ParseConfig(const JsonFieldReader& r, const json&, ModelConfig* config) const override {
    auto c = std::make_shared<MpnetConfig>();
    RETURN_IF_ERROR(ParseMpnetConfig(r, c.get()));
    config->hidden_size = c->hidden_size;
    config->num_layers = c->num_hidden_layers;
    config->vocab_size = c->vocab_size;
    config->type_vocab_size = 0;  // no token types: token_type_ids are ignored
    config->pad_token_id = c->pad_token_id;
    config->max_length = c->max_input_length();
    config->max_length_limit = c->max_input_length();
    config->max_length_limit_source =
        absl::StrCat("max_position_embeddings ", c->max_position_embeddings, " (positions start after padding_idx ",
                     kMpnetPaddingIdx, ")");
    config->family_config = std::move(c);
    return absl::OkStatus();
  }

  // transformers 4.40.2 modeling_mpnet.py: MPNetModel (with its pooler),
  // MPNetForSequenceClassification (MPNetModel(add_pooling_layer=False) under "mpnet.", then
  // MPNetClassificationHead) and MPNetForMaskedLM (the same backbone, then MPNetLMHead).
  absl::StatusOr<std::vector<ModelTensorSpec>> CheckpointLayout(const ModelConfig& config) const override {
    RETURN_IF_ERROR(CheckCreatable(*this, config));
    const auto& c = config.family_config_as<MpnetConfig>();
    const bool classification = config.head == HeadKind::kSequenceClassification;
    const bool masked_lm = config.head == HeadKind::kMaskedLm;
    const bool token_classifier = config.head == HeadKind::kTokenClassification;
    const std::string p = classification || masked_lm || token_classifier ? "mpnet." : "";
    const int64_t H = c.hidden_size, I = c.intermediate_size;
    LayoutBuilder s;
    s.Add(p + "embeddings.word_embeddings.weight", {c.vocab_size, H});
    s.Add(p + "embeddings.position_embeddings.weight", {c.max_position_embeddings, H});
    s.LayerNorm(p + "embeddings.LayerNorm", H);
    for (int i = 0; i < c.num_hidden_layers; ++i) {
      const std::string l = absl::StrCat(p, "encoder.layer.", i, ".");
      for (const char* proj : {"q", "k", "v", "o"}) s.Linear(l + "attention.attn." + proj, H, H, true);
      s.LayerNorm(l + "attention.LayerNorm", H);
      s.Linear(l + "intermediate.dense", H, I, true);
      s.Linear(l + "output.dense", I, H, true);
      s.LayerNorm(l + "output.LayerNorm", H);
    }
    s.Add(p + "encoder.relative_attention_bias.weight", {c.relative_attention_num_buckets, c.num_attention_heads});
    if (classification) {
      s.Linear("classifier.dense", H, H, true);
      s.Linear("classifier.out_proj", H, config.num_labels, true);
    } else if (masked_lm) {
      AddMaskedLmHead(*MaskedLmHead(config), &s);
    } else if (token_classifier) {
      // MPNetForTokenClassification: MPNetModel(add_pooling_layer=False), then the classifier.
      s.Linear(*TokenClassifier(config), H, config.num_labels, true);
    } else {
      s.Linear("pooler.dense", H, H, true);
    }
    return s.Take();
  }

  // MPNetLMHead: dense, gelu, layer_norm, the decoder (tied to the word embeddings) and bias.
  std::optional<MaskedLmHeadLayout> MaskedLmHead(const ModelConfig& config) const override {
    if (config.head != HeadKind::kMaskedLm) return std::nullopt;
    const auto& c = config.family_config_as<MpnetConfig>();
    MaskedLmHeadLayout h;
    h.dense = "lm_head.dense";
    h.activation = "gelu";
    h.layer_norm = "lm_head.layer_norm";
    h.layer_norm_eps = c.layer_norm_eps;
    h.hidden = c.hidden_size;
    h.width = c.hidden_size;
    h.vocab = c.vocab_size;
    h.decoder_weight = "lm_head.decoder.weight";
    h.bias = {"lm_head.bias", "lm_head.decoder.bias"};
    h.tied = config.tie_word_embeddings;
    h.word_embeddings = "mpnet.embeddings.word_embeddings.weight";
    return h;
  }

  // What from_pretrained drops, with a warning, for the architecture: the heads of the other
  // MPNet classes (MPNetForMaskedLM's lm_head, MPNetForQuestionAnswering's qa_outputs, the
  // classifier of the others), and the pooler wherever the architecture has none
  // (MPNetForSequenceClassification builds MPNetModel(add_pooling_layer=False)). MPNetModel's
  // own pooler is checked and skipped by the model: its output is not served.
  std::vector<std::string> IgnoredPrefixes(const ModelConfig& config) const override {
    std::vector<std::string> ignored = {"lm_head.", "qa_outputs.", "mpnet.pooler."};
    if (config.head == HeadKind::kSequenceClassification || config.head == HeadKind::kTokenClassification) {
      ignored.push_back("pooler.");
    }
    if (config.head != HeadKind::kSequenceClassification && config.head != HeadKind::kTokenClassification) {
      ignored.push_back("classifier.");
    }
    return ignored;
  }

  TokenizerFamily tokenizer_family(const ModelConfig&) const override { return TokenizerFamily::kMpnet; }

  double FlopsPerToken(const ModelConfig& config, int64_t length) const override {
    const auto& c = config.family_config_as<MpnetConfig>();
    const double L = static_cast<double>(length), H = c.hidden_size, I = c.intermediate_size;
    // q, k, v and o; the feed-forward; q.k and p.v. The relative bias is a look-up.
    const double per_layer = 2 * H * 3 * H + 2 * H * H + 2 * 2 * H * I + 2 * 2 * L * H;
    return per_layer * c.num_hidden_layers;
  }

  std::vector<std::string> create_variants() const override { return {"mpnet"}; }

  // As sentence-transformers/all-mpnet-base-v2's config.json (microsoft/mpnet-base's sizes).
  absl::StatusOr<json> CreateConfig(const CreateRequest& q) const override {
    if (q.embedding_size > 0) return absl::InvalidArgumentError("embedding_size: MPNet models have none");
    const int hidden = q.hidden > 0 ? q.hidden : 768;
    const int heads = q.heads > 0 ? q.heads : 12;
    RETURN_IF_ERROR(CheckHeadsDivideHidden(heads, hidden));
    json j = json::object();
    j["architectures"] = json::array({q.num_labels > 0 ? "MPNetForSequenceClassification" : "MPNetModel"});
    j["attention_probs_dropout_prob"] = 0.1;
    j["bos_token_id"] = 0;
    j["eos_token_id"] = 2;
    j["hidden_act"] = "gelu";
    j["hidden_dropout_prob"] = 0.1;
    j["hidden_size"] = hidden;
    j["initializer_range"] = ShortestDouble(static_cast<float>(q.init_std));
    j["intermediate_size"] = q.intermediate > 0 ? q.intermediate : 3072;
    j["layer_norm_eps"] = 1e-5;
    j["max_position_embeddings"] = 514;
    j["model_type"] = "mpnet";
    j["num_attention_heads"] = heads;
    j["num_hidden_layers"] = q.layers > 0 ? q.layers : 12;
    j["pad_token_id"] = 1;
    j["relative_attention_num_buckets"] = 32;
    j["vocab_size"] = q.vocab > 0 ? q.vocab : 30527;
    if (q.num_labels > 0) AddDefaultLabels(q.num_labels, &j);
    return j;
  }

  absl::Status RederiveAfterOverrides(const json&, json*) const override { return absl::OkStatus(); }

  CreateTokenizerSpec CreateTokenizer(const std::string&) const override {
    CreateTokenizerSpec t;
    t.format = CreateTokenizerSpec::VocabFormat::kLines;
    t.vocab_file_name = "vocab.txt";
    t.tokenizer_family = TokenizerFamily::kMpnet;
    // MPNetTokenizer's, as all-mpnet-base-v2 saves them.
    t.tokenizer_config = {{"do_lower_case", true},    {"model_max_length", 512},
                          {"strip_accents", nullptr}, {"tokenize_chinese_chars", true},
                          {"tokenizer_class", "MPNetTokenizer"}};
    return t;
  }
};

}  // namespace

const FamilyDescriptor& MpnetFamily() {
  static const MpnetDescriptor kDescriptor;
  return kDescriptor;
}

}  // namespace relserve
