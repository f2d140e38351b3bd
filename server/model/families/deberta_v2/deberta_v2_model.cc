#include "server/model/families/deberta_v2/deberta_v2_model.h"

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
namespace {

// [rows, heads * head_dim] -> [heads, rows, head_dim]
at::Tensor SplitHeads(const at::Tensor& x, int64_t heads) {
  return x.view({x.size(0), heads, -1}).permute({1, 0, 2}).contiguous();
}

}  // namespace

DebertaV2Model::DebertaV2Model(const ModelConfig& config) : config_(config), c_(config.family_config_as<DebertaV2Config>()) {}

absl::StatusOr<std::unique_ptr<DebertaV2Model>> DebertaV2Model::Load(const ModelConfig& config,
                                                                      WeightLoader& weights) {
  std::unique_ptr<DebertaV2Model> model(new DebertaV2Model(config));
  RETURN_IF_ERROR(model->LoadWeights(weights));
  return model;
}

absl::Status DebertaV2Model::CheckSizes(const WeightLoader& w, const std::string& p) const {
  const std::string emb = p + "embeddings.", enc = p + "encoder.", layer0 = enc + "layer.0.";
  RETURN_IF_ERROR(w.CheckConfigSize(ConfigSize("hidden_size", c_.hidden_size), c_.hidden_size, emb + "LayerNorm.weight", 0));
  RETURN_IF_ERROR(w.CheckConfigSize(ConfigSize("vocab_size", c_.vocab_size), c_.vocab_size, emb + "word_embeddings.weight", 0));
  RETURN_IF_ERROR(w.CheckConfigSize(ConfigSize("embedding_size", c_.embedding_size) + " (hidden_size unless given)",
                                    c_.embedding_size, emb + "word_embeddings.weight", 1));
  if (c_.position_biased_input) {
    RETURN_IF_ERROR(w.CheckConfigSize(ConfigSize("max_position_embeddings", c_.max_position_embeddings),
                                      c_.max_position_embeddings, emb + "position_embeddings.weight", 0));
  }
  if (c_.type_vocab_size > 0) {
    RETURN_IF_ERROR(w.CheckConfigSize(ConfigSize("type_vocab_size", c_.type_vocab_size), c_.type_vocab_size,
                                      emb + "token_type_embeddings.weight", 0));
  } else {
    RETURN_IF_ERROR(w.CheckAbsent(ConfigSize("type_vocab_size", 0), emb + "token_type_embeddings.weight"));
  }
  RETURN_IF_ERROR(w.CheckBlockCount(ConfigSize("num_hidden_layers", c_.num_hidden_layers), c_.num_hidden_layers,
                                    enc + "layer."));
  RETURN_IF_ERROR(w.CheckConfigSize(
      absl::StrCat(ConfigSize("num_attention_heads", c_.num_attention_heads), " x ",
                   ConfigSize("attention_head_size", c_.attention_head_size), " (hidden_size / heads unless given)"),
      c_.all_head_size(), layer0 + "attention.self.query_proj.weight", 0));
  RETURN_IF_ERROR(w.CheckConfigSize(ConfigSize("intermediate_size", c_.intermediate_size), c_.intermediate_size,
                                    layer0 + "intermediate.dense.weight", 0));
  if (!c_.relative_attention) {
    RETURN_IF_ERROR(w.CheckAbsent("\"relative_attention\" false", enc + "rel_embeddings.weight"));
  } else {
    const std::string what =
        c_.position_buckets > 0
            ? absl::StrCat(ConfigSize("position_buckets", c_.position_buckets), " (2 x buckets relative positions)")
            : absl::StrCat(ConfigSize("max_relative_positions", c_.max_relative_positions),
                           c_.max_relative_positions < 1
                               ? absl::StrCat(" (so max_position_embeddings ", c_.max_position_embeddings, ")")
                               : "",
                           " with no position_buckets (2 x that many relative positions)");
    RETURN_IF_ERROR(w.CheckConfigSize(what, c_.rel_embeddings_rows(), enc + "rel_embeddings.weight", 0));
  }
  if (c_.conv_kernel_size > 0) {
    RETURN_IF_ERROR(w.CheckConfigSize(ConfigSize("conv_kernel_size", c_.conv_kernel_size), c_.conv_kernel_size,
                                      enc + "conv.conv.weight", 2));
  } else {
    RETURN_IF_ERROR(w.CheckAbsent(ConfigSize("conv_kernel_size", 0), enc + "conv.conv.weight"));
  }
  if (config_.head == HeadKind::kSequenceClassification) {
    RETURN_IF_ERROR(w.CheckConfigSize(ConfigSize("pooler_hidden_size", c_.pooler_hidden_size), c_.pooler_hidden_size,
                                      "pooler.dense.weight", 0));
    RETURN_IF_ERROR(w.CheckConfigSize(ConfigSize("num_labels", config_.num_labels) + " (the entries of id2label when given)",
                                      config_.num_labels, "classifier.weight", 0));
  }
  return absl::OkStatus();
}

