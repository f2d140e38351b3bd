#include "server/model/families/bert/bert_family.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "server/model/families/bert/bert_config.h"
#include "server/model/families/family_support.h"
#include "server/model_config/model_limits.h"
#include "server/util/status_macros.h"

namespace relserve {

const char* PositionEmbeddingName(BertConfig::PositionEmbedding type) {
  switch (type) {
    case BertConfig::PositionEmbedding::kAbsolute: return "absolute";
    case BertConfig::PositionEmbedding::kRelativeKey: return "relative_key";
    case BertConfig::PositionEmbedding::kRelativeKeyQuery: return "relative_key_query";
  }
  return "absolute";
}

std::string BertBasePrefix(const std::string& model_type) {
  if (model_type == "electra") return "electra.";
  if (model_type == "roberta" || model_type == "xlm-roberta") return "roberta.";
  return "bert.";
}

namespace {

using nlohmann::json;
using Variant = BertConfig::Variant;
using PositionEmbedding = BertConfig::PositionEmbedding;

Variant VariantOf(const std::string& model_type) {
  if (model_type == "roberta" || model_type == "xlm-roberta") return Variant::kRoberta;
  if (model_type == "electra") return Variant::kElectra;
  return Variant::kBert;
}

// configuration_{bert,roberta,xlm_roberta,electra}.py defaults, then the keys of config.json.
absl::Status ParseBert(const JsonFieldReader& r, const std::string& model_type, BertConfig* c) {
  c->variant = VariantOf(model_type);
  if (c->variant == Variant::kRoberta) c->pad_token_id = 1;
  if (c->variant == Variant::kElectra) {
    c->hidden_size = 256;
    c->num_attention_heads = 4;
    c->intermediate_size = 1024;
    c->embedding_size = 128;
  }
  RETURN_IF_ERROR(r.Int("vocab_size", &c->vocab_size, 1, kMaxVocabSize));
  RETURN_IF_ERROR(r.Int("hidden_size", &c->hidden_size, 1, kMaxModelWidth));
  RETURN_IF_ERROR(r.Int("num_hidden_layers", &c->num_hidden_layers, 0, kMaxLayers));
  RETURN_IF_ERROR(r.Int("num_attention_heads", &c->num_attention_heads, 1, kMaxModelWidth));
  RETURN_IF_ERROR(r.Int("intermediate_size", &c->intermediate_size, 1, kMaxFeedForwardSize));
  RETURN_IF_ERROR(r.String("hidden_act", &c->hidden_act));
  RETURN_IF_ERROR(CheckActivation(r, "hidden_act", c->hidden_act));
  RETURN_IF_ERROR(r.Int("max_position_embeddings", &c->max_position_embeddings, 1, kMaxSequenceLength));
  // nn.Embedding(0, hidden) builds, but every forward looks up token type 0 in it (the
  // all-zeros default included), which transformers fails with an IndexError.
  RETURN_IF_ERROR(r.Int("type_vocab_size", &c->type_vocab_size, 0, kMaxVocabSize));
  if (c->type_vocab_size == 0) {
    return r.Error("type_vocab_size", "is 0, but the embeddings look up token type 0 for every token (at least 1)");
  }
  RETURN_IF_ERROR(r.Double("layer_norm_eps", &c->layer_norm_eps, 0, kMaxLayerNormEps, /*min_exclusive=*/true));
  RETURN_IF_ERROR(ReadTokenId(r, "pad_token_id", c->vocab_size, &c->pad_token_id));

  std::string position = "absolute";
  RETURN_IF_ERROR(r.String("position_embedding_type", &position));
  if (position == "absolute") {
    c->position_embedding_type = PositionEmbedding::kAbsolute;
  } else if (position == "relative_key") {
    c->position_embedding_type = PositionEmbedding::kRelativeKey;
  } else if (position == "relative_key_query") {
    c->position_embedding_type = PositionEmbedding::kRelativeKeyQuery;
  } else {
    return r.Error("position_embedding_type",
                   absl::StrCat("\"", position, "\" is not one of absolute, relative_key, relative_key_query"));
  }

  if (c->hidden_size % c->num_attention_heads != 0) {
    return r.Error("num_attention_heads", absl::StrCat(c->num_attention_heads, " does not divide hidden_size ",
                                                       c->hidden_size));
  }
  c->embedding_size = c->variant == Variant::kElectra ? c->embedding_size : c->hidden_size;
  if (c->variant == Variant::kElectra) {
    RETURN_IF_ERROR(r.Int("embedding_size", &c->embedding_size, 1, kMaxModelWidth));
  }
  // A decoder's attention is causal (and may attend to an encoder): relserve runs encoders.
  for (const char* key : {"is_decoder", "add_cross_attention"}) {
    bool value = false;
    RETURN_IF_ERROR(r.Bool(key, &value));
    if (value) return r.Error(key, "is true, which makes a decoder; relserve runs encoders only");
  }
  if (c->variant == Variant::kRoberta) {
    // RobertaEmbeddings' position table has padding_idx = pad_token_id, and positions start
    // after it.
    if (c->pad_token_id + 1 >= c->max_position_embeddings) {
      return r.Error("pad_token_id", absl::StrCat(c->pad_token_id, " leaves no positions in max_position_embeddings ",
                                                  c->max_position_embeddings,
                                                  " (positions start after padding_idx = pad_token_id)"));
    }
  }
  return absl::OkStatus();
}

const char* BaseArchitecturePrefix(const std::string& model_type) {
  if (model_type == "roberta") return "Roberta";
  if (model_type == "xlm-roberta") return "XLMRoberta";
  if (model_type == "electra") return "Electra";
  return "Bert";
}

class BertDescriptor final : public FamilyDescriptor {
 public:
  const char* name() const override { return "bert"; }
  std::vector<std::string> model_types() const override { return {"bert", "roberta", "xlm-roberta", "electra"}; }

