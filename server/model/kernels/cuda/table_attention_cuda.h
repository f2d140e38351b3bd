#ifndef RELSERVE_SERVER_MODEL_KERNELS_CUDA_TABLE_ATTENTION_CUDA_H_
#define RELSERVE_SERVER_MODEL_KERNELS_CUDA_TABLE_ATTENTION_CUDA_H_

#include "server/model/kernels/table_attention_args.h"

namespace relserve {

// What the CUDA kernel takes: bfloat16 or float16, head size kTableAttentionKernelHeadDim.
bool TableAttentionKernelSupports(const TableAttentionArgs& args);

// Queues the kernel on `stream` (a cudaStream_t) for the current device. Returns 0 or the
// cudaError_t of the launch, which TableAttentionErrorString names. Kept free of CUDA's and
// LibTorch's headers so that C++ callers need neither.
int LaunchTableAttention(const TableAttentionArgs& args, void* stream);
const char* TableAttentionErrorString(int error);

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_KERNELS_CUDA_TABLE_ATTENTION_CUDA_H_
