#ifndef RELSERVE_SERVER_MODEL_FAMILIES_XLNET_XLNET_CONFIG_H_
#define RELSERVE_SERVER_MODEL_FAMILIES_XLNET_XLNET_CONFIG_H_

#include <string>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "server/model_config/model_config.h"
#include "server/util/json_util.h"

namespace relserve {

// What XLNetModel and XLNetForSequenceClassification of transformers 4.40.2 read from
// XLNetConfig (configuration_xlnet.py) at inference, with its defaults. Keys that only matter
// in training or generation (dropout, mem_len, reuse_len, use_mems_*, start_n_top, end_n_top)
// are not read: without input memories they change nothing.
struct XlnetConfig : FamilyConfig {
  int vocab_size = 32000;
  int d_model = 1024;
  int n_layer = 24;
  int n_head = 16;
  // d_model / n_head as XLNetConfig.__init__ computes it (a "d_head" key must agree). The
  // attribute_map aliases (hidden_size, num_attention_heads) are applied after it, so only they
  // can make n_head x d_head differ from d_model.
  int d_head = 64;
  int d_inner = 4096;
  std::string ff_activation = "gelu";
  std::string attn_type = "bi";  // "bi", or "uni": keys after the query are masked
  double layer_norm_eps = 1e-12;
  // Pretraining's bidirectional input pipeline: the first half of a batch gets forward relative
  // encodings and the second half backward ones, so results depend on the batch. Refused.
  bool bi_data = false;
  // Relative distances beyond +-clamp_len use the encoding of +-clamp_len; <= 0 = no clamping.
  int clamp_len = -1;
  // With attn_type "uni" and no memory, create_mask leaves each query its own key only.
  bool same_length = false;
  // untie_r only tells transformers' TensorFlow converter whether the biases are per layer;
  // its PyTorch modules always hold them per layer (layer.N.rel_attn.r_w_bias, ...).
  bool untie_r = true;
  int pad_token_id = 5;

  // The sequence summary of XLNetForSequenceClassification (SequenceSummary in modeling_utils).
  std::string summary_type = "last";  // last, first, mean, cls_index
  bool summary_use_proj = true;
  // hasattr(config, "summary_proj_to_labels"): XLNetConfig itself has no such default.
  bool summary_proj_to_labels = false;
  std::string summary_activation = "tanh";  // "" (None) = no activation

  bool causal() const { return attn_type == "uni"; }
  int inner_dim() const { return n_head * d_head; }
  // Width of the summary's projection: num_labels when it projects to the labels.
  int summary_width(int num_labels) const {
    return summary_proj_to_labels && num_labels > 0 ? num_labels : d_model;
  }
};

// Reads the keys above from config.json (`j`, through `r`), as XLNetConfig.__init__ and
// PretrainedConfig would: absent keys keep the defaults; the attribute_map aliases n_token,
// hidden_size, num_attention_heads and num_hidden_layers override their targets. Every value
// transformers would refuse, or could not run (d_model not a multiple of n_head, a d_head other
// than d_model / n_head, an odd d_model, an attn_type other than bi and uni, an unsupported
// ff_activation), and bi_data true, is INVALID_ARGUMENT naming the key.
absl::Status ParseXlnetConfig(const JsonFieldReader& r, const nlohmann::json& j, XlnetConfig* c);

// The sequence-summary keys of XLNetForSequenceClassification with `num_labels` labels:
// summary_type attn (not implemented in transformers) or unknown, an unsupported
// summary_activation, and a projection to the labels that logits_proj (d_model inputs) could
// not take are INVALID_ARGUMENT naming the key. XLNetModel never reads these keys.
absl::Status CheckXlnetSequenceSummary(const JsonFieldReader& r, const XlnetConfig& c, int num_labels);

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_FAMILIES_XLNET_XLNET_CONFIG_H_
