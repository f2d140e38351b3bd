#include "server/model/families/xlnet/xlnet_model.h"

#include <algorithm>
#include <cmath>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "server/model/layers/biased_attention.h"
#include "server/model/runtime/device.h"
#include "server/model/layers/encoder_driver.h"
#include "server/model/layers/relative_attention.h"
#include "server/model/layers/token_packing.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

// Distances kept: (2 x 1023 + 1) rows of heads x d_head per layer (75 MB for xlnet-base, 200 MB
// for xlnet-large in float32), built whole at the first forward (clamp_len bounds it). Longer
// batches project the rows they reach in each forward, which costs about 1/(6 x batch) of the
// forward's own projections.
// The table is not grown with the batches' lengths: rows built at different table sizes differed
// in their last bits (outputs about 2e-6 apart), so a text's answer changed with the batches a
// server had run before (HistoryTest in concurrent_batches_test).
constexpr int64_t kMaxKeptReach = 1023;

}  // namespace

// XLNetModel.relative_positional_encoding / positional_embedding, for the distances
// -reach ... reach (transformers lists them from klen down; each row depends on its r alone).
at::Tensor XlnetSinusoidTable(int64_t reach, int64_t d_model) {
  // freq_seq = arange(0, d_model, 2.0, dtype=int64).float(); inv_freq = 1 / pow(10000, freq_seq / d_model)
  at::Tensor freq_seq = at::arange(0, d_model, 2, at::kLong).to(at::kFloat);
  at::Tensor inv_freq = at::reciprocal(at::pow(10000.0, freq_seq / static_cast<double>(d_model)));
  at::Tensor pos_seq = at::arange(-reach, reach + 1, at::kLong).to(at::kFloat);
  at::Tensor sinusoid_inp = at::outer(pos_seq, inv_freq);  // einsum("i,d->id")
  return at::cat({at::sin(sinusoid_inp), at::cos(sinusoid_inp)}, -1);
}

XlnetModel::XlnetModel(const XlnetConfig& config, int num_labels) : c_(config), num_labels_(num_labels) {}

absl::StatusOr<std::unique_ptr<XlnetModel>> XlnetModel::Load(const ModelConfig& config, WeightLoader& weights) {
  const int num_labels = config.head == HeadKind::kSequenceClassification ? config.num_labels : 0;
  std::unique_ptr<XlnetModel> model(new XlnetModel(config.family_config_as<XlnetConfig>(), num_labels));
  RETURN_IF_ERROR(model->LoadWeights(weights));
  return model;
}

absl::Status XlnetModel::CheckSizes(const WeightLoader& w, const std::string& p) const {
  const std::string layer0 = p + "layer.0.", emb = p + "word_embedding.weight";
  RETURN_IF_ERROR(w.CheckConfigSize(ConfigSize("vocab_size", c_.vocab_size), c_.vocab_size, emb, 0));
  RETURN_IF_ERROR(w.CheckConfigSize(ConfigSize("d_model", c_.d_model), c_.d_model, emb, 1));
  RETURN_IF_ERROR(w.CheckBlockCount(ConfigSize("n_layer", c_.n_layer), c_.n_layer, p + "layer."));
  RETURN_IF_ERROR(w.CheckConfigSize(ConfigSize("n_head", c_.n_head), c_.n_head, layer0 + "rel_attn.q", 1));
  RETURN_IF_ERROR(w.CheckConfigSize(ConfigSize("d_head", c_.d_head) + " (d_model / n_head)", c_.d_head,
                                    layer0 + "rel_attn.q", 2));
  RETURN_IF_ERROR(w.CheckConfigSize(ConfigSize("d_inner", c_.d_inner), c_.d_inner, layer0 + "ff.layer_1.weight", 0));
  if (!w.Has(layer0 + "rel_attn.r_w_bias") && w.Has(p + "r_w_bias")) {
    // The layout of the original TensorFlow XLNet with untie_r false. transformers' PyTorch
    // modules hold the biases per layer only, and would initialise them at random here.
    return absl::InvalidArgumentError(absl::StrCat(
        "\"untie_r\" ", c_.untie_r ? "true" : "false", ": the checkpoint holds one \"", p,
        "r_w_bias\" for all layers, but XLNetModel reads per-layer biases (\"", layer0,
        "rel_attn.r_w_bias\" ...); convert it with transformers' XLNet TensorFlow converter"));
  }
  if (num_labels_ > 0) {
    RETURN_IF_ERROR(w.CheckConfigSize(ConfigSize("num_labels", num_labels_) + " (the entries of id2label when given)",
                                      num_labels_, "logits_proj.weight", 0));
    if (c_.summary_use_proj) {
      const std::string what =
          c_.summary_proj_to_labels
              ? absl::StrCat(ConfigSize("num_labels", num_labels_), " (with \"summary_proj_to_labels\" true)")
              : absl::StrCat(ConfigSize("d_model", c_.d_model), " (\"summary_proj_to_labels\" false or absent)");
      RETURN_IF_ERROR(w.CheckConfigSize(what, c_.summary_width(num_labels_), "sequence_summary.summary.weight", 0));
    } else {
      RETURN_IF_ERROR(w.CheckAbsent("\"summary_use_proj\" false", "sequence_summary.summary.weight"));
    }
  }
  return absl::OkStatus();
}

