#include "server/model/families/bert/bert_model.h"

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

using Variant = BertConfig::Variant;
using PositionEmbedding = BertConfig::PositionEmbedding;

BertModel::BertModel(const ModelConfig& config) : config_(config), c_(config.family_config_as<BertConfig>()) {}

absl::StatusOr<std::unique_ptr<BertModel>> BertModel::Load(const ModelConfig& config, WeightLoader& weights) {
  std::unique_ptr<BertModel> model(new BertModel(config));
  RETURN_IF_ERROR(model->LoadWeights(weights));
  return model;
}

absl::Status BertModel::CheckSizes(const WeightLoader& w, const std::string& p) const {
  const std::string emb = p + "embeddings.", layer0 = p + "encoder.layer.0.";
  const bool electra = c_.variant == Variant::kElectra;
  RETURN_IF_ERROR(w.CheckConfigSize(ConfigSize("vocab_size", c_.vocab_size), c_.vocab_size, emb + "word_embeddings.weight", 0));
  RETURN_IF_ERROR(w.CheckConfigSize(electra ? ConfigSize("embedding_size", c_.embedding_size)
                                            : ConfigSize("hidden_size", c_.hidden_size),
                                    c_.embedding_size, emb + "word_embeddings.weight", 1));
  RETURN_IF_ERROR(w.CheckConfigSize(ConfigSize("max_position_embeddings", c_.max_position_embeddings),
                                    c_.max_position_embeddings, emb + "position_embeddings.weight", 0));
  RETURN_IF_ERROR(w.CheckConfigSize(ConfigSize("type_vocab_size", c_.type_vocab_size), c_.type_vocab_size,
                                    emb + "token_type_embeddings.weight", 0));
  RETURN_IF_ERROR(w.CheckBlockCount(ConfigSize("num_hidden_layers", c_.num_hidden_layers), c_.num_hidden_layers,
                                    p + "encoder.layer."));
  RETURN_IF_ERROR(w.CheckConfigSize(ConfigSize("hidden_size", c_.hidden_size), c_.hidden_size,
                                    layer0 + "attention.self.query.weight", 0));
  RETURN_IF_ERROR(w.CheckConfigSize(ConfigSize("intermediate_size", c_.intermediate_size), c_.intermediate_size,
                                    layer0 + "intermediate.dense.weight", 0));
  const std::string distance = layer0 + "attention.self.distance_embedding.weight";
  if (c_.relative()) {
    RETURN_IF_ERROR(w.CheckConfigSize(
        absl::StrCat(ConfigSize("max_position_embeddings", c_.max_position_embeddings), " (2 x that - 1 distances)"),
        c_.distance_rows(), distance, 0));
    RETURN_IF_ERROR(w.CheckConfigSize(
        absl::StrCat(ConfigSize("num_attention_heads", c_.num_attention_heads), " (head size hidden_size / heads = ",
                     c_.head_size(), ")"),
        c_.head_size(), distance, 1));
  } else {
    RETURN_IF_ERROR(w.CheckAbsent("\"position_embedding_type\" \"absolute\"", distance));
  }
  if (config_.head == HeadKind::kSequenceClassification) {
    RETURN_IF_ERROR(w.CheckConfigSize(ConfigSize("num_labels", config_.num_labels) + " (the entries of id2label when given)",
                                      config_.num_labels,
                                      c_.variant == Variant::kBert ? "classifier.weight" : "classifier.out_proj.weight", 0));
  }
  return absl::OkStatus();
}

