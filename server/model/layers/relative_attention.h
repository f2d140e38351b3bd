#ifndef RELSERVE_SERVER_MODEL_LAYERS_RELATIVE_ATTENTION_H_
#define RELSERVE_SERVER_MODEL_LAYERS_RELATIVE_ATTENTION_H_

#include <cstdint>
#include <memory>

#include <ATen/core/Tensor.h>

#include "server/model/layers/attention_options.h"

namespace relserve {

// The working-set budget of RelativeAttention, in bytes of scores and relative products per
// slice of a batch.
constexpr int64_t kAttentionSliceBytes = 12 << 20;

struct RelativeAttentionInputs {
  at::Tensor q, k, v;        // [heads, batch, L, head_dim], contiguous, one dtype
  at::Tensor pos_key;        // [heads, Rc, head_dim] or undefined
  at::Tensor c2p_index;      // int32 [2L - 1] into pos_key's rows
  at::Tensor pos_query;      // [heads, Rp, head_dim] or undefined
  at::Tensor p2c_index;      // int32 [2L - 1] into pos_query's rows
  at::Tensor position_bias;  // float32 [heads, 2L - 1] or undefined
  at::Tensor attention_mask; // [batch, L], nonzero = real token (uint8 is used as is); undefined = no padding
  bool zero_padded_queries = false;  // see RelativeScoreTerms
  // Transformer-XL / XLNet: the query that multiplies pos_key when it is not q (XLNet adds one
  // bias to the query of the content term and another to that of the position term).
  // [heads, batch, L, head_dim] like q; undefined = q.
  at::Tensor c2p_query;
  // XLNet's segment term: segment_scores float32 [heads, batch, L, 2] (per query: the score
  // for keys of its own segment, then for keys of another), segment_ids int32 [batch, L]
  // (compared for equality only). Undefined = no segment term.
  at::Tensor segment_scores, segment_ids;
  bool causal = false;  // see RelativeScoreTerms
  // Optional, for the biased path (biased_attention.h), on q's device; derived from the tables
  // above when undefined. c2p_gather[i][j] = c2p_index[j - i + L - 1] and
  // p2c_gather[i][j] = p2c_index[j - i + L - 1], int64 [L, L]; position_bias_matrix
  // [heads, L, L] = position_bias[head, j - i + L - 1] in q's dtype.
  at::Tensor c2p_gather, p2c_gather, position_bias_matrix;
  // Optional, for the table path (table_attention.h): c2p_index and p2c_index on q's device,
  // copied there on every call when undefined.
  at::Tensor c2p_table, p2c_table;
  int64_t slice_bytes = kAttentionSliceBytes;  // the working-set budget above (tests lower it)
  // The path asked for off the CPU (and on it with device_path_on_cpu), the bias path's fused
  // kernel and the CPU softmax's AVX-512 gathers (EngineOptions::gpu_attention and ::kernels,
  // passed down by EncoderInputs and EncoderPass::ForAttention).
  AttentionKernels kernels;
  // Where to count this call and its host time; null: not counted.
  AttentionStats* stats = nullptr;
};

// Self-attention with relative-position terms, for every encoder family:
//   probs = softmax(q.k + c2p + p2c + position_bias + segment, padded keys masked)
//   context = probs . v
// where c2p = c2p_query . pos_key[index(j - i)] and p2c = k_j . pos_query[index(j - i)]
// (DeBERTa's disentangled terms; XLNet's position term is a c2p term with its own query),
// position_bias[head, j - i] (T5) and segment = segment_scores[head, b, i, same segment ? 0 : 1]
// (XLNet). Any scaling is already folded into q, c2p_query, pos_query and segment_scores.
// Terms that are undefined are left out.
//
// Returns the context, [heads, batch, L, head_dim] contiguous.
//
// On the CPU the [L, L] scores and the [L, R] relative products of a large batch do not fit
// in cache: writing them out and reading them back is most of attention's time at long
// lengths. Above a working-set budget, the batch is therefore processed head by head in
// slices of sequences whose scores, relative products and probabilities stay in cache from
// the products that write them to the one that reads them (one pass of memory instead of
// four). Smaller batches run every head and sequence in one set of batched products.
//
// On other devices the terms become one additive bias for a fused attention kernel
// (BiasedAttention in biased_attention.h), or, where `path` is DeviceAttention::kTables and the
// inputs allow it, DeBERTa's terms are read through their tables by relserve's own kernel
// (table_attention.h).
at::Tensor RelativeAttention(const RelativeAttentionInputs& in);

// The relative products the paths of other devices read, in q's dtype (float16 ones are made in
// float32 on the CPU, which has no float16 matrix product, and rounded as a GPU's are):
//   C2pProducts: c2p[h, b, i, r] = c2p_query[h, b, i] . pos_key[h, r], [heads, batch, L, Rc];
//   P2cProducts: p2c[h, b, r, j] = pos_query[h, r] . k[h, b, j], [heads, batch, Rp, L] (rows =
//   relative positions, so that p2c[index(j - i)][j] is read along rows).
at::Tensor C2pProducts(const RelativeAttentionInputs& in);
at::Tensor P2cProducts(const RelativeAttentionInputs& in);

// A per-head bias read by the offset j - i (T5's and MPNet's bucketed position bias), in the
// form each device's attention takes, built once per length.
struct PositionBiasTables {
  at::Tensor table;   // float32 [heads, 2L - 1] (the CPU's fused softmax)
  at::Tensor matrix;  // [heads, L, L] in the table's dtype, on its device (other devices)

  // by_offset: [heads, 2L - 1], entry j - i + L - 1, on the model's device.
  static std::shared_ptr<const PositionBiasTables> FromOffsets(const at::Tensor& by_offset, int64_t length);
  // Sets the attention's position_bias (the CPU) or position_bias_matrix (other devices).
  void SetOn(RelativeAttentionInputs& att) const;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_LAYERS_RELATIVE_ATTENTION_H_
