#include "server/model/families/mpnet/mpnet_config.h"

#include "absl/strings/str_cat.h"
#include "server/model_config/model_limits.h"
#include "server/util/status_macros.h"

namespace relserve {

absl::Status ParseMpnetConfig(const JsonFieldReader& r, MpnetConfig* c) {
  // nn.Embedding(vocab_size, hidden, padding_idx=1) needs row 1.
  RETURN_IF_ERROR(r.Int("vocab_size", &c->vocab_size, kMpnetPaddingIdx + 1, kMaxVocabSize));
  RETURN_IF_ERROR(r.Int("hidden_size", &c->hidden_size, 1, kMaxModelWidth));
  RETURN_IF_ERROR(r.Int("num_hidden_layers", &c->num_hidden_layers, 0, kMaxLayers));
  RETURN_IF_ERROR(r.Int("num_attention_heads", &c->num_attention_heads, 1, kMaxModelWidth));
  RETURN_IF_ERROR(r.Int("intermediate_size", &c->intermediate_size, 1, kMaxFeedForwardSize));
  RETURN_IF_ERROR(r.String("hidden_act", &c->hidden_act));
  // One token reads position padding_idx + 1: the table needs padding_idx + 2 rows.
  RETURN_IF_ERROR(r.Int("max_position_embeddings", &c->max_position_embeddings, kMpnetPaddingIdx + 2,
                        kMaxSequenceLength));
  RETURN_IF_ERROR(r.Double("layer_norm_eps", &c->layer_norm_eps, 0, kMaxLayerNormEps, /*min_exclusive=*/true));
  RETURN_IF_ERROR(r.Int("relative_attention_num_buckets", &c->relative_attention_num_buckets, 1, kMaxSequenceLength));
  // The engine pads batches with it: padded positions must be valid embedding rows.
  RETURN_IF_ERROR(ReadTokenId(r, "pad_token_id", c->vocab_size, &c->pad_token_id));

  // MPNetSelfAttention splits hidden_size into heads of int(hidden_size / heads), and its output
  // projection takes hidden_size inputs: with a remainder the reference cannot run.
  if (c->hidden_size % c->num_attention_heads != 0) {
    return r.Error("num_attention_heads", absl::StrCat(c->num_attention_heads, " does not divide hidden_size ",
                                                       c->hidden_size));
  }
  RETURN_IF_ERROR(CheckActivation(r, "hidden_act", c->hidden_act));
  if (c->relative_attention_num_buckets < kMpnetBiasBuckets) {
    return r.Error("relative_attention_num_buckets",
                   absl::StrCat("is ", c->relative_attention_num_buckets, ": compute_position_bias always looks up ",
                                kMpnetBiasBuckets, " buckets, so encoder.relative_attention_bias needs at least ",
                                kMpnetBiasBuckets, " rows"));
  }
  return absl::OkStatus();
}

}  // namespace relserve