absl::Status BertModel::LoadWeights(WeightLoader& w) {
  const int64_t H = c_.hidden_size, E = c_.embedding_size, I = c_.intermediate_size, M = c_.max_position_embeddings;
  heads_ = c_.num_attention_heads;
  head_dim_ = c_.head_size();
  ASSIGN_OR_RETURN(hidden_act_, ParseActivation(c_.hidden_act));

  // *ForSequenceClassification nests the backbone under "bert." / "roberta." / "electra."; a
  // bare *Model checkpoint has no prefix. transformers loads either into either.
  const std::string base = BertBasePrefix(config_.model_type);
  const std::string p = w.Has(base + "embeddings.word_embeddings.weight") ? base : "";
  const std::string emb = p + "embeddings.";
  RETURN_IF_ERROR(CheckSizes(w, p));
  ASSIGN_OR_RETURN(word_embeddings_, w.Get(emb + "word_embeddings.weight", {c_.vocab_size, E}));
  if (c_.relative()) {
    // Built by every BertEmbeddings, added only for absolute positions.
    w.Skip(emb + "position_embeddings.weight");
  } else {
    ASSIGN_OR_RETURN(position_embeddings_, w.Get(emb + "position_embeddings.weight", {M, E}));
  }
  ASSIGN_OR_RETURN(token_type_embeddings_, w.Get(emb + "token_type_embeddings.weight", {c_.type_vocab_size, E}));
  ASSIGN_OR_RETURN(embedding_norm_, LoadLayerNorm(w, emb + "LayerNorm", E, c_.layer_norm_eps));
  w.Skip(emb + "position_ids");    // buffers older checkpoints saved
  w.Skip(emb + "token_type_ids");
  if (c_.variant == Variant::kElectra && E != H) {
    ASSIGN_OR_RETURN(embeddings_project_, LoadLinear(w, p + "embeddings_project", E, H, true));
  }

  // BertSelfAttention divides q.k and the relative terms by sqrt(head size) after adding them.
  const float scale = std::sqrt(static_cast<float>(head_dim_));
  for (int i = 0; i < c_.num_hidden_layers; ++i) {
    const std::string l = absl::StrCat(p, "encoder.layer.", i, ".");
    const std::string att = l + "attention.self.";
    Layer layer;
    ASSIGN_OR_RETURN(Linear q, LoadLinear(w, att + "query", H, H, true));
    ASSIGN_OR_RETURN(Linear k, LoadLinear(w, att + "key", H, H, true));
    ASSIGN_OR_RETURN(Linear v, LoadLinear(w, att + "value", H, H, true));
    Linear q_scaled{q.weight / scale, q.bias / scale, nullptr, nullptr};
    layer.qkv = FuseLinear({&q_scaled, &k, &v});
    if (c_.relative()) {
      ASSIGN_OR_RETURN(layer.distance, w.Get(att + "distance_embedding.weight", {c_.distance_rows(), head_dim_}));
      if (c_.position_embedding_type == PositionEmbedding::kRelativeKeyQuery) {
        layer.distance_scaled = layer.distance / scale;
      }
    }
    RETURN_IF_ERROR(LoadPostNormBlockDense(
        w, {l + "attention.output.dense", l + "attention.output.LayerNorm", l}, H, H, I, c_.layer_norm_eps, &layer));
    layers_.push_back(std::move(layer));
  }

  if (config_.head == HeadKind::kSequenceClassification) {
    const int64_t labels = config_.num_labels;
    if (c_.variant == Variant::kBert) {
      // BertForSequenceClassification: BertPooler (dense + tanh on [CLS]), then a linear layer.
      ASSIGN_OR_RETURN(head_dense_, LoadLinear(w, p + "pooler.dense", H, H, true));
      head_act_ = Activation::kTanh;
      ASSIGN_OR_RETURN(head_out_, LoadLinear(w, "classifier", H, labels, true));
    } else {
      // RobertaClassificationHead (tanh) / ElectraClassificationHead (get_activation("gelu")).
      ASSIGN_OR_RETURN(head_dense_, LoadLinear(w, "classifier.dense", H, H, true));
      head_act_ = c_.variant == Variant::kElectra ? Activation::kGelu : Activation::kTanh;
      ASSIGN_OR_RETURN(head_out_, LoadLinear(w, "classifier.out_proj", H, labels, true));
    }
  }
  return absl::OkStatus();
}

std::shared_ptr<const BertModel::RelativeIndex> BertModel::IndexFor(int64_t length) const {
  return index_cache_.Get(length, [&] {
    // Offset d = j - i + L - 1 needs distance row i - j + M - 1 = (M - L) + (2L - 2 - d): within
    // the rows from M - L, entry 2L - 2 - d.
    auto index = std::make_shared<RelativeIndex>();
    index->index = at::arange(2 * length - 2, -1, -1, at::kInt);
    const auto device = word_embeddings_.device();
    if (!device.is_cpu()) {
      index->gather = OffsetIndexMatrix(index->index, length, /*transposed=*/false, device);
      index->table = index->index.to(device);
      SynchronizeDevice(device);  // read next by other threads' streams
    }
    return index;
  });
}

