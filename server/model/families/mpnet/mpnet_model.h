#ifndef RELSERVE_SERVER_MODEL_FAMILIES_MPNET_MPNET_MODEL_H_
#define RELSERVE_SERVER_MODEL_FAMILIES_MPNET_MPNET_MODEL_H_

#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"
#include "server/model/layers/activation.h"
#include "server/model/layers/encoder_model.h"
#include "server/model/families/mpnet/mpnet_config.h"
#include "server/model/layers/layers.h"
#include "server/model/layers/length_cache.h"
#include "server/model/layers/relative_attention.h"
#include "server/model/layers/post_norm_block.h"
#include "server/model_config/model_config.h"
#include "server/model/layers/weight_loader.h"

namespace relserve {

struct EncoderPass;
class TokenPacking;

// MPNet: transformers' MPNetModel, and the classification head of
// MPNetForSequenceClassification (modeling_mpnet.py, 4.40.2).
//
// BERT-like post-norm layers whose attention scores get a T5-style bucketed relative bias after
// the 1/sqrt(head_size) scaling: MPNetEncoder.compute_position_bias looks up
// encoder.relative_attention_bias [buckets, heads] once per batch and every layer adds the same
// bias. The bias depends on the query i and key j through j - i only, so it is kept per
// sequence length as a [heads, 2L - 1] table that the fused softmax of the CPU
// (relative_softmax.h) adds with the padding mask, as the T5 encoder's is; other devices get it
// expanded once per length to [heads, L, L] (biased_attention.h). Absolute positions come from
// the input ids (kMpnetPaddingIdx). MPNet has no token types: token_type_ids are ignored, as
// MPNetModel.forward swallows them.
//
// Load builds it or fails with a status; the model is then immutable and Forward may run on
// several threads at once (the per-length bias tables are cached under a mutex).
class MpnetModel : public EncoderModel {
 public:
  // `config` is an MPNet config (family_config MpnetConfig). For
  // MPNetForSequenceClassification the head (classifier.dense, classifier.out_proj, num_labels
  // outputs) is loaded and Forward returns logits. The backbone is read under "mpnet." when the
  // checkpoint has that prefix (task-head checkpoints), else at the top level, as from_pretrained
  // loads either into either. Errors name the config key or tensor: INVALID_ARGUMENT for sizes of
  // config.json that disagree with the checkpoint, NOT_FOUND for a missing tensor. Tensors Load
  // does not take are left to the caller's WeightLoader::CheckNoneUnused with the descriptor's
  // IgnoredPrefixes.
  static absl::StatusOr<std::unique_ptr<MpnetModel>> Load(const ModelConfig& config, WeightLoader& weights);

  EncoderOutputs Forward(const EncoderInputs& inputs, bool all_hidden_states) const override;
  bool RunsFirstTokenOnly() const override { return true; }
  std::vector<Linear*> EncoderLinears() override;
  std::vector<Linear*> HeadLinears() override { return {&classifier_dense_, &classifier_out_}; }
  at::Tensor word_embeddings() const override { return word_embeddings_; }

 private:
  using Layer = PostNormBlock;  // the query rows divided by sqrt(head_size)

  explicit MpnetModel(const MpnetConfig& config, int num_labels);
  // Sizes of config.json against the checkpoint's tensors, naming the key that disagrees.
  absl::Status CheckSizes(const WeightLoader& weights, const std::string& prefix) const;
  absl::Status LoadWeights(WeightLoader& weights);
  at::Tensor Embed(const at::Tensor& input_ids) const;
  // x: [tokens, hidden], the real tokens' rows when `packing` is given, else all B * L.
  at::Tensor LayerForward(const Layer& layer, const at::Tensor& x,
                          const EncoderPass& pass, const PositionBiasTables& position_bias) const;
  std::shared_ptr<const PositionBiasTables> PositionBias(int64_t length) const;

  MpnetConfig c_;
  int num_labels_ = 0;
  Activation hidden_act_ = Activation::kGelu;

  at::Tensor word_embeddings_;
  at::Tensor position_embeddings_;
  LayerNorm embedding_norm_;
  at::Tensor relative_attention_bias_;  // [relative_attention_num_buckets, heads]
  std::vector<Layer> layers_;
  // MPNetClassificationHead: out_proj(tanh(dense(first token))); undefined without labels.
  Linear classifier_dense_;
  Linear classifier_out_;

  LengthCache<PositionBiasTables> bias_cache_;
};

// create_position_ids_from_input_ids(input_ids, padding_idx=1): int64 [batch, L] positions,
// padding_idx + (number of non-padding ids up to and including t) at tokens whose id is not
// padding_idx, padding_idx at the others. On input_ids' device.
at::Tensor MpnetPositionIds(const at::Tensor& input_ids);

// MPNetEncoder.relative_position_bucket for (key - query) offsets of a length-L sequence: int64
// [L, L], bucket[i][j] of query i and key j. The same buckets as T5's bidirectional ones with 32
// buckets and distance 128: keys after the query take the upper half.
at::Tensor MpnetRelativePositionBucket(int64_t length);

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_FAMILIES_MPNET_MPNET_MODEL_H_
