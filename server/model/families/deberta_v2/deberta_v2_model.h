#ifndef RELSERVE_SERVER_MODEL_FAMILIES_DEBERTA_V2_DEBERTA_V2_MODEL_H_
#define RELSERVE_SERVER_MODEL_FAMILIES_DEBERTA_V2_DEBERTA_V2_MODEL_H_

#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"
#include "server/model/layers/activation.h"
#include "server/model/layers/encoder_model.h"
#include "server/model/layers/layers.h"
#include "server/model/layers/length_cache.h"
#include "server/model/layers/post_norm_block.h"
#include "server/model/families/deberta_v2/deberta_v2_config.h"
#include "server/model_config/model_config.h"
#include "server/model/layers/weight_loader.h"

namespace relserve {

struct EncoderPass;
class TokenPacking;

// DeBERTa-v2/v3 and mDeBERTa: transformers' DebertaV2Model, and the context pooler and
// classifier of DebertaV2ForSequenceClassification.
//
// Disentangled attention is computed without per-pair embeddings: the relative-position
// projections of every layer (key_proj/query_proj or pos_key_proj/pos_query_proj of the
// relative embedding table) do not depend on the input and are computed once at load; per
// batch, content-to-position and position-to-content scores are one product of the queries
// (keys) with the rows of that table that the batch's length can reach, followed by a gather.
// Layout inside attention is [heads, batch, length, head_dim], so that the per-head tables
// multiply every sequence of the batch in one bmm.
class DebertaV2Model : public EncoderModel {
 public:
  static absl::StatusOr<std::unique_ptr<DebertaV2Model>> Load(const ModelConfig& config, WeightLoader& weights);

  EncoderOutputs Forward(const EncoderInputs& inputs, bool all_hidden_states) const override;
  // Not a one-layer model with the convolution, which reads every position of layer 0's output.
  bool RunsFirstTokenOnly() const override;
  std::vector<Linear*> EncoderLinears() override;
  std::vector<Linear*> HeadLinears() override { return {&embed_proj_, &pooler_, &classifier_}; }
  at::Tensor word_embeddings() const override { return word_embeddings_; }

 private:
  struct Layer : PostNormBlock {  // its query rows pre-divided by the attention scale
    at::Tensor pos_key;    // [heads, 2*span, head_dim]: c2p keys
    at::Tensor pos_query;  // [heads, 2*span, head_dim]: p2c queries, divided by the scale
  };
  struct Conv {
    at::Tensor weight;  // [hidden, hidden / groups, kernel]
    at::Tensor bias;
    int64_t groups = 1;
    Activation act = Activation::kTanh;
    LayerNorm norm;
  };
  // Relative indices for one sequence length, by j - i + L - 1 (query i, key j), restricted
  // to the table rows that length uses.
  struct RelativeIndex {
    at::Tensor c2p;  // int32 [2L - 1]: row of the c2p table, minus c2p_lo
    int64_t c2p_lo = 0, c2p_rows = 0;
    at::Tensor p2c;  // int32 [2L - 1]: row of the p2c table, minus p2c_lo
    int64_t p2c_lo = 0, p2c_rows = 0;
    // On other devices than the CPU: the same tables as [L, L] gather indices there
    // (biased_attention.h); undefined on the CPU.
    at::Tensor c2p_gather, p2c_gather;
    at::Tensor c2p_table, p2c_table;  // c2p and p2c on the device (the table path)
  };

  explicit DebertaV2Model(const ModelConfig& config);
  // Sizes of config.json against the checkpoint's tensors, naming the key that disagrees.
  absl::Status CheckSizes(const WeightLoader& weights, const std::string& prefix) const;
  absl::Status LoadWeights(WeightLoader& weights);
  at::Tensor Embed(const EncoderInputs& inputs) const;
  // x: [tokens, hidden], the real tokens' rows when the pass packs them, else all B * L.
  at::Tensor LayerForward(const Layer& layer, const at::Tensor& x,
                          const EncoderPass& pass, const RelativeIndex* index) const;
  at::Tensor ConvForward(const at::Tensor& embeddings, const at::Tensor& residual, const at::Tensor& mask) const;
  std::shared_ptr<const RelativeIndex> IndexFor(int64_t length) const;

  ModelConfig config_;
  DebertaV2Config c_;
  Activation hidden_act_;
  bool use_c2p_ = false;
  bool use_p2c_ = false;
  int64_t heads_ = 0;
  int64_t head_dim_ = 0;

  at::Tensor word_embeddings_;
  at::Tensor position_embeddings_;    // undefined unless position_biased_input
  at::Tensor token_type_embeddings_;  // undefined unless type_vocab_size > 0
  Linear embed_proj_;                 // undefined unless embedding_size != hidden_size
  LayerNorm embedding_norm_;
  std::vector<Layer> layers_;
  std::unique_ptr<Conv> conv_;

  // Classification head.
  Linear pooler_;
  Activation pooler_act_ = Activation::kGelu;
  Linear classifier_;

  LengthCache<RelativeIndex> index_cache_;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_FAMILIES_DEBERTA_V2_DEBERTA_V2_MODEL_H_
