#ifndef RELSERVE_SERVER_MODEL_CONFIG_MODEL_CONFIG_H_
#define RELSERVE_SERVER_MODEL_CONFIG_MODEL_CONFIG_H_

// What config.json says, in the part every model family shares, and the readers the families'
// own config parsers have in common. No LibTorch: the config fuzzer links this without the
// engine. Each family's own keys are read by its descriptor (families/family_descriptor.h),
// and ParseModelConfig (families/family_registry.h) picks the descriptor by model_type.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "server/util/json_util.h"

namespace relserve {

class FamilyDescriptor;

// What the checkpoint's head computes, from `architectures`.
enum class HeadKind {
  kNone,
  kSequenceClassification,
  // *ForMaskedLM: the backbone serves embeddings as *Model would; the masked-LM head, where the
  // checkpoint holds it, serves SPLADE sparse vectors (the descriptor's MaskedLmHead()).
  kMaskedLm,
  // *ForTokenClassification: a linear classifier on every token's last hidden state
  // (FamilyDescriptor::TokenClassifier), labels from id2label as for a sequence classifier.
  kTokenClassification,
};

// Base of each family's own config struct (DebertaV2Config, T5Config, BertConfig...): the keys
// of transformers' config class for that family, with its defaults.
struct FamilyConfig {
  virtual ~FamilyConfig() = default;
};

struct ModelConfig {
  // The family that read this config; never null in a config ParseModelConfig returned.
  const FamilyDescriptor* family = nullptr;
  std::string model_type;    // as in config.json: "deberta-v2", "t5", "mt5", "bert", ...
  std::string architecture;  // first of `architectures`, or the family's default
  HeadKind head = HeadKind::kNone;
  // The family's own struct; read it with family_config_as<T>() in that family's code.
  std::shared_ptr<const FamilyConfig> family_config;

  // What every family states, filled by its descriptor.
  int hidden_size = 0;
  int num_layers = 0;
  int vocab_size = 0;
  int type_vocab_size = 0;  // rows of token-type embeddings; 0: token_type_ids are ignored
  // Token types reach the model without token-type embeddings, as segment ids that it only
  // compares (XLNet): any value, and type_vocab_size stays 0.
  bool token_types_are_segment_ids = false;
  int pad_token_id = 0;     // what padded positions hold
  int max_length = 512;     // default maximum input length in tokens
  // The longest input the weights can take (absolute position embeddings), 0 when nothing in
  // the weights bounds it; max_length_limit_source says where it comes from in messages
  // ("max_position_embeddings 512").
  int max_length_limit = 0;
  std::string max_length_limit_source;

  // PretrainedConfig's tie_word_embeddings (default true), read for masked-LM heads: whether the
  // decoder shares the word embeddings.
  bool tie_word_embeddings = true;

  // Classification heads.
  int num_labels = 0;
  std::vector<std::string> id2label;  // index -> name
  std::string problem_type;           // "", "single_label_classification", "multi_label_classification", "regression"
  std::string torch_dtype;            // as stored in config.json ("float32", ...), informational

  // Matryoshka training as vLLM reads it from config.json: is_matryoshka (unset: not said) and
  // matryoshka_dimensions (the sizes an embedding may be cut to; empty: not said). A list makes
  // the model Matryoshka-trained, as it does in vLLM.
  std::optional<bool> is_matryoshka;
  std::vector<int> matryoshka_dimensions;

  template <typename T>
  const T& family_config_as() const {
    return static_cast<const T&>(*family_config);
  }
};

// transformers reads layer_norm_eps into nn.LayerNorm: at 0 a constant row divides 0 by 0, and
// no trained model uses a value near 1.
inline constexpr double kMaxLayerNormEps = 1.0;

// A token id the model's embedding table holds: an integer in [0, vocab_size).
absl::Status ReadTokenId(const JsonFieldReader& r, const char* key, int vocab_size, int* out);

// `name` must be an activation the engine implements; the error names `key` and the choices.
absl::Status CheckActivation(const JsonFieldReader& r, const char* key, const std::string& name);

// num_labels, id2label and problem_type as PretrainedConfig derives them: id2label wins, else
// num_labels (default 2) with names LABEL_i.
absl::Status ReadClassificationLabels(const JsonFieldReader& r, const nlohmann::json& j, ModelConfig* config);

// Activation names of transformers' ACT2FN that the engine implements.
bool IsSupportedActivation(const std::string& name);
const std::vector<std::string>& SupportedActivations();

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_CONFIG_MODEL_CONFIG_H_