  std::vector<ArchitectureSpec> architectures(const std::string& model_type) const override {
    const std::string p = BaseArchitecturePrefix(model_type);
    std::vector<ArchitectureSpec> archs = {{p + "Model", HeadKind::kNone, true},
                                           {p + "ForSequenceClassification", HeadKind::kSequenceClassification, true},
                                           {p + "ForMaskedLM", HeadKind::kMaskedLm, true},
                                           {p + "ForTokenClassification", HeadKind::kTokenClassification, true}};
    if (model_type == "bert" || model_type == "electra") archs.push_back({p + "ForPreTraining", HeadKind::kNone, false});
    // Stanford ColBERT's checkpoints (colbert/modeling/hf_colbert.py): `bert.*` beside the
    // projection `linear.weight`, which the ColBERT head reads (model/heads/colbert_head.h).
    if (model_type == "bert") archs.push_back({"HF_ColBERT", HeadKind::kNone, false});
    return archs;
  }

  absl::Status ParseConfig(const JsonFieldReader& r, const json&, ModelConfig* config) const override {
    auto c = std::make_shared<BertConfig>();
    RETURN_IF_ERROR(ParseBert(r, config->model_type, c.get()));
    config->hidden_size = c->hidden_size;
    config->num_layers = c->num_hidden_layers;
    config->vocab_size = c->vocab_size;
    config->type_vocab_size = c->type_vocab_size;
    config->pad_token_id = c->pad_token_id;
    // The position table bounds absolute positions; the distance table (2M - 1 rows) and the
    // token-type buffer (M entries) bound relative ones to M tokens.
    const int M = c->max_position_embeddings;
    if (c->variant == Variant::kRoberta && !c->relative()) {
      config->max_length_limit = M - c->pad_token_id - 1;
      config->max_length_limit_source =
          absl::StrCat("max_position_embeddings ", M, " - pad_token_id ", c->pad_token_id, " - 1 = ",
                       config->max_length_limit, " (positions start after padding_idx)");
    } else {
      config->max_length_limit = M;
      config->max_length_limit_source = absl::StrCat("max_position_embeddings ", M);
    }
    config->max_length = config->max_length_limit;
    config->family_config = std::move(c);
    return absl::OkStatus();
  }

