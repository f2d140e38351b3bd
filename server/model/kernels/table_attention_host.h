#ifndef RELSERVE_SERVER_MODEL_KERNELS_TABLE_ATTENTION_HOST_H_
#define RELSERVE_SERVER_MODEL_KERNELS_TABLE_ATTENTION_HOST_H_

#include "server/model/kernels/table_attention_args.h"

namespace relserve {

// The CUDA kernel's algorithm (table_attention_args.h) run on the CPU, any head size: per group
// and query, the keys in tiles of kTableAttentionTile with an online softmax, scores and sums in
// float, the probabilities rounded to the element type before they multiply v (as the kernel's
// tensor-core product takes them), the context divided by the sum at the end and rounded once.
// Groups run in parallel. Not a fast path: it exists so that the kernel's contract and
// arithmetic are tested where there is no GPU.
void TableAttentionOnHost(const TableAttentionArgs& args);

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_KERNELS_TABLE_ATTENTION_HOST_H_
