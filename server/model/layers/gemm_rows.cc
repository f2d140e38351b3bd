#include "server/model/layers/gemm_rows.h"

#include <ATen/ATen.h>

namespace relserve {

GemmRows AsGemmRows(const at::Tensor& x, int64_t k, int64_t n) {
  GemmRows g;
  g.a = x.reshape({-1, k});
  g.rows = g.a.size(0);
  if (g.a.stride(1) != 1 || (g.rows > 1 && g.a.stride(0) < k)) g.a = g.a.contiguous();
  g.lda = g.rows > 1 ? g.a.stride(0) : k;
  g.out_sizes = x.sizes().vec();
  g.out_sizes.back() = n;
  return g;
}

}  // namespace relserve