  // transformers 4.40.2 modeling_{bert,roberta,xlm_roberta,electra}.py: *Model (BERT and
  // RoBERTa with their pooler), *ForSequenceClassification and *ForMaskedLM.
  absl::StatusOr<std::vector<ModelTensorSpec>> CheckpointLayout(const ModelConfig& config) const override {
    RETURN_IF_ERROR(CheckCreatable(*this, config));
    const auto& c = config.family_config_as<BertConfig>();
    const bool classifier = config.head == HeadKind::kSequenceClassification;
    const bool masked_lm = config.head == HeadKind::kMaskedLm;
    const bool token_classifier = config.head == HeadKind::kTokenClassification;
    const std::string prefix = classifier || masked_lm || token_classifier ? BertBasePrefix(config.model_type) : "";
    const int64_t H = c.hidden_size, E = c.embedding_size, I = c.intermediate_size;
    LayoutBuilder s;
    const std::string emb = prefix + "embeddings.";
    s.Add(emb + "word_embeddings.weight", {c.vocab_size, E});
    s.Add(emb + "position_embeddings.weight", {c.max_position_embeddings, E});
    s.Add(emb + "token_type_embeddings.weight", {c.type_vocab_size, E});
    s.LayerNorm(emb + "LayerNorm", E);
    if (c.variant == Variant::kElectra && E != H) s.Linear(prefix + "embeddings_project", E, H, true);
    for (int i = 0; i < c.num_hidden_layers; ++i) {
      const std::string l = absl::StrCat(prefix, "encoder.layer.", i, ".");
      s.Linear(l + "attention.self.query", H, H, true);
      s.Linear(l + "attention.self.key", H, H, true);
      s.Linear(l + "attention.self.value", H, H, true);
      if (c.relative()) s.Add(l + "attention.self.distance_embedding.weight", {c.distance_rows(), c.head_size()});
      s.Linear(l + "attention.output.dense", H, H, true);
      s.LayerNorm(l + "attention.output.LayerNorm", H);
      s.Linear(l + "intermediate.dense", H, I, true);
      s.Linear(l + "output.dense", I, H, true);
      s.LayerNorm(l + "output.LayerNorm", H);
    }
    // BertModel and RobertaModel have a pooler; RobertaForSequenceClassification and the
    // *ForMaskedLM and *ForTokenClassification classes build theirs without one
    // (add_pooling_layer=False), and ELECTRA has none.
    const bool pooler = !masked_lm && !token_classifier &&
                        (c.variant == Variant::kBert || (c.variant == Variant::kRoberta && !classifier));
    if (pooler) s.Linear(prefix + "pooler.dense", H, H, true);
    if (masked_lm) AddMaskedLmHead(*MaskedLmHead(config), &s);
    if (classifier) {
      if (c.variant == Variant::kBert) {
        s.Linear("classifier", H, config.num_labels, true);
      } else {
        s.Linear("classifier.dense", H, H, true);
        s.Linear("classifier.out_proj", H, config.num_labels, true);
      }
    }
    if (token_classifier) s.Linear(*TokenClassifier(config), H, config.num_labels, true);
    return s.Take();
  }

  std::vector<std::string> IgnoredPrefixes(const ModelConfig& config) const override {
    // Heads of the other architectures, which transformers drops with a warning: BERT's MLM and
    // next-sentence heads (cls.), RoBERTa's lm_head, ELECTRA's discriminator and generator
    // heads, question answering.
    std::vector<std::string> ignored = {"cls.", "lm_head.", "discriminator_predictions.", "generator_predictions.",
                                        "generator_lm_head.", "qa_outputs."};
    const auto& c = config.family_config_as<BertConfig>();
    const std::string base = BertBasePrefix(config.model_type);
    const bool bert_classifier = config.head == HeadKind::kSequenceClassification && c.variant == Variant::kBert;
    // The pooler runs only under BERT's classifier; the embeddings and layers are all we
    // output otherwise.
    if (!bert_classifier) {
      ignored.push_back("pooler.");
      ignored.push_back(base + "pooler.");
    }
    if (config.head != HeadKind::kSequenceClassification && config.head != HeadKind::kTokenClassification) {
      ignored.push_back("classifier.");
    }
    return ignored;
  }

