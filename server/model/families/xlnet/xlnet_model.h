#ifndef RELSERVE_SERVER_MODEL_FAMILIES_XLNET_XLNET_MODEL_H_
#define RELSERVE_SERVER_MODEL_FAMILIES_XLNET_XLNET_MODEL_H_

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"
#include "server/model/layers/activation.h"
#include "server/model/layers/encoder_model.h"
#include "server/model/families/xlnet/xlnet_config.h"
#include "server/model/layers/layers.h"
#include "server/model/layers/length_cache.h"
#include "server/model_config/model_config.h"
#include "server/model/layers/weight_loader.h"

namespace relserve {

// transformers' XLNetModel at inference (no memory, no permutation mask, no target mapping:
// the content stream only), and the sequence summary and logits_proj of
// XLNetForSequenceClassification (modeling_xlnet.py, 4.40.2).
//
// Attention is Transformer-XL's, through RelativeAttention (relative_attention.h):
//   score(i, j) = ((q_i + r_w_bias).k_j + (q_i + r_r_bias).(W_r pe(i - j))
//                  + (q_i + r_s_bias).seg_embed[s_ij]) / sqrt(d_head)
// - r_w_bias and 1/sqrt(d_head) are folded into the query projection, so q is the content
//   query; the position query is q + (r_r_bias - r_w_bias)/sqrt(d_head).
// - The position term is the c2p term: the position query times the projected sinusoid table,
//   rows indexed by j - i (transformers' rel_shift_bnij of a [L, 2L] product does the same).
//   The projections W_r pe(r) do not depend on the input; they are computed once for every
//   distance a batch has reached so far (clamp_len bounds them) and kept, up to distances of
//   1023; longer batches project the distances they reach in each forward.
// - The segment term, s_ij = 0 where the token types of i and j are equal, is per query the
//   score against seg_embed[0] and seg_embed[1]; left out without token_type_ids (as
//   transformers does).
//
// Padding may be on either side. Every real token's output is what transformers computes for
// it whatever the padding (relative distances between real tokens do not change and padded
// keys are masked); summary_type last and cls_index take the last real token (transformers'
// last position in XLNet's left-padded batches), first the first real token and mean the mean
// over the real tokens, as transformers computes them for the sequence alone.
class XlnetModel : public EncoderModel {
 public:
  // `config` as the XLNet descriptor parsed it (family_config an XlnetConfig); a
  // sequence-classification head loads XLNetForSequenceClassification's summary and
  // logits_proj. The backbone's tensors are found with or without the "transformer." prefix.
  // Shapes are checked against the config, naming the key that disagrees.
  static absl::StatusOr<std::unique_ptr<XlnetModel>> Load(const ModelConfig& config, WeightLoader& weights);

  EncoderOutputs Forward(const EncoderInputs& inputs, bool all_hidden_states) const override;
  std::vector<Linear*> EncoderLinears() override;
  std::vector<Linear*> HeadLinears() override { return {&summary_, &logits_proj_}; }

 private:
  struct Layer {
    Linear qkv;  // content query (r_w_bias and the scale folded in), key, value
    Linear r;    // W_r: d_model -> heads * d_head, for the sinusoid table
    at::Tensor position_query_offset;  // [heads, 1, 1, d_head]: (r_r_bias - r_w_bias) / sqrt(d_head)
    at::Tensor seg_embed;              // [heads, d_head, 2]
    at::Tensor segment_offset;         // [heads, 1, 2]: ((r_s_bias - r_w_bias) / sqrt(d_head)) . seg_embed
    Linear o;                          // heads * d_head -> d_model, no bias
    LayerNorm attention_norm;
    Linear ff1, ff2;
    LayerNorm ff_norm;
    // W_r stays in float: it projects the sinusoid table, once per length, not the tokens.
    std::vector<Linear*> Linears() { return {&qkv, &o, &ff1, &ff2}; }
  };
  // W_r pe(r) of every layer for r in [-reach, reach]: row reach + r of [heads, 2 reach + 1, d_head].
  struct PositionKeys {
    int64_t reach = -1;
    std::vector<at::Tensor> per_layer;
  };
  // For one length L: the distances it uses, m = min(L - 1, clamp_len when positive), and the
  // row of the [2m + 1] window (centre m) for each j - i + L - 1.
  struct RelativeIndex {
    int64_t m = 0;
    at::Tensor c2p;         // int32 [2L - 1]
    at::Tensor c2p_gather;  // [L, L] on devices other than the CPU (biased_attention.h)
  };

  explicit XlnetModel(const XlnetConfig& config, int num_labels);
  absl::Status CheckSizes(const WeightLoader& weights, const std::string& prefix) const;
  absl::Status LoadWeights(WeightLoader& weights);
  std::shared_ptr<const PositionKeys> PositionKeysFor(int64_t reach) const;
  std::shared_ptr<const RelativeIndex> IndexFor(int64_t length) const;
  at::Tensor Summary(const at::Tensor& last_hidden_state, const EncoderInputs& in) const;

  XlnetConfig c_;
  int num_labels_ = 0;
  Activation ff_act_ = Activation::kGelu;
  at::Tensor word_embedding_;
  std::vector<Layer> layers_;

  // Classification head.
  Linear summary_;  // undefined without summary_use_proj
  bool summary_act_ = false;
  Activation summary_activation_ = Activation::kTanh;
  Linear logits_proj_;

  mutable std::mutex cache_mu_;
  mutable std::shared_ptr<const PositionKeys> position_keys_;
  LengthCache<RelativeIndex> index_cache_;
};

// relative_positional_encoding's table for r = -reach ... reach in that order, float32
// [2 reach + 1, d_model] on the CPU: [sin(r f_k) ..., cos(r f_k) ...], f_k = 1 / 10000^(2k /
// d_model), computed in float32 as transformers does.
at::Tensor XlnetSinusoidTable(int64_t reach, int64_t d_model);

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_FAMILIES_XLNET_XLNET_MODEL_H_
