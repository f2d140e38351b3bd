#ifndef RELSERVE_SERVER_MODEL_FAMILIES_T5_T5_ENCODER_MODEL_H_
#define RELSERVE_SERVER_MODEL_FAMILIES_T5_T5_ENCODER_MODEL_H_

#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"
#include "server/model/layers/activation.h"
#include "server/model/layers/encoder_model.h"
#include "server/model/layers/layers.h"
#include "server/model/layers/length_cache.h"
#include "server/model/layers/relative_attention.h"
#include "server/model/families/t5/t5_config.h"
#include "server/model_config/model_config.h"
#include "server/model/layers/weight_loader.h"

namespace relserve {

struct EncoderPass;
class TokenPacking;

// T5 / T5 v1.1 / mT5 encoders: transformers' T5EncoderModel (T5Stack without the decoder),
// also taken out of T5Model / T5ForConditionalGeneration checkpoints.
//
// The relative position bias depends on the query i and key j through j - i only: it is kept
// per sequence length (cached) as a [heads, 2L - 1] table, which every layer's fused softmax
// (relative_softmax.h) adds with the padding mask, as T5Stack passes the first layer's
// position_bias on to the others. No [heads, batch, L, L] bias is built on the CPU; on a GPU
// the table is expanded once per length to the [heads, L, L] bias of the fused attention
// kernel (biased_attention.h).
class T5EncoderModel : public EncoderModel {
 public:
  static absl::StatusOr<std::unique_ptr<T5EncoderModel>> Load(const ModelConfig& config, WeightLoader& weights);

  EncoderOutputs Forward(const EncoderInputs& inputs, bool all_hidden_states) const override;
  std::vector<Linear*> EncoderLinears() override;

 private:
  struct RmsNorm {  // T5LayerNorm: no mean, no bias, variance in float32
    at::Tensor weight;
    double eps;
    at::Tensor operator()(const at::Tensor& x) const;
  };
  struct Block {
    RmsNorm attention_norm;
    Linear qkv;  // q, k, v fused; no biases and no score scaling in T5
    Linear o;
    RmsNorm ff_norm;
    Linear wi;  // gated: wi_0 and wi_1 fused
    Linear wo;
    std::vector<Linear*> Linears() { return {&qkv, &o, &wi, &wo}; }
  };


  explicit T5EncoderModel(const ModelConfig& config);
  // Sizes of config.json against the checkpoint's tensors, naming the key that disagrees.
  absl::Status CheckSizes(const WeightLoader& weights) const;
  absl::Status LoadWeights(WeightLoader& weights);
  // x: [tokens, d_model], the real tokens' rows when `packing` is given, else all B * L.
  at::Tensor BlockForward(const Block& block, const at::Tensor& x,
                          const EncoderPass& pass, const PositionBiasTables& position_bias) const;
  std::shared_ptr<const PositionBiasTables> PositionBias(int64_t length) const;

  ModelConfig config_;
  T5Config c_;
  Activation act_ = Activation::kRelu;
  at::Tensor embed_tokens_;
  at::Tensor relative_attention_bias_;  // [num_buckets, heads]
  std::vector<Block> blocks_;
  RmsNorm final_norm_;

  LengthCache<PositionBiasTables> bias_cache_;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_FAMILIES_T5_T5_ENCODER_MODEL_H_