  // BertOnlyMLMHead (transform with hidden_act, decoder tied, bias), RobertaLMHead and
  // XLMRobertaLMHead (dense, gelu, layer_norm, decoder tied, bias), and ELECTRA's generator
  // head (ElectraGeneratorPredictions: dense to embedding_size, gelu, LayerNorm; then
  // generator_lm_head, tied, with its own bias).
  std::optional<MaskedLmHeadLayout> MaskedLmHead(const ModelConfig& config) const override {
    if (config.head != HeadKind::kMaskedLm) return std::nullopt;
    const auto& c = config.family_config_as<BertConfig>();
    MaskedLmHeadLayout h;
    h.hidden = c.hidden_size;
    h.width = c.hidden_size;
    h.vocab = c.vocab_size;
    h.layer_norm_eps = c.layer_norm_eps;
    h.tied = config.tie_word_embeddings;
    h.word_embeddings = BertBasePrefix(config.model_type) + "embeddings.word_embeddings.weight";
    switch (c.variant) {
      case Variant::kBert:
        h.dense = "cls.predictions.transform.dense";
        h.activation = c.hidden_act;
        h.layer_norm = "cls.predictions.transform.LayerNorm";
        h.decoder_weight = "cls.predictions.decoder.weight";
        h.bias = {"cls.predictions.bias", "cls.predictions.decoder.bias"};
        break;
      case Variant::kRoberta:
        h.dense = "lm_head.dense";
        h.activation = "gelu";
        h.layer_norm = "lm_head.layer_norm";
        h.decoder_weight = "lm_head.decoder.weight";
        h.bias = {"lm_head.bias", "lm_head.decoder.bias"};
        break;
      case Variant::kElectra:
        h.dense = "generator_predictions.dense";
        h.activation = "gelu";
        h.layer_norm = "generator_predictions.LayerNorm";
        h.width = c.embedding_size;
        h.decoder_weight = "generator_lm_head.weight";
        h.bias = {"generator_lm_head.bias"};
        h.bias_after_decoder = true;
        break;
    }
    return h;
  }

  TokenizerFamily tokenizer_family(const ModelConfig& config) const override {
    if (config.model_type == "xlm-roberta") return TokenizerFamily::kXlmRoberta;
    return config.family_config_as<BertConfig>().variant == Variant::kRoberta ? TokenizerFamily::kRoberta
                                                                              : TokenizerFamily::kBert;
  }

  double FlopsPerToken(const ModelConfig& config, int64_t length) const override {
    const auto& c = config.family_config_as<BertConfig>();
    const double L = static_cast<double>(length);
    const double H = c.hidden_size, E = c.embedding_size, I = c.intermediate_size;
    double per_layer = 2 * H * 3 * H + 2 * H * H + 2 * 2 * H * I + 2 * 2 * L * H;
    if (c.relative()) {
      // q (and for relative_key_query k) against the 2L - 1 distance rows a sequence reaches.
      const double rows = std::min<double>(2 * L - 1, c.distance_rows());
      const int terms = c.position_embedding_type == PositionEmbedding::kRelativeKeyQuery ? 2 : 1;
      per_layer += terms * 2 * H * rows;
    }
    const double projection = c.variant == Variant::kElectra && E != H ? 2 * E * H : 0;
    return per_layer * c.num_hidden_layers + projection;
  }

  std::vector<std::string> create_variants() const override { return {"bert", "roberta", "xlm-roberta", "electra"}; }

  std::vector<CreateOption> create_options() const override {
    return {{"position-embedding-type", "position_embedding_type", CreateOption::Type::kString,
             "absolute|relative_key|relative_key_query (bert, roberta, xlm-roberta, electra)"}};
  }