at::Tensor BertModel::Embed(const EncoderInputs& in) const {
  const int64_t L = in.input_ids.size(1);
  at::Tensor x = at::embedding(word_embeddings_, in.input_ids);
  // Without token_type_ids transformers looks up type 0 for every token.
  if (in.token_type_ids.defined()) {
    x = x + at::embedding(token_type_embeddings_, in.token_type_ids);
  } else {
    x = x + token_type_embeddings_.select(0, 0);
  }
  if (position_embeddings_.defined()) {
    if (c_.variant == Variant::kRoberta) {
      // create_position_ids_from_input_ids: non-pad tokens count up from padding_idx + 1, pad
      // tokens sit at padding_idx.
      at::Tensor real = in.input_ids.ne(c_.pad_token_id).to(at::kLong);
      at::Tensor positions = at::cumsum(real, 1).mul_(real).add_(c_.pad_token_id);
      x = x + at::embedding(position_embeddings_, positions);
    } else {
      x = x + position_embeddings_.narrow(0, 0, L).unsqueeze(0);
    }
  }
  x = embedding_norm_(x);
  if (embeddings_project_.defined()) x = embeddings_project_(x);
  return x;
}

at::Tensor BertModel::LayerForward(const Layer& layer, const at::Tensor& x,
                                   const EncoderPass& pass, const RelativeIndex* index) const {
  const int64_t B = pass.batch, L = pass.length;
  const TokenPacking* packing = pass.packing.get();
  const at::Tensor& mask = pass.mask;
  const int64_t Hd = heads_, D = head_dim_;
  at::Tensor qkv_rows = layer.qkv(x);
  at::Tensor qkv = SplitHeads(qkv_rows, packing, B, L, 3, Hd);
  RelativeAttentionInputs att;
  att.q = qkv[0], att.k = qkv[1], att.v = qkv[2];  // [heads, B, L, D]
  if (index != nullptr) {
    // One distance table for every head: the rows [M - L, M + L - 1) this length reaches.
    const int64_t first = c_.max_position_embeddings - L, rows = 2 * L - 1;
    att.pos_key = layer.distance.narrow(0, first, rows).unsqueeze(0).expand({Hd, rows, D});
    att.c2p_index = index->index;
    att.c2p_gather = index->gather;
    att.c2p_table = index->table;
    if (layer.distance_scaled.defined()) {
      att.pos_query = layer.distance_scaled.narrow(0, first, rows).unsqueeze(0).expand({Hd, rows, D});
      att.p2c_index = index->index;
      att.p2c_gather = index->gather;
      att.p2c_table = index->table;
    }
  }
  att.attention_mask = mask;  // undefined without padding; padded queries are computed as transformers does
  pass.ForAttention(att);
  at::Tensor per_head = RelativeAttention(att);
  at::Tensor context = MergeHeads(per_head, packing);

  // After attention each row is its own: the last layer of a first-token forward runs those alone.
  return layer.AfterAttention(pass.RowsAfterAttention(context), pass.RowsAfterAttention(x), hidden_act_);
}

EncoderOutputs BertModel::Forward(const EncoderInputs& in, bool all_hidden_states) const {
  std::shared_ptr<const RelativeIndex> index;
  if (c_.relative()) index = IndexFor(in.input_ids.size(1));
  EncoderOutputs out = RunEncoderLayers(
      in, Embed(in), layers_.size(), all_hidden_states, [&](const EncoderPass& p, size_t i, const at::Tensor& x) {
        return LayerForward(layers_[i], x, p, index.get());
      });
  if (head_out_.defined()) {
    at::Tensor first = out.last_hidden_state.select(1, 0);
    out.logits = head_out_(ApplyActivation(head_act_, head_dense_(first)));
  }
  return out;
}

std::vector<Linear*> BertModel::EncoderLinears() { return AllLinears(layers_); }

}  // namespace relserve