absl::Status DebertaV2Model::LoadWeights(WeightLoader& w) {
  const int64_t H = c_.hidden_size;
  const int64_t E = c_.embedding_size;
  const int64_t A = c_.all_head_size();
  heads_ = c_.num_attention_heads;
  head_dim_ = c_.attention_head_size;
  ASSIGN_OR_RETURN(hidden_act_, ParseActivation(c_.hidden_act));
  use_c2p_ = c_.relative_attention && c_.has_c2p();
  use_p2c_ = c_.relative_attention && c_.has_p2c();

  // DebertaV2ForSequenceClassification nests the backbone under "deberta."; a bare
  // DebertaV2Model checkpoint has no prefix. transformers loads either into either.
  const std::string p = w.Has("deberta.embeddings.word_embeddings.weight") ? "deberta." : "";
  const std::string emb = p + "embeddings.";
  const std::string enc = p + "encoder.";
  RETURN_IF_ERROR(CheckSizes(w, p));
  ASSIGN_OR_RETURN(word_embeddings_, w.Get(emb + "word_embeddings.weight", {c_.vocab_size, E}));
  if (c_.position_biased_input) {
    ASSIGN_OR_RETURN(position_embeddings_,
                     w.Get(emb + "position_embeddings.weight", {c_.max_position_embeddings, E}));
  } else {
    w.Skip(emb + "position_embeddings.weight");  // _keys_to_ignore_on_load_unexpected
  }
  w.Skip(emb + "position_ids");
  if (c_.type_vocab_size > 0) {
    ASSIGN_OR_RETURN(token_type_embeddings_, w.Get(emb + "token_type_embeddings.weight", {c_.type_vocab_size, E}));
  }
  if (E != H) {
    ASSIGN_OR_RETURN(embed_proj_, LoadLinear(w, emb + "embed_proj", E, H, /*bias=*/false));
  }
  ASSIGN_OR_RETURN(embedding_norm_, LoadLayerNorm(w, emb + "LayerNorm", H, c_.layer_norm_eps));

  at::Tensor rel_embeddings;
  if (c_.relative_attention) {
    ASSIGN_OR_RETURN(rel_embeddings, w.Get(enc + "rel_embeddings.weight", {c_.rel_embeddings_rows(), H}));
  }
  if (c_.layer_norm_rel_embeddings()) {
    // DebertaV2Encoder creates this LayerNorm even without relative attention.
    ASSIGN_OR_RETURN(LayerNorm rel_norm, LoadLayerNorm(w, enc + "LayerNorm", H, c_.layer_norm_eps));
    if (rel_embeddings.defined()) rel_embeddings = rel_norm(rel_embeddings);
  }
  if (c_.conv_kernel_size > 0) {
    if (c_.conv_kernel_size % 2 == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "conv_kernel_size ", c_.conv_kernel_size,
          " is even: the reference ConvLayer's output would not keep the sequence length"));
    }
    conv_ = std::make_unique<Conv>();
    conv_->groups = c_.conv_groups;
    ASSIGN_OR_RETURN(conv_->act, ParseActivation(c_.conv_act));
    ASSIGN_OR_RETURN(conv_->weight,
                     w.Get(enc + "conv.conv.weight", {H, H / c_.conv_groups, c_.conv_kernel_size}));
    ASSIGN_OR_RETURN(conv_->bias, w.Get(enc + "conv.conv.bias", {H}));
    ASSIGN_OR_RETURN(conv_->norm, LoadLayerNorm(w, enc + "conv.LayerNorm", H, c_.layer_norm_eps));
  }

  // DisentangledSelfAttention: scale = sqrt(head_dim * (1 + #c2p + #p2c)), in float32. Every
  // score term is divided by it, so it is folded into the query projection and the p2c table.
  int scale_factor = 1 + (c_.has_c2p() ? 1 : 0) + (c_.has_p2c() ? 1 : 0);
  const float scale = std::sqrt(static_cast<float>(head_dim_) * static_cast<float>(scale_factor));
  const int64_t span = c_.attention_span();

  for (int i = 0; i < c_.num_hidden_layers; ++i) {
    const std::string l = absl::StrCat(enc, "layer.", i, ".");
    const std::string att = l + "attention.self.";
    Layer layer;
    ASSIGN_OR_RETURN(Linear q, LoadLinear(w, att + "query_proj", H, A, true));
    ASSIGN_OR_RETURN(Linear k, LoadLinear(w, att + "key_proj", H, A, true));
    ASSIGN_OR_RETURN(Linear v, LoadLinear(w, att + "value_proj", H, A, true));
    Linear pos_key_proj, pos_query_proj;
    if (c_.relative_attention && !c_.share_att_key) {
      if (c_.has_c2p()) {
        ASSIGN_OR_RETURN(pos_key_proj, LoadLinear(w, att + "pos_key_proj", H, A, true));
      }
      if (c_.has_p2c()) {
        ASSIGN_OR_RETURN(pos_query_proj, LoadLinear(w, att + "pos_query_proj", H, A, true));
      }
    }
    if (use_c2p_ || use_p2c_) {
      // rel_embeddings[0 : att_span * 2]: the whole table (its rows are 2 * att_span).
      at::Tensor rel = rel_embeddings.narrow(0, 0, 2 * span);
      if (use_c2p_) layer.pos_key = SplitHeads((c_.share_att_key ? k : pos_key_proj)(rel), heads_);
      if (use_p2c_) layer.pos_query = SplitHeads((c_.share_att_key ? q : pos_query_proj)(rel), heads_).div_(scale);
    }
    Linear q_scaled{q.weight / scale, q.bias / scale, nullptr, nullptr};
    layer.qkv = FuseLinear({&q_scaled, &k, &v});
    RETURN_IF_ERROR(LoadPostNormBlockDense(w, {l + "attention.output.dense", l + "attention.output.LayerNorm", l},
                                           A, H, c_.intermediate_size, c_.layer_norm_eps, &layer));
    layers_.push_back(std::move(layer));
  }

  if (config_.head == HeadKind::kSequenceClassification) {
    if (c_.pooler_hidden_size != H) {
      return absl::InvalidArgumentError(absl::StrCat("pooler_hidden_size ", c_.pooler_hidden_size,
                                                     " differs from hidden_size ", H,
                                                     ": the reference classifier cannot run"));
    }
    ASSIGN_OR_RETURN(pooler_, LoadLinear(w, "pooler.dense", H, H, true));
    ASSIGN_OR_RETURN(pooler_act_, ParseActivation(c_.pooler_hidden_act));
    ASSIGN_OR_RETURN(classifier_, LoadLinear(w, "classifier", H, config_.num_labels, true));
  }
  return absl::OkStatus();
}