absl::Status XlnetModel::LoadWeights(WeightLoader& w) {
  const int64_t H = c_.d_model, heads = c_.n_head, D = c_.d_head, A = heads * D;
  ASSIGN_OR_RETURN(ff_act_, ParseActivation(c_.ff_activation));
  // XLNetForSequenceClassification and XLNetLMHeadModel nest the backbone under "transformer.".
  const std::string p = w.Has("transformer.word_embedding.weight") ? "transformer." : "";
  RETURN_IF_ERROR(CheckSizes(w, p));
  ASSIGN_OR_RETURN(word_embedding_, w.Get(p + "word_embedding.weight", {c_.vocab_size, H}));
  w.Skip(p + "mask_emb");  // the query stream's embedding, for target_mapping only

  // XLNetRelativeAttention.scale = 1 / d_head ** 0.5 multiplies every score term: folded into
  // the queries, the biases added to them and the segment scores.
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  for (int i = 0; i < c_.n_layer; ++i) {
    const std::string l = absl::StrCat(p, "layer.", i, ".");
    const std::string att = l + "rel_attn.";
    // Parameters [d_model, n_head, d_head] of einsum("ibh,hnd->ibnd"): as nn.Linear weights
    // [heads * d_head, d_model].
    auto projection = [&](const char* name) -> absl::StatusOr<at::Tensor> {
      ASSIGN_OR_RETURN(at::Tensor t, w.Get(att + name, {H, heads, D}));
      return t.reshape({H, A}).t().contiguous();
    };
    Layer layer;
    ASSIGN_OR_RETURN(at::Tensor q, projection("q"));
    ASSIGN_OR_RETURN(at::Tensor k, projection("k"));
    ASSIGN_OR_RETURN(at::Tensor v, projection("v"));
    ASSIGN_OR_RETURN(layer.r.weight, projection("r"));
    ASSIGN_OR_RETURN(at::Tensor o, w.Get(att + "o", {H, heads, D}));
    layer.o.weight = o.reshape({H, A});  // einsum("ibnd,hnd->ibh")
    ASSIGN_OR_RETURN(at::Tensor r_w_bias, w.Get(att + "r_w_bias", {heads, D}));
    ASSIGN_OR_RETURN(at::Tensor r_r_bias, w.Get(att + "r_r_bias", {heads, D}));
    ASSIGN_OR_RETURN(at::Tensor r_s_bias, w.Get(att + "r_s_bias", {heads, D}));
    ASSIGN_OR_RETURN(at::Tensor seg_embed, w.Get(att + "seg_embed", {2, heads, D}));

    // Content query (q + r_w_bias) * scale; key and value without bias (zeros, for one GEMM).
    Linear content{q * scale, (r_w_bias * scale).reshape({A}), nullptr, nullptr};
    Linear key{k, at::zeros({A}, k.options()), nullptr, nullptr};
    Linear value{v, at::zeros({A}, v.options()), nullptr, nullptr};
    layer.qkv = FuseLinear({&content, &key, &value});
    // (q + r_r_bias) * scale = content query + (r_r_bias - r_w_bias) * scale.
    layer.position_query_offset = ((r_r_bias - r_w_bias) * scale).view({heads, 1, 1, D}).contiguous();
    // (q + r_s_bias) * scale . seg_embed[s] = content query . seg_embed[s] + ((r_s_bias - r_w_bias) * scale) . seg_embed[s]
    layer.seg_embed = seg_embed.permute({1, 2, 0}).contiguous();  // [heads, D, 2]
    layer.segment_offset =
        ((r_s_bias - r_w_bias) * scale).unsqueeze(0).mul(seg_embed).sum(-1).t().unsqueeze(1).contiguous();
    ASSIGN_OR_RETURN(layer.attention_norm, LoadLayerNorm(w, att + "layer_norm", H, c_.layer_norm_eps));
    ASSIGN_OR_RETURN(layer.ff1, LoadLinear(w, l + "ff.layer_1", H, c_.d_inner, true));
    ASSIGN_OR_RETURN(layer.ff2, LoadLinear(w, l + "ff.layer_2", c_.d_inner, H, true));
    ASSIGN_OR_RETURN(layer.ff_norm, LoadLayerNorm(w, l + "ff.layer_norm", H, c_.layer_norm_eps));
    layers_.push_back(std::move(layer));
  }

  if (num_labels_ > 0) {
    if (c_.summary_use_proj) {
      ASSIGN_OR_RETURN(summary_, LoadLinear(w, "sequence_summary.summary", H, c_.summary_width(num_labels_), true));
    }
    summary_act_ = !c_.summary_activation.empty();
    if (summary_act_) {
      ASSIGN_OR_RETURN(summary_activation_, ParseActivation(c_.summary_activation));
    }
    ASSIGN_OR_RETURN(logits_proj_, LoadLinear(w, "logits_proj", H, num_labels_, true));
  }
  return absl::OkStatus();
}