  // Configs shaped like bert-base-uncased, roberta-base, xlm-roberta-base and
  // electra-base-discriminator (sizes from the request), as save_pretrained writes them.
  absl::StatusOr<json> CreateConfig(const CreateRequest& q) const override {
    const std::string& v = q.variant;
    const bool roberta = v == "roberta" || v == "xlm-roberta";
    const bool electra = v == "electra";
    if (q.embedding_size > 0 && !electra) {
      return absl::InvalidArgumentError(absl::StrCat("embedding_size: ", v, " has none (ELECTRA and DeBERTa do)"));
    }
    const int hidden = q.hidden > 0 ? q.hidden : 768;
    const int heads = q.heads > 0 ? q.heads : 12;
    RETURN_IF_ERROR(CheckHeadsDivideHidden(heads, hidden));
    const std::string arch = BaseArchitecturePrefix(v);
    json j = json::object();
    j["architectures"] = json::array({arch + (q.num_labels > 0 ? "ForSequenceClassification" : "Model")});
    j["attention_probs_dropout_prob"] = 0.1;
    if (roberta) {
      j["bos_token_id"] = 0;
      j["eos_token_id"] = 2;
    }
    j["classifier_dropout"] = nullptr;
    if (electra) j["embedding_size"] = q.embedding_size > 0 ? q.embedding_size : hidden;
    j["hidden_act"] = "gelu";
    j["hidden_dropout_prob"] = 0.1;
    j["hidden_size"] = hidden;
    j["initializer_range"] = ShortestDouble(static_cast<float>(q.init_std));
    j["intermediate_size"] = q.intermediate > 0 ? q.intermediate : 3072;
    j["layer_norm_eps"] = roberta ? 1e-5 : 1e-12;
    j["max_position_embeddings"] = roberta ? 514 : 512;
    j["model_type"] = v;
    j["num_attention_heads"] = heads;
    j["num_hidden_layers"] = q.layers > 0 ? q.layers : 12;
    j["pad_token_id"] = roberta ? 1 : 0;
    j["position_embedding_type"] = "absolute";
    if (electra) {
      j["summary_activation"] = "gelu";
      j["summary_last_dropout"] = 0.1;
      j["summary_type"] = "first";
      j["summary_use_proj"] = true;
    }
    j["type_vocab_size"] = roberta ? 1 : 2;
    j["use_cache"] = true;
    const int default_vocab = v == "roberta" ? 50265 : v == "xlm-roberta" ? 250002 : 30522;
    j["vocab_size"] = q.vocab > 0 ? q.vocab : default_vocab;
    if (q.num_labels > 0) AddDefaultLabels(q.num_labels, &j);
    return j;
  }

  absl::Status RederiveAfterOverrides(const json&, json*) const override { return absl::OkStatus(); }

  CreateTokenizerSpec CreateTokenizer(const std::string& variant) const override {
    CreateTokenizerSpec t;
    if (variant == "xlm-roberta") {
      t.format = CreateTokenizerSpec::VocabFormat::kFairseq;
      t.vocab_file_name = "sentencepiece.bpe.model";
      t.tokenizer_family = TokenizerFamily::kXlmRoberta;
      t.tokenizer_config = {{"model_max_length", 512}, {"tokenizer_class", "XLMRobertaTokenizer"}};
      return t;
    }
    if (variant != "bert" && variant != "electra") return t;  // byte-level BPE: not written
    t.format = CreateTokenizerSpec::VocabFormat::kLines;
    t.vocab_file_name = "vocab.txt";
    t.tokenizer_family = TokenizerFamily::kBert;
    t.tokenizer_config = {{"do_lower_case", true},    {"model_max_length", 512},
                          {"strip_accents", nullptr}, {"tokenize_chinese_chars", true},
                          {"tokenizer_class", variant == "electra" ? "ElectraTokenizer" : "BertTokenizer"}};
    return t;
  }
};

}  // namespace

const FamilyDescriptor& BertFamily() {
  static const BertDescriptor kDescriptor;
  return kDescriptor;
}

}  // namespace relserve
