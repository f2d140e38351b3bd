#ifndef RELSERVE_SERVER_MODEL_FAMILIES_BERT_BERT_CONFIG_H_
#define RELSERVE_SERVER_MODEL_FAMILIES_BERT_BERT_CONFIG_H_

#include <string>

#include "server/model_config/model_config.h"

namespace relserve {

// transformers' BertConfig, RobertaConfig, XLMRobertaConfig and ElectraConfig (one model
// family: the same encoder layers, different embeddings and heads), with their defaults.
struct BertConfig : FamilyConfig {
  enum class Variant {
    kBert,     // model_type "bert": BertModel
    kRoberta,  // "roberta", "xlm-roberta": positions counted after padding_idx
    kElectra,  // "electra": embeddings of embedding_size, projected to hidden_size
  };
  enum class PositionEmbedding {
    kAbsolute,          // position_embeddings added to the input embeddings
    kRelativeKey,       // Shaw et al.: q_i . distance_embedding[i - j + M - 1]
    kRelativeKeyQuery,  // Huang et al.: that, plus k_j . distance_embedding[i - j + M - 1]
  };

  Variant variant = Variant::kBert;
  int vocab_size = 30522;
  int hidden_size = 768;
  int num_hidden_layers = 12;
  int num_attention_heads = 12;
  int intermediate_size = 3072;
  std::string hidden_act = "gelu";
  int max_position_embeddings = 512;
  int type_vocab_size = 2;
  double layer_norm_eps = 1e-12;
  int pad_token_id = 0;  // RoBERTa, XLM-R: 1
  PositionEmbedding position_embedding_type = PositionEmbedding::kAbsolute;
  int embedding_size = 768;  // ELECTRA's own key (default 128); hidden_size for the others

  int head_size() const { return hidden_size / num_attention_heads; }
  bool relative() const { return position_embedding_type != PositionEmbedding::kAbsolute; }
  // Rows of each layer's distance_embedding: 2 * max_position_embeddings - 1.
  int distance_rows() const { return 2 * max_position_embeddings - 1; }
  // The position id of the first token: RoBERTa's create_position_ids_from_input_ids counts
  // from padding_idx + 1; BERT and ELECTRA from 0.
  int first_position() const { return variant == Variant::kRoberta ? pad_token_id + 1 : 0; }
};

const char* PositionEmbeddingName(BertConfig::PositionEmbedding type);

// The base model's attribute in the *For* classes (base_model_prefix), with the dot: "bert.",
// "roberta." (RoBERTa and XLM-RoBERTa), "electra.".
std::string BertBasePrefix(const std::string& model_type);

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_FAMILIES_BERT_BERT_CONFIG_H_
