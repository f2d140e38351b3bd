#include "server/model/families/xlnet/xlnet_config.h"

#include "absl/strings/str_cat.h"
#include "server/model_config/model_config.h"
#include "server/model_config/model_limits.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

using nlohmann::json;

bool IsNull(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_null();
}

// A key whose None is falsy in the reference (`if config.summary_use_proj`): null = false.
absl::Status FalsyBool(const JsonFieldReader& r, const json& j, const char* key, bool* out) {
  if (IsNull(j, key)) {
    *out = false;
    return absl::OkStatus();
  }
  return r.Bool(key, out);
}

}  // namespace

absl::Status ParseXlnetConfig(const JsonFieldReader& r, const json& j, XlnetConfig* c) {
  RETURN_IF_ERROR(r.Int("vocab_size", &c->vocab_size, 1, kMaxVocabSize));
  RETURN_IF_ERROR(r.Int("d_model", &c->d_model, 1, kMaxModelWidth));
  RETURN_IF_ERROR(r.Int("n_layer", &c->n_layer, 0, kMaxLayers));
  RETURN_IF_ERROR(r.Int("n_head", &c->n_head, 1, kMaxModelWidth));
  RETURN_IF_ERROR(r.Int("d_inner", &c->d_inner, 1, kMaxFeedForwardSize));
  // XLNetConfig.__init__: d_model % n_head must be 0 and d_head, when given, d_model // n_head.
  if (c->d_model % c->n_head != 0) {
    return r.Error("n_head", absl::StrCat(c->n_head, " does not divide d_model ", c->d_model,
                                          " (XLNetConfig requires d_model % n_head == 0)"));
  }
  c->d_head = c->d_model / c->n_head;
  int d_head = c->d_head;
  RETURN_IF_ERROR(r.Int("d_head", &d_head, 1, kMaxModelWidth));
  if (d_head != c->d_head) {
    return r.Error("d_head", absl::StrCat(d_head, " differs from d_model / n_head = ", c->d_model, " / ", c->n_head,
                                          " = ", c->d_head, ", which XLNetConfig requires"));
  }
  // PretrainedConfig sets the remaining keys after __init__, through attribute_map.
  RETURN_IF_ERROR(r.Int("n_token", &c->vocab_size, 1, kMaxVocabSize));
  RETURN_IF_ERROR(r.Int("hidden_size", &c->d_model, 1, kMaxModelWidth));
  RETURN_IF_ERROR(r.Int("num_attention_heads", &c->n_head, 1, kMaxModelWidth));
  RETURN_IF_ERROR(r.Int("num_hidden_layers", &c->n_layer, 0, kMaxLayers));
  if (r.Has("max_position_embeddings")) {
    return r.Error("max_position_embeddings",
                   "cannot be set: XLNet has no sequence length limit (XLNetConfig raises NotImplementedError)");
  }
  if (c->d_model % c->n_head != 0) {
    // XLNetRelativeAttention checks the values after the aliases.
    return r.Error("num_attention_heads", absl::StrCat("makes n_head ", c->n_head, ", which does not divide d_model ",
                                                       c->d_model));
  }
  if (static_cast<int64_t>(c->n_head) * c->d_head > kMaxModelWidth) {
    return r.Error("num_attention_heads", absl::StrCat("makes n_head x d_head = ", c->n_head, " x ", c->d_head,
                                                       ", more than ", kMaxModelWidth));
  }
  if (c->d_model % 2 != 0) {
    // relative_positional_encoding builds ceil(d_model / 2) frequencies, sine and cosine: an
    // odd d_model gives d_model + 1 columns, which the projection `r` cannot take.
    return r.Error("d_model", absl::StrCat("is ", c->d_model, ": the sinusoidal relative encodings need an even width"));
  }

  RETURN_IF_ERROR(r.String("ff_activation", &c->ff_activation));
  RETURN_IF_ERROR(CheckActivation(r, "ff_activation", c->ff_activation));
  RETURN_IF_ERROR(r.String("attn_type", &c->attn_type));
  if (c->attn_type != "bi" && c->attn_type != "uni") {
    return r.Error("attn_type", absl::StrCat("\"", c->attn_type, "\" is not one of bi, uni"));
  }
  RETURN_IF_ERROR(r.Double("layer_norm_eps", &c->layer_norm_eps, 0, kMaxLayerNormEps, /*min_exclusive=*/true));
  RETURN_IF_ERROR(r.Bool("bi_data", &c->bi_data));
  if (c->bi_data) {
    return r.Error("bi_data", "is true: XLNetModel then encodes the first half of each batch with forward and the "
                              "second half with backward relative positions, so a sequence's result would depend on "
                              "its place in the batch (set it to false, as for fine-tuning and inference)");
  }
  RETURN_IF_ERROR(r.Int("clamp_len", &c->clamp_len, INT32_MIN, INT32_MAX));
  RETURN_IF_ERROR(r.Bool("same_length", &c->same_length));
  RETURN_IF_ERROR(r.Bool("untie_r", &c->untie_r));
  RETURN_IF_ERROR(ReadTokenId(r, "pad_token_id", c->vocab_size, &c->pad_token_id));

  RETURN_IF_ERROR(r.String("summary_type", &c->summary_type));
  RETURN_IF_ERROR(FalsyBool(r, j, "summary_use_proj", &c->summary_use_proj));
  RETURN_IF_ERROR(FalsyBool(r, j, "summary_proj_to_labels", &c->summary_proj_to_labels));
  // get_activation(s) if s else Identity(): null and "" mean no activation.
  if (IsNull(j, "summary_activation")) c->summary_activation.clear();
  RETURN_IF_ERROR(r.String("summary_activation", &c->summary_activation));
  return absl::OkStatus();
}

absl::Status CheckXlnetSequenceSummary(const JsonFieldReader& r, const XlnetConfig& c, int num_labels) {
  if (c.summary_type == "attn") {
    return r.Error("summary_type", "is \"attn\", which transformers' SequenceSummary does not implement");
  }
  if (c.summary_type != "last" && c.summary_type != "first" && c.summary_type != "mean" &&
      c.summary_type != "cls_index") {
    return r.Error("summary_type", absl::StrCat("\"", c.summary_type, "\" is not one of last, first, mean, cls_index"));
  }
  if (!c.summary_activation.empty()) {
    RETURN_IF_ERROR(CheckActivation(r, "summary_activation", c.summary_activation));
  }
  if (c.summary_use_proj && c.summary_width(num_labels) != c.d_model) {
    // logits_proj is nn.Linear(d_model, num_labels), applied to the summary.
    return r.Error("summary_proj_to_labels",
                   absl::StrCat("is true with summary_use_proj: the summary then has num_labels = ", num_labels,
                                " features, but logits_proj takes d_model = ", c.d_model,
                                " (transformers' forward fails on this shape)"));
  }
  return absl::OkStatus();
}

}  // namespace relserve
