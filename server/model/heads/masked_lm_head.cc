#include "server/model/heads/masked_lm_head.h"

#include <algorithm>
#include <limits>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

// Logits held at once by Splade: 64 MiB of float32 (549 tokens of a 30522-word vocabulary).
constexpr int64_t kChunkBytes = int64_t{64} << 20;

// A head tensor that is missing is a malformed head, not a missing model: INVALID_ARGUMENT.
absl::Status Malformed(const absl::Status& status) {
  if (status.ok() || absl::IsInvalidArgument(status)) return status;
  if (absl::IsNotFound(status)) return absl::InvalidArgumentError(status.message());
  return status;
}

}  // namespace

bool MaskedLmHead::Present(const WeightLoader& weights, const MaskedLmHeadLayout& layout) {
  for (const std::string& name : layout.TensorNames()) {
    if (weights.Has(name)) return true;
  }
  return false;
}

absl::StatusOr<MaskedLmHead> MaskedLmHead::Load(WeightLoader& w, const MaskedLmHeadLayout& layout,
                                                const at::Tensor& word_embeddings) {
  MaskedLmHead head;
  const int64_t H = layout.hidden, W = layout.width, V = layout.vocab;
  auto dense = LoadLinear(w, layout.dense, H, W, /*bias=*/true);
  RETURN_IF_ERROR(Malformed(dense.status()));
  head.dense_ = std::move(*dense);
  ASSIGN_OR_RETURN(head.act_, ParseActivation(layout.activation));
  auto norm = LoadLayerNorm(w, layout.layer_norm, W, layout.layer_norm_eps);
  RETURN_IF_ERROR(Malformed(norm.status()));
  head.norm_ = std::move(*norm);

  // Tied or not, a decoder weight in the file is the one transformers ends up with: loading it
  // into the tied parameter comes after the embeddings'.
  if (w.Has(layout.decoder_weight)) {
    auto decoder = w.Get(layout.decoder_weight, {V, W});
    RETURN_IF_ERROR(Malformed(decoder.status()));
    head.decoder_ = std::move(*decoder);
  } else if (!layout.tied) {
    return absl::InvalidArgumentError(absl::StrCat(
        "missing tensor \"", layout.decoder_weight, "\" (expected shape ", ShapeString({V, W}),
        "): tie_word_embeddings is false, so the decoder is not the word embeddings"));
  } else if (word_embeddings.defined()) {
    if (word_embeddings.dim() != 2 || word_embeddings.size(0) != V || word_embeddings.size(1) != W) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the word embeddings \"", layout.word_embeddings, "\" the decoder is tied to have shape ",
          ShapeString(word_embeddings.sizes().vec()), ", expected ", ShapeString({V, W})));
    }
    head.decoder_ = word_embeddings;
    head.decoder_is_word_embeddings_ = true;
  } else {
    auto decoder = w.Get(layout.word_embeddings, {V, W});
    RETURN_IF_ERROR(Malformed(decoder.status()));
    head.decoder_ = std::move(*decoder);
    head.decoder_is_word_embeddings_ = true;
  }

  // The bias under the first name the file holds; the others are the same parameter.
  const std::string* bias_name = nullptr;
  for (const std::string& name : layout.bias) {
    if (w.Has(name) && bias_name == nullptr) bias_name = &name;
  }
  if (bias_name == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("missing tensor \"", layout.bias.front(), "\" (expected shape ", ShapeString({V}), ")"));
  }
  auto bias = w.Get(*bias_name, {V});
  RETURN_IF_ERROR(Malformed(bias.status()));
  head.bias_ = std::move(*bias);
  for (const std::string& name : layout.bias) {
    if (&name != bias_name) w.Skip(name);
  }
  return head;
}

at::Tensor MaskedLmHead::Transform(const at::Tensor& tokens) const {
  return norm_(ApplyActivation(act_, dense_(tokens.to(dense_.weight.scalar_type()))));
}

at::Tensor MaskedLmHead::Logits(const at::Tensor& tokens) const {
  return at::addmm(bias_, Transform(tokens), decoder_.t());
}

std::vector<std::vector<std::pair<int32_t, float>>> MaskedLmHead::Splade(const at::Tensor& tokens,
                                                                         const std::vector<int64_t>& lengths,
                                                                         Pooling pooling, int64_t chunk_rows) const {
  const int64_t B = static_cast<int64_t>(lengths.size());
  const int64_t V = decoder_.size(0);
  std::vector<std::vector<std::pair<int32_t, float>>> out(B);
  if (B == 0) return out;
  std::vector<int64_t> start(B + 1, 0);
  for (int64_t b = 0; b < B; ++b) start[b + 1] = start[b] + lengths[b];
  const at::Tensor h = Transform(tokens);  // [N, width]
  const int64_t N = h.size(0);
  const int64_t rows = chunk_rows > 0 ? chunk_rows : std::max<int64_t>(1, kChunkBytes / (V * 4));

  // max: the running maximum of the logits; sum: the running sum of the tokens' values.
  at::Tensor best = at::full({B, V}, pooling.sum ? 0.0f : -std::numeric_limits<float>::infinity(),
                             at::TensorOptions().dtype(at::kFloat).device(h.device()));
  int64_t first = 0;  // the first sequence with rows at or after the chunk's start
  for (int64_t s = 0; s < N; s += rows) {
    const int64_t e = std::min(N, s + rows);
    const at::Tensor logits = at::addmm(bias_, h.narrow(0, s, e - s), decoder_.t()).to(at::kFloat);  // [e - s, V]
    for (int64_t b = first; b < B && start[b] < e; ++b) {
      const int64_t lo = std::max(start[b], s), hi = std::min(start[b + 1], e);
      if (hi <= lo) continue;
      at::Tensor row = best.select(0, b);
      const at::Tensor part = logits.narrow(0, lo - s, hi - lo);
      if (pooling.sum) {
        at::Tensor values = at::log1p(at::relu(part));
        if (pooling.log1p_relu) values = at::log1p(values);
        row.add_(values.sum(0));
      } else {
        at::maximum_out(row, row, std::get<0>(part.max(0)));
      }
    }
    while (first < B && start[first + 1] <= e) ++first;
  }
  // log(1 + relu(max)) > 0 exactly where max > 0; ids come out in row-major order.
  const at::Tensor positive = best.gt(0);
  const at::Tensor where = at::nonzero(positive).to(at::kCPU).contiguous();  // [K, 2]
  at::Tensor selected = best.masked_select(positive);
  if (!pooling.sum) {
    selected = at::log1p(selected);
    if (pooling.log1p_relu) selected = at::log1p(selected);
  }
  const at::Tensor weights = selected.to(at::kCPU).contiguous();  // [K]
  const int64_t* w = where.data_ptr<int64_t>();
  const float* v = weights.data_ptr<float>();
  for (int64_t k = 0, K = weights.size(0); k < K; ++k) {
    out[w[2 * k]].emplace_back(static_cast<int32_t>(w[2 * k + 1]), v[k]);
  }
  return out;
}

}  // namespace relserve
