#include "server/model/layers/relative_attention.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include "server/model/layers/biased_attention.h"
#include "server/model/layers/table_attention.h"
#include "server/model/runtime/device.h"
#include "server/model/kernels/amx_gemm.h"
#include "server/model/kernels/packed_gemm.h"
#include "server/model/kernels/parallel_for.h"
#include "server/model/kernels/relative_softmax.h"

namespace relserve {
namespace {

// Attention for sequences [b0, b0 + n) of heads [h0, h0 + nh), written into context.
// Either one head (any n) or every sequence (any heads): groups stay [heads, batch]-ordered.
void AttendSlice(const RelativeAttentionInputs& in, int64_t h0, int64_t nh, int64_t b0, int64_t n,
                 at::Tensor& context) {
  const int64_t L = in.q.size(2), D = in.q.size(3);
  at::Tensor q = in.q.narrow(0, h0, nh).narrow(1, b0, n);
  at::Tensor k = in.k.narrow(0, h0, nh).narrow(1, b0, n);
  at::Tensor v = in.v.narrow(0, h0, nh).narrow(1, b0, n);
  RelativeScoreTerms terms;
  if (in.pos_key.defined()) {
    at::Tensor cq = in.c2p_query.defined() ? in.c2p_query.narrow(0, h0, nh).narrow(1, b0, n) : q;
    terms.c2p = at::bmm(cq.reshape({nh, n * L, D}), in.pos_key.narrow(0, h0, nh).transpose(1, 2))
                    .view({nh * n, L, -1});
    terms.c2p_index = in.c2p_index;
  }
  if (in.pos_query.defined()) {
    terms.p2c = at::bmm(k.reshape({nh, n * L, D}), in.pos_query.narrow(0, h0, nh).transpose(1, 2))
                    .view({nh * n, L, -1});
    terms.p2c_index = in.p2c_index;
  }
  if (in.position_bias.defined()) terms.position_bias = in.position_bias.narrow(0, h0, nh);
  if (in.attention_mask.defined()) terms.attention_mask = in.attention_mask.narrow(0, b0, n);
  if (in.segment_scores.defined()) {
    terms.segment = in.segment_scores.narrow(0, h0, nh).narrow(1, b0, n).reshape({nh * n, L, 2});
    terms.segment_ids = in.segment_ids.narrow(0, b0, n);
  }
  terms.zero_padded_queries = in.zero_padded_queries;
  terms.causal = in.causal;
  terms.avx512 = in.kernels.avx512;

  at::Tensor q3 = q.reshape({nh * n, L, D});
  at::Tensor k3 = k.reshape({nh * n, L, D});
  at::Tensor probs = at::bmm(q3, k3.transpose(1, 2));
  RelativeSoftmaxInPlace(probs, n, terms);
  // One head's run of sequences, or every head and sequence: a contiguous block of context.
  at::Tensor out = context.narrow(0, h0, nh).narrow(1, b0, n).view({nh * n, L, D});
  at::bmm_out(out, probs, v.reshape({nh * n, L, D}));
}

// The element type of AttendTiled's products and its serial GEMM on the tiles: float32 in
// relserve's float32 tiles (kernels/packed_gemm.h), bfloat16 in its AVX512-BF16 registers
// (kernels/amx_gemm.h), c = a · b with b's element (j, d) at b[j * b_row + d * b_col].
const float* Values(const at::Tensor& t, float*) { return t.data_ptr<float>(); }
const uint16_t* Values(const at::Tensor& t, uint16_t*) { return reinterpret_cast<const uint16_t*>(t.data_ptr<at::BFloat16>()); }
void TileProduct(const float* a, int64_t m, int64_t lda, const float* b, int64_t n, int64_t k, int64_t b_row,
                 int64_t b_col, float* c, int64_t ldc, const NeededColumns& needed = {}) {
  SerialGemm(a, m, lda, b, n, k, b_row, b_col, c, ldc, needed);
}
void TileProduct(const uint16_t* a, int64_t m, int64_t lda, const uint16_t* b, int64_t n, int64_t k, int64_t b_row,
                 int64_t b_col, uint16_t* c, int64_t ldc, const NeededColumns& needed = {}) {
  SerialGemmBFloat16(a, m, lda, b, n, k, b_row, b_col, c, ldc, needed);
}

// The columns of a c2p or p2c product the softmax reads (RelativeTermColumns): first L values, then
// end; empty without the term.
std::vector<int32_t> TermColumns(const at::Tensor& index, int64_t L, int64_t term_rows, bool rows_are_keys) {
  if (term_rows == 0) return {};
  std::vector<int32_t> columns(static_cast<size_t>(2 * L));
  RelativeTermColumns(index, L, rows_are_keys, columns.data(), columns.data() + L);
  return columns;
}

// Every head of every sequence as its own task on LibTorch's threads, each task's products (q.k,
// the c2p and p2c terms, probabilities x v) in relserve's register tiles on its own thread
// (TileProduct above) and its softmax right after, while its scores are in the core's cache: no
// BLAS call per head, no [heads, batch, L, L] tensor in memory. T: float (float32 on a CPU with
// AVX-512F or AVX2) or uint16_t (bfloat16 on a CPU with AVX512-BF16), the dtype of q, k and v; the
// scores and terms take it too, as ATen's batched products give them.
// q, k, v (and the c2p query) may be strided views, such as SplitHeads' of the fused projection's
// rows, and context too (TiledContext): each head of each sequence is read and written in place, its
// rows `stride(2)` apart.
template <typename T>
void AttendTiled(const RelativeAttentionInputs& in, at::Tensor& context) {
  const int64_t heads = in.q.size(0), B = in.q.size(1), L = in.q.size(2), D = in.q.size(3);
  // Rows of values side by side, as the tiles read them; anything else is copied.
  const auto rows_of_values = [](const at::Tensor& t) { return t.stride(-1) == 1 ? t : t.contiguous(); };
  const at::Tensor q = rows_of_values(in.q), k = rows_of_values(in.k), v = rows_of_values(in.v);
  const at::Tensor cq = in.c2p_query.defined() ? rows_of_values(in.c2p_query) : q;
  TORCH_CHECK(context.stride(3) == 1, "AttendTiled: the context's rows must hold their values side by side");
  // Element (h, b, i, 0) of t at h * stride(0) + b * stride(1) + i * stride(2).
  const auto at_head = [](const at::Tensor& t, int64_t h, int64_t b) { return h * t.stride(0) + b * t.stride(1); };
  // [heads, Rc, D] and [heads, Rp, D], read through their strides: DeBERTa's are a window of
  // each head's relative rows (a narrow of the layer's table), not copied per call.
  const at::Tensor pos_key = in.pos_key.defined() ? rows_of_values(in.pos_key) : at::Tensor();
  const at::Tensor pos_query = in.pos_query.defined() ? rows_of_values(in.pos_query) : at::Tensor();
  const int64_t rc = pos_key.defined() ? pos_key.size(1) : 0, rp = pos_query.defined() ? pos_query.size(1) : 0;
  // Each row of the relative terms only on the panels of the table rows it reads: for DeBERTa a
  // band of L of the 2L - 1, so about a third fewer products.
  const std::vector<int32_t> c2p_columns = TermColumns(in.c2p_index, L, rc, /*rows_are_keys=*/false);
  const std::vector<int32_t> p2c_columns = TermColumns(in.p2c_index, L, rp, /*rows_are_keys=*/true);
  const NeededColumns c2p_needed{rc > 0 ? c2p_columns.data() : nullptr, rc > 0 ? c2p_columns.data() + L : nullptr};
  const NeededColumns p2c_needed{rp > 0 ? p2c_columns.data() : nullptr, rp > 0 ? p2c_columns.data() + L : nullptr};
  const at::Tensor mask = in.attention_mask.defined() ? in.attention_mask.to(at::kByte).contiguous() : at::Tensor();
  // Each thread's scores and terms, reused by its tasks.
  const int64_t threads = at::get_num_threads();
  at::Tensor scores = at::empty({threads, 1, L, L}, q.options());
  at::Tensor c2p = rc > 0 ? at::empty({threads, 1, L, rc}, q.options()) : at::Tensor();
  at::Tensor p2c = rp > 0 ? at::empty({threads, 1, L, rp}, q.options()) : at::Tensor();
  const T* qp = Values(q, static_cast<T*>(nullptr));
  const T* kp = Values(k, static_cast<T*>(nullptr));
  const T* vp = Values(v, static_cast<T*>(nullptr));
  const T* cqp = Values(cq, static_cast<T*>(nullptr));
  const T* pos_key_p = rc > 0 ? Values(pos_key, static_cast<T*>(nullptr)) : nullptr;
  const T* pos_query_p = rp > 0 ? Values(pos_query, static_cast<T*>(nullptr)) : nullptr;
  T* out = const_cast<T*>(Values(context, static_cast<T*>(nullptr)));
  // On LibTorch's threads through ParallelFor: at::parallel_for here, in a file built without
  // OpenMP, ran every head on the calling thread.
  ParallelFor(0, heads * B, 1, [&](int64_t begin, int64_t end) {
    c10::InferenceMode guard;
    const int64_t t = std::min<int64_t>(at::get_thread_num(), threads - 1);
    at::Tensor probs = scores[t];
    T* probs_p = const_cast<T*>(Values(probs, static_cast<T*>(nullptr)));
    for (int64_t u = begin; u < end; ++u) {
      const int64_t h = u / B, b = u % B;
      const T* qh = qp + at_head(q, h, b);
      const T* kh = kp + at_head(k, h, b);
      RelativeScoreTerms terms;
      if (rc > 0) {
        terms.c2p = c2p[t];
        TileProduct(cqp + at_head(cq, h, b), L, cq.stride(2), pos_key_p + h * pos_key.stride(0), rc, D,
                    pos_key.stride(1), 1,
                    const_cast<T*>(Values(terms.c2p, static_cast<T*>(nullptr))), rc, c2p_needed);
        terms.c2p_index = in.c2p_index;
      }
      if (rp > 0) {
        terms.p2c = p2c[t];
        TileProduct(kh, L, k.stride(2), pos_query_p + h * pos_query.stride(0), rp, D, pos_query.stride(1), 1,
                    const_cast<T*>(Values(terms.p2c, static_cast<T*>(nullptr))), rp, p2c_needed);
        terms.p2c_index = in.p2c_index;
      }
      if (in.position_bias.defined()) terms.position_bias = in.position_bias.narrow(0, h, 1);
      if (mask.defined()) terms.attention_mask = mask.narrow(0, b, 1);
      if (in.segment_scores.defined()) {
        terms.segment = in.segment_scores.narrow(0, h, 1).narrow(1, b, 1).reshape({1, L, 2});
        terms.segment_ids = in.segment_ids.narrow(0, b, 1);
      }
      terms.zero_padded_queries = in.zero_padded_queries;
      terms.causal = in.causal;
      terms.avx512 = in.kernels.avx512;
      TileProduct(qh, L, q.stride(2), kh, L, D, k.stride(2), 1, probs_p, L);
      RelativeSoftmaxInPlace(probs, 1, terms);
      TileProduct(probs_p, L, L, vp + at_head(v, h, b), D, L, 1, v.stride(2), out + at_head(context, h, b),
                  context.stride(2));
    }
  });
}

}  // namespace

namespace {

at::Tensor DeviceProduct(const at::Tensor& a, const at::Tensor& b) {
  if (a.device().is_cpu() && a.scalar_type() == at::kHalf) return at::matmul(a.to(at::kFloat), b.to(at::kFloat)).to(at::kHalf);
  return at::matmul(a, b);
}

}  // namespace

at::Tensor C2pProducts(const RelativeAttentionInputs& in) {
  const at::Tensor& query = in.c2p_query.defined() ? in.c2p_query : in.q;
  return DeviceProduct(query, in.pos_key.unsqueeze(1).transpose(-1, -2));
}

at::Tensor P2cProducts(const RelativeAttentionInputs& in) {
  return DeviceProduct(in.pos_query.unsqueeze(1), in.k.transpose(-1, -2));
}

// The tiled paths' context [heads, B, L, D] as a view of [B, L, heads, D]: each token's heads side
// by side, as MergeHeads lays them out, so that merging them is free.
static at::Tensor TiledContext(const at::Tensor& q) {
  return at::empty({q.size(1), q.size(2), q.size(0), q.size(3)}, q.options()).permute({2, 0, 1, 3});
}

// RelativeAttention on the path `in` asks for, counted in in.stats.
static at::Tensor AttendOn(const RelativeAttentionInputs& in) {
  if (!in.q.device().is_cpu() || in.kernels.device_path_on_cpu) {
    if (in.kernels.path == DeviceAttention::kTables && TableAttentionSupports(in)) {
      if (in.stats != nullptr) in.stats->table_calls.fetch_add(1, std::memory_order_relaxed);
      return TableAttention(in);
    }
    if (in.stats != nullptr) in.stats->bias_calls.fetch_add(1, std::memory_order_relaxed);
    return BiasedAttention(in);
  }
  const int64_t heads = in.q.size(0), B = in.q.size(1), L = in.q.size(2);
  const bool tiles_take_it =
      B * L <= in.kernels.cpu_tiled_max_tokens && in.q.scalar_type() == at::kFloat && PackedWeights::Supported();
  const bool bfloat16_tiles_take_it = B * L <= in.kernels.cpu_tiled_bfloat16_max_tokens &&
                                      in.q.scalar_type() == at::kBFloat16 &&
                                      PackedBFloat16Weights::Avx512Supported();
  if (in.kernels.cpu_products_in_bfloat16 && in.q.scalar_type() == at::kFloat &&
      !(in.kernels.cpu_tiles_before_bfloat16 && tiles_take_it)) {
    // The same path on bfloat16 copies of the product operands; the relative softmax sums its
    // terms in float32 either way (kernels/relative_softmax.h).
    RelativeAttentionInputs half = in;
    half.kernels.cpu_products_in_bfloat16 = false;
    for (at::Tensor* t : {&half.q, &half.k, &half.v, &half.pos_key, &half.pos_query, &half.c2p_query}) {
      if (t->defined()) *t = t->to(at::kBFloat16);
    }
    return AttendOn(half).to(at::kFloat);
  }
  if (in.stats != nullptr) in.stats->cpu_calls.fetch_add(1, std::memory_order_relaxed);
  if (tiles_take_it) {
    if (in.stats != nullptr) in.stats->cpu_tiled_calls.fetch_add(1, std::memory_order_relaxed);
    at::Tensor context = TiledContext(in.q);
    AttendTiled<float>(in, context);
    return context;
  }
  if (bfloat16_tiles_take_it) {
    if (in.stats != nullptr) in.stats->cpu_tiled_calls.fetch_add(1, std::memory_order_relaxed);
    at::Tensor context = TiledContext(in.q);
    AttendTiled<uint16_t>(in, context);
    return context;
  }
  at::Tensor context = at::empty(in.q.sizes(), in.q.options());  // contiguous: q may be a strided view
  const int64_t rc = in.pos_key.defined() ? in.pos_key.size(1) : 0;
  const int64_t rp = in.pos_query.defined() ? in.pos_query.size(1) : 0;
  const int64_t per_sequence = L * (L + rc + rp) * static_cast<int64_t>(in.q.element_size());
  const int64_t budget = std::max<int64_t>(1, in.slice_bytes);
  if (heads * B * per_sequence <= budget) {
    AttendSlice(in, 0, heads, 0, B, context);
    return context;
  }
  // Even slices of at most the budget (a sequence longer than the budget is a slice alone).
  const int64_t slices = std::max<int64_t>(1, (B * per_sequence + budget - 1) / budget);
  const int64_t n = (B + slices - 1) / slices;
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t b0 = 0; b0 < B; b0 += n) AttendSlice(in, h, 1, b0, std::min(n, B - b0), context);
  }
  return context;
}

at::Tensor RelativeAttention(const RelativeAttentionInputs& in) {
  if (in.stats == nullptr) return AttendOn(in);
  const auto t0 = std::chrono::steady_clock::now();
  at::Tensor context = AttendOn(in);
  in.stats->host_nanoseconds.fetch_add(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count(),
      std::memory_order_relaxed);
  return context;
}

std::shared_ptr<const PositionBiasTables> PositionBiasTables::FromOffsets(const at::Tensor& by_offset,
                                                                          int64_t length) {
  auto bias = std::make_shared<PositionBiasTables>();
  const c10::Device device = by_offset.device();
  if (device.is_cpu()) {
    bias->table = by_offset.to(at::kFloat).contiguous();
  } else {
    bias->matrix =
        by_offset.index({at::indexing::Slice(), OffsetIndexMatrix(at::arange(2 * length - 1, at::kInt), length,
                                                                  /*transposed=*/false, device)})
            .contiguous();
    SynchronizeDevice(device);  // read next by other threads' streams
  }
  return bias;
}

void PositionBiasTables::SetOn(RelativeAttentionInputs& att) const {
  if (matrix.defined()) {
    att.position_bias_matrix = matrix;
  } else {
    att.position_bias = table;
  }
}

}  // namespace relserve
