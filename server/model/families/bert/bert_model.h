#ifndef RELSERVE_SERVER_MODEL_FAMILIES_BERT_BERT_MODEL_H_
#define RELSERVE_SERVER_MODEL_FAMILIES_BERT_BERT_MODEL_H_

#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"
#include "server/model/layers/activation.h"
#include "server/model/layers/encoder_model.h"
#include "server/model/families/bert/bert_config.h"
#include "server/model/layers/layers.h"
#include "server/model/layers/length_cache.h"
#include "server/model/layers/post_norm_block.h"
#include "server/model_config/model_config.h"
#include "server/model/layers/weight_loader.h"

namespace relserve {

struct EncoderPass;
class TokenPacking;

// BERT, RoBERTa, XLM-RoBERTa and ELECTRA: transformers' BertModel / RobertaModel /
// XLMRobertaModel / ElectraModel (embeddings and encoder), and the heads of their
// *ForSequenceClassification: BertPooler (dense + tanh on the first token) and a linear
// classifier; RobertaClassificationHead (dense, tanh, out_proj); ElectraClassificationHead
// (dense, gelu, out_proj).
//
// Relative positions (BertSelfAttention with position_embedding_type relative_key or
// relative_key_query) are never expanded per query and key: q . distance_embedding^T (and
// k . distance_embedding^T) over the 2L - 1 rows a length reaches is one product per batch,
// which the fused relative softmax (relative_softmax.h) reads through a j - i table, as
// DeBERTa's c2p and p2c terms are. The 1/sqrt(head size) every term is divided by is folded
// into the query projection and the key-side table.
class BertModel : public EncoderModel {
 public:
  static absl::StatusOr<std::unique_ptr<BertModel>> Load(const ModelConfig& config, WeightLoader& weights);

  EncoderOutputs Forward(const EncoderInputs& inputs, bool all_hidden_states) const override;
  bool RunsFirstTokenOnly() const override { return true; }
  std::vector<Linear*> EncoderLinears() override;
  std::vector<Linear*> HeadLinears() override { return {&embeddings_project_, &head_dense_, &head_out_}; }
  at::Tensor word_embeddings() const override { return word_embeddings_; }

 private:
  struct Layer : PostNormBlock {  // its query rows pre-divided by sqrt(head size)
    at::Tensor distance;         // [2M - 1, head_size]: distance_embedding (relative types)
    at::Tensor distance_scaled;  // the same divided by sqrt(head size) (relative_key_query)
  };
  // For one sequence length L: the rows [M - L, M + L - 1) of the distance tables that it
  // reaches, and their index by j - i + L - 1 (query i, key j): row i - j + M - 1.
  struct RelativeIndex {
    at::Tensor index;   // int32 [2L - 1], into the 2L - 1 rows
    at::Tensor gather;  // int64 [L, L] on other devices than the CPU (biased_attention.h)
    at::Tensor table;   // index on other devices than the CPU (the table path)
  };

  explicit BertModel(const ModelConfig& config);
  // Sizes of config.json against the checkpoint's tensors, naming the key that disagrees.
  absl::Status CheckSizes(const WeightLoader& weights, const std::string& prefix) const;
  absl::Status LoadWeights(WeightLoader& weights);
  at::Tensor Embed(const EncoderInputs& inputs) const;
  at::Tensor LayerForward(const Layer& layer, const at::Tensor& x,
                          const EncoderPass& pass, const RelativeIndex* index) const;
  std::shared_ptr<const RelativeIndex> IndexFor(int64_t length) const;

  ModelConfig config_;
  BertConfig c_;
  Activation hidden_act_ = Activation::kGelu;
  int64_t heads_ = 0;
  int64_t head_dim_ = 0;

  at::Tensor word_embeddings_;
  at::Tensor position_embeddings_;  // undefined for relative types
  at::Tensor token_type_embeddings_;
  LayerNorm embedding_norm_;
  Linear embeddings_project_;  // ELECTRA with embedding_size != hidden_size
  std::vector<Layer> layers_;

  // Classification heads: BERT's pooler + classifier, or the dense + out_proj of RoBERTa's
  // (tanh) and ELECTRA's (gelu) heads.
  Linear head_dense_;
  Activation head_act_ = Activation::kTanh;
  Linear head_out_;

  LengthCache<RelativeIndex> index_cache_;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_FAMILIES_BERT_BERT_MODEL_H_