std::shared_ptr<const XlnetModel::PositionKeys> XlnetModel::PositionKeysFor(int64_t reach) const {
  {
    std::lock_guard<std::mutex> lock(cache_mu_);
    if (position_keys_ && position_keys_->reach >= reach) return position_keys_;
  }
  // Built outside the lock; the first thread to build the kept table wins.
  int64_t kept = kMaxKeptReach;
  if (c_.clamp_len > 0) kept = std::min<int64_t>(kept, c_.clamp_len);
  const bool keep = reach <= kept;
  const int64_t rows = keep ? kept : reach;
  auto keys = std::make_shared<PositionKeys>();
  keys->reach = rows;
  const at::Tensor& any = word_embedding_;
  // positional_embedding is float32; the layer's projection casts it to the weights' dtype.
  at::Tensor table = XlnetSinusoidTable(rows, c_.d_model).to(any.device(), any.scalar_type());
  for (const Layer& layer : layers_) {
    keys->per_layer.push_back(layer.r(table).view({2 * rows + 1, c_.n_head, c_.d_head}).permute({1, 0, 2}).contiguous());
  }
  if (!keep) return keys;  // this forward's alone
  SynchronizeDevice(any.device());  // read next by other threads' streams
  std::lock_guard<std::mutex> lock(cache_mu_);
  if (!position_keys_ || position_keys_->reach < keys->reach) position_keys_ = keys;
  return position_keys_;
}

std::shared_ptr<const XlnetModel::RelativeIndex> XlnetModel::IndexFor(int64_t length) const {
  return index_cache_.Get(length, [&] {
    const int64_t L = length;
    auto index = std::make_shared<RelativeIndex>();
    index->m = c_.clamp_len > 0 ? std::min<int64_t>(L - 1, c_.clamp_len) : L - 1;
    // Entry d = j - i + L - 1 is the distance i - j = L - 1 - d, clamped to +-m (clamp_len),
    // as a row of the window [-m, m].
    index->c2p = at::empty({2 * L - 1}, at::kInt);
    int32_t* c2p = index->c2p.data_ptr<int32_t>();
    for (int64_t d = 0; d < 2 * L - 1; ++d) {
      c2p[d] = static_cast<int32_t>(std::clamp<int64_t>(L - 1 - d, -index->m, index->m) + index->m);
    }
    const auto device = word_embedding_.device();
    if (!device.is_cpu()) {
      index->c2p_gather = OffsetIndexMatrix(index->c2p, L, /*transposed=*/false, device);
      SynchronizeDevice(device);
    }
    return index;
  });
}

