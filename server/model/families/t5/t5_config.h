#ifndef RELSERVE_SERVER_MODEL_FAMILIES_T5_T5_CONFIG_H_
#define RELSERVE_SERVER_MODEL_FAMILIES_T5_T5_CONFIG_H_

#include <string>

#include "server/model_config/model_config.h"

namespace relserve {

// transformers' T5Config (also MT5Config, whose defaults differ), encoder side.
struct T5Config : FamilyConfig {
  int vocab_size = 32128;
  int d_model = 512;
  int d_kv = 64;
  int d_ff = 2048;
  int num_layers = 6;
  int num_heads = 8;
  int relative_attention_num_buckets = 32;
  int relative_attention_max_distance = 128;
  double layer_norm_epsilon = 1e-6;
  std::string feed_forward_proj = "relu";
  std::string dense_act_fn = "relu";
  bool is_gated_act = false;
  int pad_token_id = 0;
  int eos_token_id = 1;
  int inner_dim() const { return num_heads * d_kv; }
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_FAMILIES_T5_T5_CONFIG_H_
