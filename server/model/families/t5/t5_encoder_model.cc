#include "server/model/families/t5/t5_encoder_model.h"

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "server/model/layers/biased_attention.h"
#include "server/model/runtime/device.h"
#include "server/model/layers/encoder_driver.h"
#include "server/model/kernels/layer_norm_kernel.h"
#include "server/model/layers/relative_attention.h"
#include "server/model/layers/relative_position.h"
#include "server/model/kernels/relative_softmax.h"
#include "server/model/layers/token_packing.h"
#include "server/util/status_macros.h"

namespace relserve {

at::Tensor T5EncoderModel::RmsNorm::operator()(const at::Tensor& x) const {
  const at::ScalarType t = x.scalar_type();
  if (x.device().is_cpu() && t == weight.scalar_type() && (t == at::kFloat || t == at::kBFloat16 || t == at::kHalf)) {
    return relserve::RmsNorm(x, weight, eps);  // one pass, the same roundings
  }
  at::Tensor variance = x.to(at::kFloat).pow(2).mean(-1, /*keepdim=*/true);
  at::Tensor normed = x * at::rsqrt(variance + eps);
  if (weight.scalar_type() == at::kHalf || weight.scalar_type() == at::kBFloat16) {
    normed = normed.to(weight.scalar_type());
  }
  return weight * normed;
}

namespace {

// T5Block after its attention and after its feed-forward, in float16 only: where any value is
// infinite, every value is clamped to +-(finfo.max - 1000); otherwise to +-finfo.max, which
// leaves finite values as they are.
at::Tensor ClampInfinities(const at::Tensor& h) {
  if (h.scalar_type() != at::kHalf) return h;
  if (h.device().is_cpu()) {
    if (!at::isinf(h).any().item<bool>()) return h;
    const double limit = 65504.0 - 1000.0;
    return at::clamp(h, -limit, limit);
  }
  // On a GPU the test stays on the device (reading it back would stall the stream): the limit
  // is finfo.max - 1000 where any value is infinite, else finfo.max, which only maps +-inf.
  at::Tensor limit = at::where(at::isinf(h).any(), at::scalar_tensor(65504.0 - 1000.0, h.options()),
                               at::scalar_tensor(65504.0, h.options()));
  return at::clamp(h, at::neg(limit), limit);
}

}  // namespace

T5EncoderModel::T5EncoderModel(const ModelConfig& config) : config_(config), c_(config.family_config_as<T5Config>()) {}

absl::StatusOr<std::unique_ptr<T5EncoderModel>> T5EncoderModel::Load(const ModelConfig& config,
                                                                      WeightLoader& weights) {
  std::unique_ptr<T5EncoderModel> model(new T5EncoderModel(config));
  RETURN_IF_ERROR(model->LoadWeights(weights));
  return model;
}

absl::Status T5EncoderModel::CheckSizes(const WeightLoader& w) const {
  const std::string block0 = "encoder.block.0.layer.";
  RETURN_IF_ERROR(w.CheckConfigSize(ConfigSize("d_model", c_.d_model), c_.d_model, "encoder.final_layer_norm.weight", 0));
  for (const char* embedding : {"shared.weight", "encoder.embed_tokens.weight"}) {
    RETURN_IF_ERROR(w.CheckConfigSize(ConfigSize("vocab_size", c_.vocab_size), c_.vocab_size, embedding, 0));
  }
  RETURN_IF_ERROR(w.CheckBlockCount(ConfigSize("num_layers", c_.num_layers), c_.num_layers, "encoder.block."));
  const std::string bias = block0 + "0.SelfAttention.relative_attention_bias.weight";
  RETURN_IF_ERROR(w.CheckConfigSize(ConfigSize("relative_attention_num_buckets", c_.relative_attention_num_buckets),
                                    c_.relative_attention_num_buckets, bias, 0));
  RETURN_IF_ERROR(w.CheckConfigSize(ConfigSize("num_heads", c_.num_heads), c_.num_heads, bias, 1));
  RETURN_IF_ERROR(w.CheckConfigSize(
      absl::StrCat(ConfigSize("num_heads", c_.num_heads), " x ", ConfigSize("d_kv", c_.d_kv)), c_.inner_dim(),
      block0 + "0.SelfAttention.q.weight", 0));
  RETURN_IF_ERROR(w.CheckConfigSize(ConfigSize("d_ff", c_.d_ff), c_.d_ff,
                                    block0 + (c_.is_gated_act ? "1.DenseReluDense.wi_0.weight" : "1.DenseReluDense.wi.weight"), 0));
  return absl::OkStatus();
}

absl::Status T5EncoderModel::LoadWeights(WeightLoader& w) {
  RETURN_IF_ERROR(CheckSizes(w));
  const int64_t D = c_.d_model, I = c_.inner_dim(), F = c_.d_ff;
  ASSIGN_OR_RETURN(act_, ParseActivation(c_.dense_act_fn));
  // Tied embeddings: T5 checkpoints hold shared.weight, encoder.embed_tokens.weight, or both.
  const std::vector<int64_t> emb_shape = {c_.vocab_size, D};
  if (w.Has("shared.weight")) {
    ASSIGN_OR_RETURN(embed_tokens_, w.Get("shared.weight", emb_shape));
    w.Skip("encoder.embed_tokens.weight");
  } else if (w.Has("encoder.embed_tokens.weight")) {
    ASSIGN_OR_RETURN(embed_tokens_, w.Get("encoder.embed_tokens.weight", emb_shape));
  } else {
    return absl::NotFoundError(absl::StrCat("missing tensor \"shared.weight\" (or \"encoder.embed_tokens.weight\"), "
                                            "expected shape [", c_.vocab_size, ", ", D, "]"));
  }
  ASSIGN_OR_RETURN(relative_attention_bias_,
                   w.Get("encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
                         {c_.relative_attention_num_buckets, c_.num_heads}));
  for (int i = 0; i < c_.num_layers; ++i) {
    const std::string b = absl::StrCat("encoder.block.", i, ".layer.");
    Block block;
    ASSIGN_OR_RETURN(block.attention_norm.weight, w.Get(b + "0.layer_norm.weight", {D}));
    block.attention_norm.eps = c_.layer_norm_epsilon;
    ASSIGN_OR_RETURN(Linear q, LoadLinear(w, b + "0.SelfAttention.q", D, I, false));
    ASSIGN_OR_RETURN(Linear k, LoadLinear(w, b + "0.SelfAttention.k", D, I, false));
    ASSIGN_OR_RETURN(Linear v, LoadLinear(w, b + "0.SelfAttention.v", D, I, false));
    block.qkv = FuseLinear({&q, &k, &v});
    ASSIGN_OR_RETURN(block.o, LoadLinear(w, b + "0.SelfAttention.o", I, D, false));
    ASSIGN_OR_RETURN(block.ff_norm.weight, w.Get(b + "1.layer_norm.weight", {D}));
    block.ff_norm.eps = c_.layer_norm_epsilon;
    if (c_.is_gated_act) {
      ASSIGN_OR_RETURN(Linear wi0, LoadLinear(w, b + "1.DenseReluDense.wi_0", D, F, false));
      ASSIGN_OR_RETURN(Linear wi1, LoadLinear(w, b + "1.DenseReluDense.wi_1", D, F, false));
      block.wi = FuseLinear({&wi0, &wi1});
    } else {
      ASSIGN_OR_RETURN(block.wi, LoadLinear(w, b + "1.DenseReluDense.wi", D, F, false));
    }
    ASSIGN_OR_RETURN(block.wo, LoadLinear(w, b + "1.DenseReluDense.wo", F, D, false));
    blocks_.push_back(std::move(block));
  }
  ASSIGN_OR_RETURN(final_norm_.weight, w.Get("encoder.final_layer_norm.weight", {D}));
  final_norm_.eps = c_.layer_norm_epsilon;
  return absl::OkStatus();
}

std::shared_ptr<const PositionBiasTables> T5EncoderModel::PositionBias(int64_t length) const {
  return bias_cache_.Get(length, [&] {
    // T5Attention.compute_bias: embedding of the bucket of (memory - context), read by j - i.
    at::Tensor buckets = T5RelativePositionBucket(length, length, c_.relative_attention_num_buckets,
                                                  c_.relative_attention_max_distance);
    at::Tensor by_offset = ToeplitzTable(buckets).to(at::kLong);  // [2L - 1]
    const auto device = relative_attention_bias_.device();
    at::Tensor table = at::embedding(relative_attention_bias_, by_offset.to(device)).t().contiguous();  // [heads, 2L - 1]
    return PositionBiasTables::FromOffsets(table, length);
  });
}

at::Tensor T5EncoderModel::BlockForward(const Block& block, const at::Tensor& x,
                                        const EncoderPass& pass, const PositionBiasTables& position_bias) const {
  const int64_t B = pass.batch, L = pass.length;
  const TokenPacking* packing = pass.packing.get();
  const at::Tensor& mask = pass.mask;
  const int64_t Hd = c_.num_heads;
  at::Tensor normed = block.attention_norm(x);
  at::Tensor qkv_rows = block.qkv(normed);
  at::Tensor qkv = SplitHeads(qkv_rows, packing, B, L, 3, Hd);
  // softmax((q.k + position_bias + mask).float()).type_as(scores); padded queries' rows are
  // computed like the others, as T5 does.
  RelativeAttentionInputs att;
  att.q = qkv[0], att.k = qkv[1], att.v = qkv[2];  // [heads, B, L, Dk]
  position_bias.SetOn(att);
  att.attention_mask = mask;
  pass.ForAttention(att);
  at::Tensor per_head = RelativeAttention(att);
  at::Tensor context = MergeHeads(per_head, packing);
  at::Tensor h = ClampInfinities(block.o(context, Activation::kLinear, x));  // x + o(context)

  normed = block.ff_norm(h);
  at::Tensor inner;
  if (c_.is_gated_act) {
    const int64_t F = c_.d_ff;
    inner = block.wi(normed);
    inner = ApplyActivation(act_, inner.narrow(-1, 0, F)) * inner.narrow(-1, F, F);
  } else {
    inner = block.wi(normed, act_);
  }
  return ClampInfinities(block.wo(inner, Activation::kLinear, h));  // h + wo(inner)
}

EncoderOutputs T5EncoderModel::Forward(const EncoderInputs& in, bool all_hidden_states) const {
  std::shared_ptr<const PositionBiasTables> position_bias = PositionBias(in.input_ids.size(1));
  return RunEncoderLayers(
      in, at::embedding(embed_tokens_, in.input_ids), blocks_.size(), all_hidden_states,
      [&](const EncoderPass& p, size_t i, const at::Tensor& x) {
        return BlockForward(blocks_[i], x, p, *position_bias);
      },
      [&](const at::Tensor& x) { return final_norm_(x); });
}

std::vector<Linear*> T5EncoderModel::EncoderLinears() { return AllLinears(blocks_); }

}  // namespace relserve
