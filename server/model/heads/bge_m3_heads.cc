#include "server/model/heads/bge_m3_heads.h"

#include <algorithm>
#include <map>
#include <memory>
#include <tuple>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "server/checkpoint/pytorch_bin_checkpoint.h"
#include "server/model_config/model_limits.h"
#include "server/model/layers/weight_loader.h"
#include "server/util/file_util.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

// One nn.Linear's state dict from `path`: weight [out, hidden] (out given, or any from 1 to
// kMaxModelWidth when 0) and bias [out]; nothing else. Unset when the file is not there.
absl::StatusOr<Linear> LoadLinearFile(const std::string& path, int64_t hidden, int64_t out, const c10::Device& device) {
  ASSIGN_OR_RETURN(const bool present, OptionalFileExists(path));
  if (!present) return Linear();
  auto checkpoint = PytorchBinCheckpoint::OpenFile(path);
  if (!checkpoint.ok()) {
    const std::string message(checkpoint.status().message());
    // PytorchBinFile's messages start with the path already.
    return absl::Status(checkpoint.status().code(),
                        message.rfind(path, 0) == 0 ? message : absl::StrCat(path, ": ", message));
  }
  auto invalid = [&](const std::string& what) { return absl::InvalidArgumentError(absl::StrCat(path, ": ", what)); };
  const TensorView* weight = (*checkpoint)->Find("weight");
  if (weight == nullptr) {
    return invalid(absl::StrCat("missing tensor \"weight\" (expected shape [", out > 0 ? absl::StrCat(out) : "D", ", ",
                                hidden, "])"));
  }
  if (out == 0) {
    // The projection's width is the file's: FlagEmbedding's colbert_dim (bge-m3: hidden).
    if (weight->shape.size() != 2 || weight->shape[0] < 1 || weight->shape[0] > kMaxModelWidth) {
      return invalid(absl::StrCat("tensor \"weight\" has shape ", ShapeString(weight->shape), ", expected [D, ", hidden,
                                  "] with D from 1 to ", kMaxModelWidth));
    }
    out = weight->shape[0];
  }
  WeightLoader w(**checkpoint, at::kFloat, device);
  Linear linear;
  for (auto [name, shape, tensor] : {std::make_tuple("weight", std::vector<int64_t>{out, hidden}, &linear.weight),
                                     std::make_tuple("bias", std::vector<int64_t>{out}, &linear.bias)}) {
    auto t = w.Get(name, shape);
    if (!t.ok()) return invalid(std::string(t.status().message()));
    *tensor = std::move(*t);
  }
  const std::vector<std::string> unused = w.Unused({});
  if (!unused.empty()) {
    return invalid(
        absl::StrCat("unexpected tensor \"", unused.front(), "\" (an nn.Linear's state dict holds weight and bias)"));
  }
  return linear;
}

}  // namespace

absl::StatusOr<BgeM3Heads> BgeM3Heads::Load(const std::string& dir, int64_t hidden_size, const c10::Device& device) {
  BgeM3Heads heads;
  ASSIGN_OR_RETURN(heads.sparse_, LoadLinearFile(JoinPath(dir, kSparseFile), hidden_size, 1, device));
  ASSIGN_OR_RETURN(heads.colbert_, LoadLinearFile(JoinPath(dir, kColbertFile), hidden_size, 0, device));
  return heads;
}

std::vector<Linear*> BgeM3Heads::Linears() {
  std::vector<Linear*> out;
  if (has_sparse()) out.push_back(&sparse_);
  if (has_colbert()) out.push_back(&colbert_);
  return out;
}

at::Tensor BgeM3Heads::TokenWeights(const at::Tensor& tokens) const {
  return at::relu(sparse_(tokens.to(at::kFloat))).squeeze(-1);
}

at::Tensor BgeM3Heads::ColbertVectors(const at::Tensor& tokens) const {
  at::Tensor v = colbert_(tokens.to(at::kFloat));
  return v / at::clamp_min(v.norm(2, {1}, /*keepdim=*/true), 1e-12);
}

std::vector<std::pair<int32_t, float>> LexicalWeights(const std::vector<int32_t>& ids, const float* weights,
                                                      const std::vector<int32_t>& dropped) {
  std::map<int32_t, float> best;
  for (size_t t = 0; t < ids.size(); ++t) {
    if (!(weights[t] > 0) || std::find(dropped.begin(), dropped.end(), ids[t]) != dropped.end()) continue;
    auto [it, inserted] = best.emplace(ids[t], weights[t]);
    if (!inserted) it->second = std::max(it->second, weights[t]);
  }
  return std::vector<std::pair<int32_t, float>>(best.begin(), best.end());
}

}  // namespace relserve
