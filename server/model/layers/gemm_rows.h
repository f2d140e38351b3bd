#ifndef RELSERVE_SERVER_MODEL_LAYERS_GEMM_ROWS_H_
#define RELSERVE_SERVER_MODEL_LAYERS_GEMM_ROWS_H_

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

namespace relserve {

// A Linear's input x [..., k] as the rows a hand-written GEMM reads (kernels/): `a` [rows, k], its
// rows `lda` values apart and each row's values side by side (x itself where it already is so, a
// contiguous copy otherwise), and the sizes of the output, x's with the last one `n`.
struct GemmRows {
  at::Tensor a;
  int64_t rows = 0;
  int64_t lda = 0;
  std::vector<int64_t> out_sizes;
};

// x must have k values in its last dimension (checked by the caller).
GemmRows AsGemmRows(const at::Tensor& x, int64_t k, int64_t n);

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_LAYERS_GEMM_ROWS_H_
