#include "server/model/layers/biased_attention.h"

#include <limits>
#include <optional>
#include <string>

#include <ATen/ATen.h>
#include <torch/version.h>

// scaled_dot_product_attention with a scale argument: LibTorch 2.1 and later.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
#define RELSERVE_HAS_SDPA 1
#endif
// The switches of each kernel (at::Context::setSDPUse*, cuDNN's among them): LibTorch 2.4 and later.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define RELSERVE_HAS_SDPA_SWITCHES 1
#endif

namespace relserve {

absl::Status UseSdpaBackend(SdpaBackend backend) {
#ifdef RELSERVE_HAS_SDPA_SWITCHES
  const bool all = backend == SdpaBackend::kDefault || backend == SdpaBackend::kAuto;
  at::Context& context = at::globalContext();
  context.setSDPUseCuDNN(backend == SdpaBackend::kAuto || backend == SdpaBackend::kCudnn);
  context.setSDPUseMemEfficient(all || backend == SdpaBackend::kEfficient);
  context.setSDPUseFlash(all || backend == SdpaBackend::kFlash);
  context.setSDPUseMath(all || backend == SdpaBackend::kMath);
  return absl::OkStatus();
#else
  // Before 2.4 LibTorch has no cuDNN attention to leave out: the default is its own choice.
  if (backend == SdpaBackend::kDefault || backend == SdpaBackend::kAuto) return absl::OkStatus();
  return absl::FailedPreconditionError(
      "choosing the SDPA backend needs LibTorch 2.4 or later (this build has LibTorch " +
      std::string(TORCH_VERSION) + ")");
#endif
}

at::Tensor OffsetIndexMatrix(const at::Tensor& table, int64_t length, bool transposed, const c10::Device& device) {
  const int64_t L = length;
  at::Tensor i = at::arange(L, at::kLong).unsqueeze(1);
  at::Tensor offset = at::arange(L, at::kLong).unsqueeze(0) - i + (L - 1);  // [L, L]: j - i + L - 1
  at::Tensor m = table.to(at::kLong).index({offset});
  if (transposed) m = m.t();
  return m.contiguous().to(device);
}

at::Tensor RelativeAttentionBias(const RelativeAttentionInputs& in) {
  const int64_t heads = in.q.size(0), B = in.q.size(1), L = in.q.size(2);
  const auto device = in.q.device();
  const auto dtype = in.q.scalar_type();
  at::Tensor bias;  // [heads, B or 1, L, L]
  bool owned = false;  // bias is a new tensor, not a view of the caller's position-bias matrix
  if (in.pos_key.defined()) {
    at::Tensor index = in.c2p_gather.defined() ? in.c2p_gather : OffsetIndexMatrix(in.c2p_index, L, false, device);
    // The bias takes c2p[h, b, i, index[i][j]].
    bias = at::gather(C2pProducts(in), 3, index.expand({heads, B, L, L}));
    owned = true;
  }
  if (in.pos_query.defined()) {
    at::Tensor index = in.p2c_gather.defined() ? in.p2c_gather : OffsetIndexMatrix(in.p2c_index, L, false, device);
    // The bias takes p2c[h, b, index[i][j], j], gathered along the rows, so that it comes out in
    // [query, key] order (no transposed pass over an [L, L] tensor).
    at::Tensor term = at::gather(P2cProducts(in), 2, index.expand({heads, B, L, L}));
    bias = bias.defined() ? bias.add_(term) : term;
    owned = true;
  }
  if (in.position_bias.defined() || in.position_bias_matrix.defined()) {
    at::Tensor matrix = in.position_bias_matrix;
    if (!matrix.defined()) {
      at::Tensor i = at::arange(L, at::TensorOptions().dtype(at::kLong).device(device)).unsqueeze(1);
      at::Tensor offset = at::arange(L, i.options()).unsqueeze(0) - i + (L - 1);
      matrix = in.position_bias.to(device).index({at::indexing::Slice(), offset}).to(dtype);
    }
    at::Tensor pb = matrix.unsqueeze(1);  // [heads, 1, L, L]
    bias = bias.defined() ? bias.add_(pb) : pb;
  }
  if (in.segment_scores.defined()) {
    // segment_scores[h, b, i, 0] where query i and key j share a segment, else [.., 1].
    at::Tensor ids = in.segment_ids.to(device);
    at::Tensor same = ids.unsqueeze(2).eq(ids.unsqueeze(1)).unsqueeze(0);  // [1, B, L, L]
    at::Tensor seg = in.segment_scores.to(device).to(dtype);
    at::Tensor term = at::where(same, seg.narrow(3, 0, 1), seg.narrow(3, 1, 1));  // [heads, B, L, L]
    if (!bias.defined()) {
      bias = term;
    } else if (owned && bias.size(1) == B) {
      bias.add_(term);
    } else {
      bias = bias + term;  // a shared position-bias matrix is never written
    }
    owned = true;
  }
  if (in.causal) {
    // Keys after the query, and padded keys, are masked, but never a query's own key (as
    // XLNet's non_tgt_mask): a padded query of a left-padded row then keeps one key, where a
    // row of -inf alone would make the kernel's softmax NaN.
    at::Tensor i = at::arange(L, at::TensorOptions().dtype(at::kLong).device(device)).unsqueeze(1);
    at::Tensor j = at::arange(L, i.options()).unsqueeze(0);
    at::Tensor masked = j.gt(i).view({1, 1, L, L});
    if (in.attention_mask.defined()) {
      masked = masked.logical_or(in.attention_mask.to(device).eq(0).view({1, B, 1, L})).logical_and(j.ne(i));
    }
    const double neg_inf = -std::numeric_limits<double>::infinity();
    if (!bias.defined()) {
      bias = at::zeros({1, masked.size(1), L, L}, in.q.options()).masked_fill_(masked, neg_inf);
    } else {
      bias = bias.expand({heads, std::max(bias.size(1), masked.size(1)), L, L}).masked_fill(masked, neg_inf);
    }
  } else if (in.attention_mask.defined()) {
    at::Tensor padded_key = in.attention_mask.to(device).eq(0).view({1, B, 1, L});
    const double neg_inf = -std::numeric_limits<double>::infinity();
    if (!bias.defined()) {
      // Padding alone: a [1, B, 1, L] bias the kernel broadcasts.
      bias = at::zeros({1, B, 1, L}, in.q.options()).masked_fill_(padded_key, neg_inf);
    } else if (owned && bias.size(1) == B) {
      bias.masked_fill_(padded_key, neg_inf);
    } else {
      // A shared position-bias matrix is never written: the masked bias is a new tensor.
      bias = bias.expand({heads, B, L, L}).masked_fill(padded_key, neg_inf);
    }
  }
  if (bias.defined() && bias.scalar_type() != dtype) bias = bias.to(dtype);
  return bias;
}

at::Tensor BiasedAttention(const RelativeAttentionInputs& in) {
  at::Tensor bias = RelativeAttentionBias(in);
  // [heads, B, L, D] -> [B, heads, L, D], the kernels' layout (a view).
  at::Tensor q = in.q.transpose(0, 1), k = in.k.transpose(0, 1), v = in.v.transpose(0, 1);
  at::Tensor b = bias.defined() ? bias.transpose(0, 1) : at::Tensor();
  at::Tensor context;
#ifdef RELSERVE_HAS_SDPA
  if (in.kernels.fused) {
    context = at::scaled_dot_product_attention(q, k, v, b.defined() ? std::optional<at::Tensor>(b) : std::nullopt,
                                               /*dropout_p=*/0.0, /*is_causal=*/false, /*scale=*/1.0);
  }
#endif
  if (!context.defined()) {
    at::Tensor scores = at::matmul(q, k.transpose(-1, -2)).to(at::kFloat);
    if (b.defined()) scores.add_(b.to(at::kFloat));
    context = at::matmul(at::softmax(scores, -1).to(q.scalar_type()), v);
  }
  context = context.transpose(0, 1);  // [heads, B, L, D]
  if (in.zero_padded_queries && in.attention_mask.defined()) {
    const int64_t B = in.q.size(1), L = in.q.size(2);
    at::Tensor keep = in.attention_mask.to(context.device()).ne(0).view({1, B, L, 1}).to(context.scalar_type());
    context = context * keep;
  }
  return context;
}

}  // namespace relserve