std::shared_ptr<const DebertaV2Model::RelativeIndex> DebertaV2Model::IndexFor(int64_t length) const {
  return index_cache_.Get(length, [&] {
    const int64_t span = c_.attention_span();
    at::Tensor rel = DebertaRelativePosition(length, length, c_.position_buckets, c_.effective_max_relative_positions());
    auto index = std::make_shared<RelativeIndex>();
    auto restrict_rows = [](at::Tensor full, at::Tensor* out, int64_t* lo, int64_t* rows) {
      *lo = full.min().item<int64_t>();
      *rows = full.max().item<int64_t>() - *lo + 1;
      *out = ToeplitzTable(full - *lo);
    };
    // c2p_pos = clamp(relative_pos + att_span, 0, 2 * att_span - 1), indexed [query, key].
    restrict_rows(at::clamp(rel + span, 0, 2 * span - 1), &index->c2p, &index->c2p_lo, &index->c2p_rows);
    // p2c_pos = clamp(-r_pos + att_span, ...) is indexed [key, query] (gathered along the keys'
    // rows, then transposed): its transpose is the [query, key] matrix.
    restrict_rows(at::clamp(-rel + span, 0, 2 * span - 1).t(), &index->p2c, &index->p2c_lo, &index->p2c_rows);
    const auto device = word_embeddings_.device();
    if (!device.is_cpu()) {
      index->c2p_gather = OffsetIndexMatrix(index->c2p, length, /*transposed=*/false, device);
      index->p2c_gather = OffsetIndexMatrix(index->p2c, length, /*transposed=*/false, device);
      index->c2p_table = index->c2p.to(device);
      index->p2c_table = index->p2c.to(device);
      SynchronizeDevice(device);  // read next by other threads' streams
    }
    return index;
  });
}

