#ifndef RELSERVE_SERVER_MODEL_MODEL_CONFIG_H_
#define RELSERVE_SERVER_MODEL_MODEL_CONFIG_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace relserve {

enum class ModelFamily { kDebertaV2, kT5 };

// What the checkpoint's head computes, from `architectures`.
enum class HeadKind { kNone, kSequenceClassification };

// transformers' DebertaV2Config, with its defaults (configuration_deberta_v2.py).
struct DebertaV2Config {
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

// transformers' T5Config (also MT5Config), encoder side.
struct T5Config {
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

struct ModelConfig {
  ModelFamily family = ModelFamily::kDebertaV2;
  std::string model_type;    // "deberta-v2", "t5", "mt5"
  std::string architecture;  // first of `architectures`
  HeadKind head = HeadKind::kNone;
  DebertaV2Config deberta;
  T5Config t5;
  // Classification heads.
  int num_labels = 0;
  std::vector<std::string> id2label;  // index -> name
  std::string problem_type;           // "", "single_label_classification", "multi_label_classification", "regression"
  std::string torch_dtype;            // as stored in config.json ("float32", ...), informational
  int max_length = 512;               // default maximum input length in tokens

  int hidden_size() const;
  int num_layers() const;
  int vocab_size() const;
};

// Parses config.json text as transformers would: unknown keys are ignored, known keys with
// values of the wrong type or outside what the reference implementation accepts are errors
// that name the key. `source` names the file in messages.
absl::StatusOr<ModelConfig> ParseModelConfig(const nlohmann::json& json, const std::string& source);
absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& model_dir);

// Activation names of transformers' ACT2FN that the engine implements.
bool IsSupportedActivation(const std::string& name);
const std::vector<std::string>& SupportedActivations();

const char* ModelFamilyName(ModelFamily family);

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_MODEL_CONFIG_H_
