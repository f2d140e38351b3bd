#ifndef RELSERVE_SERVER_MODEL_KERNELS_RELATIVE_SOFTMAX_H_
#define RELSERVE_SERVER_MODEL_KERNELS_RELATIVE_SOFTMAX_H_

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace relserve {

// The score terms that relative attention adds to q.k before the softmax. In both families
// each term depends on the query i and key j only through j - i (and, for DeBERTa, on one row
// of a per-group product), so each is given as a table indexed by j - i + L - 1 instead of as
// an [L, L] tensor: nothing of size heads x batch x L x L is gathered, transposed or added.
//
// Groups. scores has G = heads x batch groups, group g = head * batch + b (the [heads, batch]
// layout both encoders use inside attention).
struct RelativeScoreTerms {
  // DeBERTa content-to-position: c2p [G, L, Rc] (row = query), c2p_index int32 [2L - 1].
  // Adds c2p[g, i, c2p_index[j - i + L - 1]].
  at::Tensor c2p;
  at::Tensor c2p_index;
  // DeBERTa position-to-content: p2c [G, L, Rp] (row = key), p2c_index int32 [2L - 1].
  // Adds p2c[g, j, p2c_index[j - i + L - 1]].
  at::Tensor p2c;
  at::Tensor p2c_index;
  // T5 position bias: float32 [heads, 2L - 1]. Adds position_bias[head, j - i + L - 1].
  at::Tensor position_bias;
  // XLNet segment term: segment float32 [G, L, 2] (row = query), segment_ids int32 [batch, L].
  // Adds segment[g, i, 0] where segment_ids[b][i] == segment_ids[b][j], else segment[g, i, 1].
  at::Tensor segment;
  at::Tensor segment_ids;
  // [batch, L], nonzero = real token, 0 = padding (uint8 is used as is; other dtypes are
  // converted on every call); undefined = no padding. Padded keys get probability 0.
  at::Tensor attention_mask;
  // DeBERTa's XSoftmax masks query rows too: a padded query's probabilities are all 0.
  // T5 leaves them as computed (its rows still attend to the real keys).
  bool zero_padded_queries = false;
  // Keys after the query (j > i) get probability 0: XLNet's attn_type "uni".
  bool causal = false;
  // The AVX-512 gathers where the CPU has them, and for float32 and bfloat16 scores each row's
  // maximum, exponentials, sum and probabilities on 16 lanes (about 1.4 times as fast on an AMD Zen
  // 4 at 128 keys); false: the portable loops (the engine's EngineKernels::avx512_softmax, through
  // RelativeAttentionInputs::kernels; tests compare both).
  bool avx512 = true;
};

// scores [G, L, L] (float32, bfloat16 or float16, contiguous) holds q.k on entry and
// softmax(q.k + terms) over the last dimension on return, computed in float32 whatever the
// dtype. c2p and p2c have the scores' dtype. A row whose keys are all padded is uniform, as
// transformers' finite mask value makes it.
// On the CPU this is one hand-written pass per row; on other devices it is
// RelativeSoftmaxWithAtenOps.
void RelativeSoftmaxInPlace(at::Tensor& scores, int64_t batch, const RelativeScoreTerms& terms);

// The same result from ATen operations on any device: every term expanded to [G, L, L],
// added, masked and soft-maxed in float32. Slower (several passes over memory); the path for
// devices without the CPU kernel.
void RelativeSoftmaxWithAtenOps(at::Tensor& scores, int64_t batch, const RelativeScoreTerms& terms);

// The columns of a c2p product (rows_are_keys false: row i is query i) or a p2c product (true: row
// j is key j) that RelativeSoftmaxInPlace reads through `index` (int32 [2L - 1], the term's
// c2p_index or p2c_index) at length L: row r's lie in [first[r], end[r]), written into first and
// end (L values each). For SerialGemm's NeededColumns (needed_columns.h): DeBERTa's rows each read
// a band of L of the 2L - 1 relative rows.
void RelativeTermColumns(const at::Tensor& index, int64_t L, bool rows_are_keys, int32_t* first, int32_t* end);

// The j - i + L - 1 table of a Toeplitz [L, L] int64 matrix m (m[i][j] depends on j - i only):
// entry d is m[i][j] for any i, j with j - i + L - 1 = d, as int32.
at::Tensor ToeplitzTable(const at::Tensor& m);

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_KERNELS_RELATIVE_SOFTMAX_H_
