#include "server/model/layers/table_attention.h"

#include <cstdint>
#include <stdexcept>
#include <string>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"

#include "server/model/kernels/table_attention_args.h"
#include "server/model/kernels/table_attention_host.h"

#ifdef RELSERVE_WITH_CUDA_KERNELS
#include <c10/cuda/CUDAStream.h>

#include "server/model/kernels/cuda/table_attention_cuda.h"
#endif

namespace relserve {
namespace {

TableAttentionDtype DtypeOf(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kBFloat16: return TableAttentionDtype::kBFloat16;
    case at::kHalf: return TableAttentionDtype::kHalf;
    case at::kFloat: return TableAttentionDtype::kFloat;
    default: throw std::invalid_argument(std::string("table attention: unsupported dtype ") + c10::toString(t.scalar_type()));
  }
}

// An int32 offset table on `device`, contiguous.
at::Tensor TableOn(const at::Tensor& on_device, const at::Tensor& table, const c10::Device& device) {
  if (on_device.defined()) return on_device.contiguous();
  return table.to(device, at::kInt).contiguous();
}

}  // namespace

bool TableAttentionKernelCompiledIn() {
#ifdef RELSERVE_WITH_CUDA_KERNELS
  return true;
#else
  return false;
#endif
}

bool TableAttentionSupports(const RelativeAttentionInputs& in) {
  if (!in.pos_key.defined() && !in.pos_query.defined()) return false;
  if (in.position_bias.defined() || in.position_bias_matrix.defined() || in.segment_scores.defined() || in.causal) {
    return false;
  }
  const auto dtype = in.q.scalar_type();
  if (in.q.device().is_cpu()) return dtype == at::kFloat || dtype == at::kBFloat16 || dtype == at::kHalf;
  return in.q.device().is_cuda() && TableAttentionKernelCompiledIn() && in.q.size(3) == kTableAttentionKernelHeadDim &&
         (dtype == at::kBFloat16 || dtype == at::kHalf);
}

at::Tensor TableAttention(const RelativeAttentionInputs& in) {
  const c10::Device device = in.q.device();
  // The kernel reads q, k and v in 16-byte pieces: a view that starts elsewhere is copied.
  auto aligned = [](const at::Tensor& t) {
    const at::Tensor c = t.contiguous();
    return reinterpret_cast<uintptr_t>(c.data_ptr()) % 16 == 0 ? c : c.clone();
  };
  const at::Tensor q = aligned(in.q), k = aligned(in.k), v = aligned(in.v);
  TableAttentionArgs a;
  a.dtype = DtypeOf(q);
  a.heads = static_cast<int>(q.size(0));
  a.batch = static_cast<int>(q.size(1));
  a.length = static_cast<int>(q.size(2));
  a.head_dim = static_cast<int>(q.size(3));
  a.q = q.data_ptr();
  a.k = k.data_ptr();
  a.v = v.data_ptr();
  at::Tensor c2p, c2p_index, p2c, p2c_index, mask;
  if (in.pos_key.defined()) {
    c2p = C2pProducts(in).contiguous();  // [heads, B, L, Rc]: row = query
    c2p_index = TableOn(in.c2p_table, in.c2p_index, device);
    a.c2p = c2p.data_ptr();
    a.c2p_index = c2p_index.data_ptr<int32_t>();
    a.rc = static_cast<int>(c2p.size(3));
  }
  if (in.pos_query.defined()) {
    p2c = P2cProducts(in).contiguous();  // [heads, B, Rp, L]: row = relative position, column = key
    p2c_index = TableOn(in.p2c_table, in.p2c_index, device);
    a.p2c = p2c.data_ptr();
    a.p2c_index = p2c_index.data_ptr<int32_t>();
    a.rp = static_cast<int>(p2c.size(2));
  }
  if (in.attention_mask.defined()) {
    mask = in.attention_mask.to(device);
    if (mask.scalar_type() != at::kByte) mask = mask.ne(0).to(at::kByte);
    mask = mask.contiguous();
    a.key_mask = mask.data_ptr<uint8_t>();
  }
  a.zero_padded_queries = in.zero_padded_queries;
  at::Tensor out = at::empty_like(q);
  a.out = out.data_ptr();
  if (device.is_cpu()) {
    TableAttentionOnHost(a);
    return out;
  }
#ifdef RELSERVE_WITH_CUDA_KERNELS
  const int error = LaunchTableAttention(a, c10::cuda::getCurrentCUDAStream(device.index()).stream());
  if (error != 0) throw std::runtime_error(std::string("table attention kernel: ") + TableAttentionErrorString(error));
  return out;
#else
  throw std::logic_error("table attention: this build has no CUDA kernel");
#endif
}

}  // namespace relserve