at::Tensor XlnetModel::Summary(const at::Tensor& h, const EncoderInputs& in) const {
  // SequenceSummary.forward, over the real tokens of each row.
  const int64_t B = h.size(0), L = h.size(1), H = h.size(2);
  at::Tensor out;
  if (c_.summary_type == "mean") {
    if (in.has_padding) {
      at::Tensor keep = in.attention_mask.ne(0).to(h.scalar_type()).unsqueeze(2);
      out = (h * keep).sum(1) / keep.sum(1);
    } else {
      out = h.mean(1);
    }
  } else {
    const bool first = c_.summary_type == "first";  // else last and cls_index (None: the last token)
    if (!in.has_padding) {
      out = h.select(1, first ? 0 : L - 1).clone();  // a copy: the activation below may work in place
    } else {
      at::Tensor real = in.attention_mask.ne(0);
      at::Tensor t = at::arange(L, in.attention_mask.options().dtype(at::kLong)).unsqueeze(0).expand({B, L});
      at::Tensor position = first ? at::where(real, t, at::full_like(t, L)).amin(1)
                                  : at::where(real, t, at::full_like(t, -1)).amax(1);
      out = h.gather(1, position.view({B, 1, 1}).expand({B, 1, H})).squeeze(1);
    }
  }
  if (summary_.defined()) out = summary_(out);
  if (summary_act_) out = ApplyActivation(summary_activation_, out);
  return logits_proj_(out);
}

EncoderOutputs XlnetModel::Forward(const EncoderInputs& in, bool all_hidden_states) const {
  const int64_t heads = c_.n_head, D = c_.d_head;
  // Each query attends to its own key alone when create_mask masks everything else.
  const bool self_only = c_.causal() && c_.same_length;
  std::shared_ptr<const RelativeIndex> index;
  std::shared_ptr<const PositionKeys> keys;
  if (!self_only) {
    index = IndexFor(in.input_ids.size(1));
    keys = PositionKeysFor(index->m);
  }
  at::Tensor segment_ids = in.token_type_ids.defined() ? in.token_type_ids.to(at::kInt).contiguous() : at::Tensor();

  auto layer_forward = [&](const EncoderPass& p, size_t n, const at::Tensor& x) {
    const int64_t B = p.batch, L = p.length;
    const Layer& layer = layers_[n];
    at::Tensor qkv_rows = layer.qkv(x);
    at::Tensor qkv = SplitHeads(qkv_rows, p.packing.get(), B, L, 3, heads);
    at::Tensor context;  // [heads, B, L, D]
    if (self_only) {
      context = qkv[2];
    } else {
      RelativeAttentionInputs att;
      att.q = qkv[0], att.k = qkv[1], att.v = qkv[2];
      att.c2p_query = att.q + layer.position_query_offset;
      att.pos_key = keys->per_layer[n].narrow(1, keys->reach - index->m, 2 * index->m + 1);
      att.c2p_index = index->c2p;
      att.c2p_gather = index->c2p_gather;
      if (segment_ids.defined()) {
        att.segment_scores = at::baddbmm(layer.segment_offset, att.q.reshape({heads, B * L, D}), layer.seg_embed)
                                 .view({heads, B, L, 2})
                                 .to(at::kFloat);
        att.segment_ids = segment_ids;
      }
      att.attention_mask = p.mask;  // undefined without padding
      att.causal = c_.causal();
      p.ForAttention(att);
      context = RelativeAttention(att);
    }
    at::Tensor rows = MergeHeads(context, p.packing.get());
    // post_attention: layer_norm(o(attn_vec) + h); XLNetFeedForward: layer_norm(layer_2(act(layer_1(x))) + x)
    at::Tensor attended = layer.attention_norm(layer.o(rows), x);
    at::Tensor inner = layer.ff1(attended, ff_act_);
    return layer.ff_norm(layer.ff2(inner), attended);
  };
  // XLNetModel.forward: output_h = dropout(word_embedding(input_ids)), also hidden_states[0].
  EncoderOutputs out = RunEncoderLayers(in, at::embedding(word_embedding_, in.input_ids), layers_.size(),
                                        all_hidden_states, layer_forward);
  if (num_labels_ > 0) out.logits = Summary(out.last_hidden_state, in);
  return out;
}

std::vector<Linear*> XlnetModel::EncoderLinears() { return AllLinears(layers_); }

}  // namespace relserve