at::Tensor DebertaV2Model::Embed(const EncoderInputs& in) const {
  const int64_t L = in.input_ids.size(1);
  at::Tensor x = at::embedding(word_embeddings_, in.input_ids);
  if (position_embeddings_.defined()) x = x + position_embeddings_.narrow(0, 0, L).unsqueeze(0);
  if (token_type_embeddings_.defined()) {
    at::Tensor types = in.token_type_ids.defined() ? in.token_type_ids : at::zeros_like(in.input_ids);
    x = x + at::embedding(token_type_embeddings_, types);
  }
  if (embed_proj_.defined()) x = embed_proj_(x);
  x = embedding_norm_(x);
  if (in.has_padding) x = x * in.attention_mask.unsqueeze(2).to(x.scalar_type());
  return x;
}

at::Tensor DebertaV2Model::ConvForward(const at::Tensor& embeddings, const at::Tensor& residual,
                                       const at::Tensor& mask) const {
  const int64_t pad = (conv_->weight.size(2) - 1) / 2;
  at::Tensor out = at::conv1d(embeddings.transpose(1, 2), conv_->weight, conv_->bias, {1}, {pad}, {1}, conv_->groups)
                       .transpose(1, 2)
                       .contiguous();
  at::Tensor keep = mask.unsqueeze(2).to(out.scalar_type());
  out = ApplyActivation(conv_->act, out * keep);
  out = conv_->norm(out, residual);
  return out * keep;
}

at::Tensor DebertaV2Model::LayerForward(const Layer& layer, const at::Tensor& x,
                                        const EncoderPass& pass, const RelativeIndex* index) const {
  const int64_t B = pass.batch, L = pass.length;
  const TokenPacking* packing = pass.packing.get();
  const at::Tensor& mask = pass.mask;
  const int64_t Hd = heads_;
  // x: [tokens, hidden] rows (the real tokens when packed) -> q, k, v as [3, heads, B, L, D]
  at::Tensor qkv_rows = layer.qkv(x);
  at::Tensor qkv = SplitHeads(qkv_rows, packing, B, L, 3, Hd);

  RelativeAttentionInputs att;
  att.q = qkv[0], att.k = qkv[1], att.v = qkv[2];  // [heads, B, L, D]
  if (use_c2p_) {
    att.pos_key = layer.pos_key.narrow(1, index->c2p_lo, index->c2p_rows);
    att.c2p_index = index->c2p;
    att.c2p_gather = index->c2p_gather;
    att.c2p_table = index->c2p_table;
  }
  if (use_p2c_) {
    att.pos_query = layer.pos_query.narrow(1, index->p2c_lo, index->p2c_rows);
    att.p2c_index = index->p2c;
    att.p2c_gather = index->p2c_gather;
    att.p2c_table = index->p2c_table;
  }
  att.attention_mask = mask;        // undefined without padding
  att.zero_padded_queries = true;   // XSoftmax masks padded queries' rows too
  pass.ForAttention(att);
  at::Tensor per_head = RelativeAttention(att);
  at::Tensor context = MergeHeads(per_head, packing);

  // After attention each row is its own: the last layer of a first-token forward runs those alone.
  return layer.AfterAttention(pass.RowsAfterAttention(context), pass.RowsAfterAttention(x), hidden_act_);
}

bool DebertaV2Model::RunsFirstTokenOnly() const { return !(conv_ && layers_.size() == 1); }

EncoderOutputs DebertaV2Model::Forward(const EncoderInputs& inputs, bool all_hidden_states) const {
  // The convolution after layer 0 reads every position: a one-layer model keeps them all.
  EncoderInputs in = inputs;
  if (!RunsFirstTokenOnly()) in.first_token_only = false;
  // XSoftmax masks padded keys, and the rows of padded queries (the pass's mask).
  std::shared_ptr<const RelativeIndex> index;
  if (use_c2p_ || use_p2c_) index = IndexFor(in.input_ids.size(1));
  const at::Tensor embeddings = Embed(in);
  EncoderOutputs out = RunEncoderLayers(
      in, embeddings, layers_.size(), all_hidden_states, [&](const EncoderPass& p, size_t i, const at::Tensor& x) {
        at::Tensor y = LayerForward(layers_[i], x, p, index.get());
        if (i == 0 && conv_) y = p.ToRows(ConvForward(embeddings, p.ToBatch(y), in.attention_mask));
        return y;
      });
  if (classifier_.defined()) {
    at::Tensor pooled = ApplyActivation(pooler_act_, pooler_(out.last_hidden_state.select(1, 0)));
    out.logits = classifier_(pooled);
  }
  return out;
}

std::vector<Linear*> DebertaV2Model::EncoderLinears() { return AllLinears(layers_); }

}  // namespace relserve
