#ifndef RELSERVE_SERVER_MODEL_LAYERS_TABLE_ATTENTION_H_
#define RELSERVE_SERVER_MODEL_LAYERS_TABLE_ATTENTION_H_

#include <string_view>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"

#include "server/model/layers/relative_attention.h"

namespace relserve {

// How RelativeAttention runs off the CPU (and on the CPU under SetBiasedAttentionOnCpuForTesting):
//   kBias:   every term folded into one [heads, batch, L, L] bias for LibTorch's fused kernel
//            (biased_attention.h); any inputs.
//   kTables: DeBERTa's c2p and p2c terms read through their index tables by relserve's own
//            kernel (server/model/kernels/table_attention_args.h); inputs it does not cover
//            (a position bias, XLNet's segments or causal mask, a head size other than 64 on a
//            GPU, float32 on a GPU) still take kBias.
// Read once from RELSERVE_GPU_ATTENTION ("bias", the default, or "tables"); any other value
// makes the first attention off the CPU throw, which fails the model's warm-up at start.
enum class DeviceAttention { kBias, kTables };
DeviceAttention DeviceAttentionMode();
// "bias" (or empty) and "tables"; INVALID_ARGUMENT naming both for anything else.
absl::StatusOr<DeviceAttention> ParseDeviceAttention(std::string_view name);
void SetDeviceAttentionForTesting(DeviceAttention mode);

// True when this build has the CUDA kernel (a CUDA LibTorch and a CUDA compiler).
bool TableAttentionKernelCompiledIn();

// Whether the table path runs `in` on its device (see kTables above).
bool TableAttentionSupports(const RelativeAttentionInputs& in);

// The table path: c2p = c2p_query . pos_key^T and p2c = pos_query . k^T as matrix products,
// then the CUDA kernel on a GPU or its host twin on the CPU. Context [heads, batch, L, head_dim]
// in q's dtype.
at::Tensor TableAttention(const RelativeAttentionInputs& in);

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_LAYERS_TABLE_ATTENTION_H_
