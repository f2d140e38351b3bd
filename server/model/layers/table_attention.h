#ifndef RELSERVE_SERVER_MODEL_LAYERS_TABLE_ATTENTION_H_
#define RELSERVE_SERVER_MODEL_LAYERS_TABLE_ATTENTION_H_

#include <ATen/core/Tensor.h>

#include "server/model/layers/attention_options.h"
#include "server/model/layers/relative_attention.h"

namespace relserve {

// The table path of RelativeAttention (DeviceAttention::kTables in attention_options.h), taken
// where RelativeAttentionInputs::path asks for it and TableAttentionSupports the inputs.

// True when this build has the CUDA kernel (a CUDA LibTorch and a CUDA compiler).
bool TableAttentionKernelCompiledIn();

// Whether the table path runs `in` on its device (see DeviceAttention::kTables).
bool TableAttentionSupports(const RelativeAttentionInputs& in);

// The table path: c2p = c2p_query . pos_key^T and p2c = pos_query . k^T as matrix products,
// then the CUDA kernel on a GPU or its host twin on the CPU. Context [heads, batch, L, head_dim]
// in q's dtype.
at::Tensor TableAttention(const RelativeAttentionInputs& in);

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_LAYERS_TABLE_ATTENTION_H_
