#ifndef RELSERVE_SERVER_MODEL_LAYERS_BIASED_ATTENTION_H_
#define RELSERVE_SERVER_MODEL_LAYERS_BIASED_ATTENTION_H_

#include <ATen/core/Tensor.h>

#include "absl/status/status.h"
#include "server/model/layers/attention_options.h"
#include "server/model/layers/relative_attention.h"

namespace relserve {

// Relative attention for devices other than the CPU: every relative term, and the padding,
// folded into one additive bias, then a fused attention kernel (LibTorch 2.x
// scaled_dot_product_attention, whose memory-efficient and cuDNN kernels take a bias) over
// q, k, v with scale 1 (every scale is already folded into q and pos_query).
//
// The bias is [heads, batch, L, L] in q's dtype (terms rounded to it, as transformers adds
// them in the model's dtype), built by gathering the [L, R] relative products through their
// [L, L] index matrices; T5's bias is one [heads, L, L] matrix shared by the batch when
// nothing is padded. Padded keys get -inf: every row keeps at least one real key, since no
// sequence is empty. Causal attention also masks keys after the query, but never the query's
// own key (XLNet's non_tgt_mask), so that a padded query before every real token still has one.
//
// Returns the context, [heads, batch, L, head_dim]. Padded queries' rows are zero when
// zero_padded_queries, else what the kernel computes for them. in.kernels.fused false runs
// unfused ATen operations (matmul, float32 softmax, matmul) even where the fused kernel exists;
// RelativeAttention takes this path on the CPU too with in.kernels.device_path_on_cpu.
at::Tensor BiasedAttention(const RelativeAttentionInputs& in);

// The bias above: [heads, batch or 1, L, L] in q's dtype, or [1, batch, 1, L] for padding
// alone; undefined when there are no terms and no padding.
at::Tensor RelativeAttentionBias(const RelativeAttentionInputs& in);

// The [L, L] int64 matrix m[i][j] = table[j - i + L - 1] of an int32 [2L - 1] table, or its
// transpose (transposed = true), on `device`.
at::Tensor OffsetIndexMatrix(const at::Tensor& table, int64_t length, bool transposed, const c10::Device& device);

// Which scaled_dot_product_attention kernels BiasedAttention's calls may use (attention_options.h),
// process-wide: LibTorch holds the choice in its global context, so every engine of a process
// should ask for the same (the server's --gpu-attention is one flag for all). FAILED_PRECONDITION
// for anything but kDefault and kAuto where this LibTorch has no such switch (before 2.4).
absl::Status UseSdpaBackend(SdpaBackend backend);

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_LAYERS_BIASED_ATTENTION_H_
