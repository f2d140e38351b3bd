#ifndef RELSERVE_SERVER_MODEL_FAMILIES_DEBERTA_V2_DEBERTA_V2_CONFIG_H_
#define RELSERVE_SERVER_MODEL_FAMILIES_DEBERTA_V2_DEBERTA_V2_CONFIG_H_

#include <string>
#include <vector>

#include "server/model_config/model_config.h"

namespace relserve {

// transformers' DebertaV2Config, with its defaults (configuration_deberta_v2.py).
struct DebertaV2Config : FamilyConfig {
  int vocab_size = 128100;
  int hidden_size = 1536;
  int num_hidden_layers = 24;
  int num_attention_heads = 24;
  int attention_head_size = 0;  // hidden_size / heads unless the config names it
  int intermediate_size = 6144;
  std::string hidden_act = "gelu";
  int max_position_embeddings = 512;
  int type_vocab_size = 0;
  double layer_norm_eps = 1e-7;
  bool relative_attention = false;
  int max_relative_positions = -1;
  int position_buckets = -1;
  int pad_token_id = 0;
  bool position_biased_input = true;
  std::vector<std::string> pos_att_type;  // subset of {"c2p", "p2c"} (and "p2p", which v2 ignores)
  bool share_att_key = false;
  std::vector<std::string> norm_rel_ebd = {"none"};
  int embedding_size = 0;  // hidden_size unless the config names it
  int conv_kernel_size = 0;
  int conv_groups = 1;
  std::string conv_act = "tanh";
  int pooler_hidden_size = 0;  // hidden_size unless the config names it
  std::string pooler_hidden_act = "gelu";

  bool has_c2p() const;
  bool has_p2c() const;
  bool layer_norm_rel_embeddings() const;
  // max_relative_positions after transformers' "< 1 means max_position_embeddings".
  int effective_max_relative_positions() const;
  // Rows of the relative embedding table (DebertaV2Encoder.rel_embeddings).
  int rel_embeddings_rows() const;
  // att_span of DisentangledSelfAttention (pos_ebd_size).
  int attention_span() const;
  int all_head_size() const { return num_attention_heads * attention_head_size; }
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_FAMILIES_DEBERTA_V2_DEBERTA_V2_CONFIG_H_
