#ifndef RELSERVE_SERVER_MODEL_KERNELS_TABLE_ATTENTION_ARGS_H_
#define RELSERVE_SERVER_MODEL_KERNELS_TABLE_ATTENTION_ARGS_H_

// Relative attention that reads DeBERTa's disentangled terms through their index tables, one
// tile of queries and keys at a time, so that no [batch, heads, L, L] tensor is ever written:
//
//   score[i][j] = q_i . k_j + c2p[i][c2p_index[j - i + L - 1]] + p2c[p2c_index[j - i + L - 1]][j]
//   probs = softmax over the real keys j (padded keys masked); context = probs . v
//
// The products c2p = query . pos_key^T and p2c = pos_query . k^T are made beforehand as matrix
// products; this is what both executors of that contract take: the CUDA kernel
// (cuda/table_attention.cu) and its host twin (table_attention_host.h), which runs the same
// tiles, online softmax and roundings on the CPU so that the contract is tested without a GPU.
// Torch-free and CUDA-free: both compilers include it.

#include <cstdint>

#if defined(__CUDACC__)
#define RELSERVE_HOST_DEVICE __host__ __device__
#else
#define RELSERVE_HOST_DEVICE
#endif

namespace relserve {

// Queries and keys per tile (the kernel's block covers kTableAttentionTile queries and walks the
// keys kTableAttentionTile at a time; the host twin walks them in the same steps).
constexpr int kTableAttentionTile = 64;
// The head size the CUDA kernel is written for (the host twin takes any).
constexpr int kTableAttentionKernelHeadDim = 64;

enum class TableAttentionDtype { kBFloat16, kHalf, kFloat };

struct TableAttentionArgs {
  TableAttentionDtype dtype = TableAttentionDtype::kBFloat16;  // of q, k, v, c2p, p2c and out
  int heads = 0, batch = 0, length = 0, head_dim = 0;
  // [heads, batch, L, head_dim], contiguous; group g = head * batch + b.
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* out = nullptr;
  // c2p [groups, L, rc] (row = query) or null; c2p_index int32 [2L - 1] into its columns.
  const void* c2p = nullptr;
  const int32_t* c2p_index = nullptr;
  int rc = 0;
  // p2c [groups, rp, L] (row = relative position, column = key) or null; p2c_index int32
  // [2L - 1] into its rows.
  const void* p2c = nullptr;
  const int32_t* p2c_index = nullptr;
  int rp = 0;
  // [batch, L], nonzero = real token; null = no padding. Padded keys get probability 0; with
  // zero_padded_queries a padded query's context row is 0 (DeBERTa's XSoftmax).
  const uint8_t* key_mask = nullptr;
  bool zero_padded_queries = false;
};

// The offset table's entry for j - i, clamped into the table: the kernel's bands also cover
// pairs outside the sequence (a tile's rows past L), whose scores are never used.
RELSERVE_HOST_DEVICE inline int TableAttentionOffset(int key_minus_query, int length) {
  const int e = key_minus_query + length - 1;
  return e < 0 ? 0 : (e > 2 * length - 2 ? 2 * length - 2 : e);
}

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_KERNELS_TABLE_ATTENTION_ARGS_H_
