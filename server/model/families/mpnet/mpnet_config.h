#ifndef RELSERVE_SERVER_MODEL_FAMILIES_MPNET_MPNET_CONFIG_H_
#define RELSERVE_SERVER_MODEL_FAMILIES_MPNET_MPNET_CONFIG_H_

#include <string>

#include "absl/status/status.h"
#include "server/model_config/model_config.h"
#include "server/util/json_util.h"

namespace relserve {

// MPNetEmbeddings.padding_idx: 1 whatever pad_token_id says. Absolute positions
// (create_position_ids_from_input_ids) count the tokens whose id is not this one and start
// after it, so a row of n tokens reads positions 2 .. n + 1.
inline constexpr int kMpnetPaddingIdx = 1;
// MPNetEncoder.compute_position_bias calls relative_position_bucket with its defaults, 32
// buckets and a maximum distance of 128, whatever relative_attention_num_buckets says; that key
// only sizes encoder.relative_attention_bias.
inline constexpr int kMpnetBiasBuckets = 32;
inline constexpr int kMpnetBiasMaxDistance = 128;

// transformers' MPNetConfig (configuration_mpnet.py, 4.40.2), with its defaults: the keys the
// modeling code reads.
struct MpnetConfig : FamilyConfig {
  int vocab_size = 30527;
  int hidden_size = 768;
  int num_hidden_layers = 12;
  int num_attention_heads = 12;
  int intermediate_size = 3072;
  std::string hidden_act = "gelu";
  int max_position_embeddings = 512;
  double layer_norm_eps = 1e-12;
  int relative_attention_num_buckets = 32;
  // Not read by the model (see kMpnetPaddingIdx); the engine pads batches with it.
  int pad_token_id = 1;

  int head_size() const { return hidden_size / num_attention_heads; }
  // The longest input the position table holds: max_position_embeddings - padding_idx - 1
  // (514 -> 512).
  int max_input_length() const { return max_position_embeddings - kMpnetPaddingIdx - 1; }
};

// Reads MPNetConfig's keys from config.json into `config` (absent or null keys keep the
// defaults). INVALID_ARGUMENT "<source>: \"key\" <problem>" for a value of the wrong type, out of
// model_limits.h, or one transformers' MPNet cannot run: hidden_size not a multiple of
// num_attention_heads, an activation ACT2FN lacks (or the engine does not implement),
// max_position_embeddings too small to hold one token's position after padding_idx, fewer
// relative_attention_num_buckets than the 32 that compute_position_bias looks up, or a
// pad_token_id outside the vocabulary.
absl::Status ParseMpnetConfig(const JsonFieldReader& reader, MpnetConfig* config);

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_FAMILIES_MPNET_MPNET_CONFIG_H_
