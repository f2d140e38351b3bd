#include "server/model/heads/pooler.h"

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "server/checkpoint/model_checkpoint.h"
#include "server/util/status_macros.h"

namespace relserve {

absl::StatusOr<Pooler> Pooler::Create(const PoolingConfig& pooling, const std::vector<DenseConfig>& dense,
                                      bool normalize, int hidden_size) {
  Pooler p;
  p.pooling_ = pooling;
  if (p.pooling_.word_embedding_dimension == 0) p.pooling_.word_embedding_dimension = hidden_size;
  if (p.pooling_.word_embedding_dimension != hidden_size) {
    return absl::InvalidArgumentError(absl::StrCat("pooling word_embedding_dimension ",
                                                   p.pooling_.word_embedding_dimension, " differs from the model's hidden size ",
                                                   hidden_size));
  }
  int dim = p.pooling_.output_dimension();
  for (const DenseConfig& d : dense) {
    if (d.in_features != dim) {
      return absl::InvalidArgumentError(absl::StrCat(d.directory, ": in_features ", d.in_features,
                                                     " does not match the ", dim, " features before it"));
    }
    ASSIGN_OR_RETURN(auto checkpoint, OpenModelCheckpoint(d.directory));
    WeightLoader w(*checkpoint, at::kFloat);
    Dense layer;
    ASSIGN_OR_RETURN(layer.linear, LoadLinear(w, "linear", d.in_features, d.out_features, d.bias));
    auto status = w.CheckNoneUnused({});
    if (!status.ok()) return absl::InvalidArgumentError(absl::StrCat(d.directory, ": ", status.message()));
    ASSIGN_OR_RETURN(layer.act, ParseActivation(d.activation));
    p.dense_.push_back(std::move(layer));
    dim = d.out_features;
  }
  p.normalize_ = normalize;
  p.output_dim_ = dim;
  return p;
}

void Pooler::MoveTo(const c10::Device& device) {
  for (Dense& d : dense_) {
    if (d.linear.weight.defined()) d.linear.weight = d.linear.weight.to(device);
    if (d.linear.bias.defined()) d.linear.bias = d.linear.bias.to(device);
  }
}

std::vector<Linear*> Pooler::Linears() {
  std::vector<Linear*> out;
  for (Dense& d : dense_) out.push_back(&d.linear);
  return out;
}

PoolingInfo Pooler::Info() const {
  PoolingInfo info;
  info.modes = pooling_.Modes();
  for (const Dense& d : dense_) info.dense_out_features.push_back(static_cast<int>(d.linear.out_features()));
  info.normalize = normalize_;
  return info;
}

at::Tensor Pooler::operator()(const at::Tensor& hidden_in, const at::Tensor& attention_mask, bool normalize) const {
  at::Tensor hidden = hidden_in.to(at::kFloat);
  at::Tensor mask = attention_mask.to(at::kFloat).unsqueeze(-1);  // [B, L, 1]
  std::vector<at::Tensor> parts;
  // sentence_transformers.models.Pooling.forward, in its order.
  if (pooling_.cls) parts.push_back(hidden.select(1, 0));
  if (pooling_.max) {
    parts.push_back(std::get<0>(at::max(hidden.masked_fill(mask == 0, -1e9), 1)));
  }
  if (pooling_.mean || pooling_.mean_sqrt_len) {
    at::Tensor sum = (hidden * mask).sum(1);
    at::Tensor count = at::clamp_min(mask.sum(1), 1e-9);
    if (pooling_.mean) parts.push_back(sum / count);
    if (pooling_.mean_sqrt_len) parts.push_back(sum / at::sqrt(count));
  }
  if (pooling_.weighted_mean) {
    at::Tensor weights = at::arange(1, hidden.size(1) + 1, hidden.options()).view({1, -1, 1}) * mask;
    parts.push_back((hidden * weights).sum(1) / at::clamp_min(weights.sum(1), 1e-9));
  }
  if (pooling_.last_token) {
    // Index of the last token the mask keeps in each row (0 when it keeps none), as
    // sentence-transformers finds it: the mask may also drop a prompt at the start.
    at::Tensor positions = at::arange(1, attention_mask.size(1) + 1, attention_mask.options()).view({1, -1});
    at::Tensor last = at::clamp_min(std::get<0>(at::max(attention_mask * positions, 1)) - 1, 0)
                          .view({-1, 1, 1})
                          .expand({-1, 1, hidden.size(2)});
    parts.push_back(at::gather(hidden, 1, last).squeeze(1));
  }
  at::Tensor out = parts.size() == 1 ? parts[0] : at::cat(parts, 1);
  for (const Dense& d : dense_) out = ApplyActivation(d.act, d.linear(out));
  if (normalize) out = Normalize(out);
  return out;
}

at::Tensor Pooler::Normalize(const at::Tensor& pooled) const {
  if (!normalize_) return pooled;
  return pooled / at::clamp_min(pooled.norm(2, {1}, true), 1e-12);
}

}  // namespace relserve
