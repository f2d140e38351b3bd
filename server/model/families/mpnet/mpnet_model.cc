#include "server/model/families/mpnet/mpnet_model.h"

#include <cmath>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "server/model/layers/biased_attention.h"
#include "server/model/runtime/device.h"
#include "server/model/layers/encoder_driver.h"
#include "server/model/layers/relative_attention.h"
#include "server/model/layers/relative_position.h"
#include "server/model/kernels/relative_softmax.h"
#include "server/model/layers/token_packing.h"
#include "server/util/status_macros.h"

namespace relserve {

at::Tensor MpnetPositionIds(const at::Tensor& input_ids) {
  // mask = input_ids.ne(padding_idx).int(); cumsum(mask, 1) * mask + padding_idx
  at::Tensor mask = input_ids.ne(kMpnetPaddingIdx).to(at::kLong);
  return at::cumsum(mask, 1).mul_(mask).add_(kMpnetPaddingIdx);
}

at::Tensor MpnetRelativePositionBucket(int64_t length) {
  // relative_position_bucket(memory - context): n = -(j - i); keys after the query (n < 0) add
  // num_buckets / 2, then |n| is bucketed exactly below max_exact and logarithmically up to
  // max_distance. T5's bidirectional bucket of j - i is the same function.
  return T5RelativePositionBucket(length, length, kMpnetBiasBuckets, kMpnetBiasMaxDistance);
}

MpnetModel::MpnetModel(const MpnetConfig& config, int num_labels) : c_(config), num_labels_(num_labels) {}

absl::StatusOr<std::unique_ptr<MpnetModel>> MpnetModel::Load(const ModelConfig& config, WeightLoader& weights) {
  const int num_labels = config.head == HeadKind::kSequenceClassification ? config.num_labels : 0;
  std::unique_ptr<MpnetModel> model(new MpnetModel(config.family_config_as<MpnetConfig>(), num_labels));
  RETURN_IF_ERROR(model->LoadWeights(weights));
  return model;
}

absl::Status MpnetModel::CheckSizes(const WeightLoader& w, const std::string& p) const {
  const std::string emb = p + "embeddings.", enc = p + "encoder.", layer0 = enc + "layer.0.";
  const int64_t H = c_.hidden_size;
  RETURN_IF_ERROR(w.CheckConfigSize(ConfigSize("hidden_size", H), H, emb + "LayerNorm.weight", 0));
  RETURN_IF_ERROR(w.CheckConfigSize(ConfigSize("vocab_size", c_.vocab_size), c_.vocab_size,
                                    emb + "word_embeddings.weight", 0));
  RETURN_IF_ERROR(w.CheckConfigSize(ConfigSize("max_position_embeddings", c_.max_position_embeddings),
                                    c_.max_position_embeddings, emb + "position_embeddings.weight", 0));
  RETURN_IF_ERROR(w.CheckBlockCount(ConfigSize("num_hidden_layers", c_.num_hidden_layers), c_.num_hidden_layers,
                                    enc + "layer."));
  const std::string bias = enc + "relative_attention_bias.weight";
  RETURN_IF_ERROR(w.CheckConfigSize(ConfigSize("relative_attention_num_buckets", c_.relative_attention_num_buckets),
                                    c_.relative_attention_num_buckets, bias, 0));
  RETURN_IF_ERROR(w.CheckConfigSize(ConfigSize("num_attention_heads", c_.num_attention_heads),
                                    c_.num_attention_heads, bias, 1));
  RETURN_IF_ERROR(w.CheckConfigSize(ConfigSize("intermediate_size", c_.intermediate_size), c_.intermediate_size,
                                    layer0 + "intermediate.dense.weight", 0));
  if (num_labels_ > 0) {
    RETURN_IF_ERROR(w.CheckConfigSize(ConfigSize("num_labels", num_labels_) + " (the entries of id2label when given)",
                                      num_labels_, "classifier.out_proj.weight", 0));
  }
  return absl::OkStatus();
}

absl::Status MpnetModel::LoadWeights(WeightLoader& w) {
  const int64_t H = c_.hidden_size, I = c_.intermediate_size, heads = c_.num_attention_heads;
  ASSIGN_OR_RETURN(hidden_act_, ParseActivation(c_.hidden_act));
  // Task-head classes nest the backbone under "mpnet."; MPNetModel checkpoints have no prefix.
  const std::string p = w.Has("mpnet.embeddings.word_embeddings.weight") ? "mpnet." : "";
  const std::string emb = p + "embeddings.", enc = p + "encoder.";
  RETURN_IF_ERROR(CheckSizes(w, p));

  ASSIGN_OR_RETURN(word_embeddings_, w.Get(emb + "word_embeddings.weight", {c_.vocab_size, H}));
  ASSIGN_OR_RETURN(position_embeddings_, w.Get(emb + "position_embeddings.weight", {c_.max_position_embeddings, H}));
  w.Skip(emb + "position_ids");  // a buffer older checkpoints saved
  ASSIGN_OR_RETURN(embedding_norm_, LoadLayerNorm(w, emb + "LayerNorm", H, c_.layer_norm_eps));
  ASSIGN_OR_RETURN(relative_attention_bias_,
                   w.Get(enc + "relative_attention_bias.weight", {c_.relative_attention_num_buckets, heads}));

  // MPNetSelfAttention: scores = q.k / sqrt(head_size) + position_bias. The scale is folded into
  // the query projection, so that the bias is added to q'.k unscaled.
  const double scale = std::sqrt(static_cast<double>(c_.head_size()));
  for (int i = 0; i < c_.num_hidden_layers; ++i) {
    const std::string l = absl::StrCat(enc, "layer.", i, ".");
    const std::string att = l + "attention.attn.";
    Layer layer;
    ASSIGN_OR_RETURN(Linear q, LoadLinear(w, att + "q", H, H, true));
    ASSIGN_OR_RETURN(Linear k, LoadLinear(w, att + "k", H, H, true));
    ASSIGN_OR_RETURN(Linear v, LoadLinear(w, att + "v", H, H, true));
    Linear q_scaled{q.weight / scale, q.bias / scale, nullptr, nullptr};
    layer.qkv = FuseLinear({&q_scaled, &k, &v});
    RETURN_IF_ERROR(
        LoadPostNormBlockDense(w, {att + "o", l + "attention.LayerNorm", l}, H, H, I, c_.layer_norm_eps, &layer));
    layers_.push_back(std::move(layer));
  }

  if (num_labels_ > 0) {
    ASSIGN_OR_RETURN(classifier_dense_, LoadLinear(w, "classifier.dense", H, H, true));
    ASSIGN_OR_RETURN(classifier_out_, LoadLinear(w, "classifier.out_proj", H, num_labels_, true));
  } else if (p.empty()) {
    // MPNetModel's pooler (BertPooler: dense + tanh on the first token) is loaded by
    // transformers, but its output is not served: its shapes are checked, its values left.
    for (const char* name : {"pooler.dense.weight", "pooler.dense.bias"}) {
      RETURN_IF_ERROR(w.CheckConfigSize(ConfigSize("hidden_size", H), H, name, 0));
      w.Skip(name);
    }
    RETURN_IF_ERROR(w.CheckConfigSize(ConfigSize("hidden_size", H), H, "pooler.dense.weight", 1));
  }
  return absl::OkStatus();
}

std::shared_ptr<const PositionBiasTables> MpnetModel::PositionBias(int64_t length) const {
  return bias_cache_.Get(length, [&] {
    // compute_position_bias: relative_attention_bias(bucket) permuted to [heads, L, L], read by
    // j - i.
    at::Tensor by_offset = ToeplitzTable(MpnetRelativePositionBucket(length)).to(at::kLong);  // [2L - 1]
    const auto device = relative_attention_bias_.device();
    at::Tensor table = at::embedding(relative_attention_bias_, by_offset.to(device)).t().contiguous();  // [heads, 2L - 1]
    return PositionBiasTables::FromOffsets(table, length);
  });
}

at::Tensor MpnetModel::Embed(const at::Tensor& input_ids) const {
  // MPNetEmbeddings.forward: LayerNorm(word + position); no token types.
  at::Tensor x = at::embedding(word_embeddings_, input_ids);
  return embedding_norm_(x, at::embedding(position_embeddings_, MpnetPositionIds(input_ids)));
}

at::Tensor MpnetModel::LayerForward(const Layer& layer, const at::Tensor& x,
                                    const EncoderPass& pass, const PositionBiasTables& position_bias) const {
  const int64_t B = pass.batch, L = pass.length;
  const TokenPacking* packing = pass.packing.get();
  const at::Tensor& mask = pass.mask;
  const int64_t Hd = c_.num_attention_heads;
  at::Tensor qkv_rows = layer.qkv(x);
  at::Tensor qkv = SplitHeads(qkv_rows, packing, B, L, 3, Hd);
  // softmax(q.k / sqrt(d) + position_bias + extended mask); padded queries' rows are computed
  // like the others, as MPNet does (only padded keys are masked).
  RelativeAttentionInputs att;
  att.q = qkv[0], att.k = qkv[1], att.v = qkv[2];  // [heads, B, L, D]
  position_bias.SetOn(att);
  att.attention_mask = mask;
  pass.ForAttention(att);
  at::Tensor per_head = RelativeAttention(att);
  at::Tensor context = MergeHeads(per_head, packing);

  // MPNetAttention: LayerNorm(o(c) + x); MPNetIntermediate, MPNetOutput as BERT's.
  // After attention each row is its own: the last layer of a first-token forward runs those alone.
  return layer.AfterAttention(pass.RowsAfterAttention(context), pass.RowsAfterAttention(x), hidden_act_);
}

EncoderOutputs MpnetModel::Forward(const EncoderInputs& in, bool all_hidden_states) const {
  // Once, for every layer.
  std::shared_ptr<const PositionBiasTables> position_bias = PositionBias(in.input_ids.size(1));
  EncoderOutputs out = RunEncoderLayers(
      in, Embed(in.input_ids), layers_.size(), all_hidden_states,
      [&](const EncoderPass& p, size_t i, const at::Tensor& x) {
        return LayerForward(layers_[i], x, p, *position_bias);
      });
  if (num_labels_ > 0) {
    // MPNetClassificationHead on <s>: out_proj(tanh(dense(x[:, 0])))
    at::Tensor first = out.last_hidden_state.select(1, 0);
    out.logits = classifier_out_(at::tanh(classifier_dense_(first)));
  }
  return out;
}

std::vector<Linear*> MpnetModel::EncoderLinears() { return AllLinears(layers_); }

}  // namespace relserve
