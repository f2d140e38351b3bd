#ifndef RELSERVE_TESTS_TESTING_TENSOR_MAX_ABS_DIFF_H_
#define RELSERVE_TESTS_TESTING_TENSOR_MAX_ABS_DIFF_H_

// max_abs_diff.h's rule for LibTorch tensors (for tests that link LibTorch).

#include <ATen/ATen.h>

#include "tests/testing/max_abs_diff.h"

namespace relserve::testing {

// The largest |a - b| in float64 over tensors of the same shape; kNotComparable when the
// shapes differ or either holds a NaN or an infinity. Empty tensors give 0.
inline double MaxAbsDiff(const at::Tensor& a, const at::Tensor& b) {
  if (a.sizes() != b.sizes()) return kNotComparable;
  if (a.numel() == 0) return 0;
  const at::Tensor x = a.to(at::kDouble), y = b.to(at::kDouble);
  if (!x.isfinite().all().item<bool>() || !y.isfinite().all().item<bool>()) return kNotComparable;
  return (x - y).abs().max().item<double>();
}

}  // namespace relserve::testing

#endif  // RELSERVE_TESTS_TESTING_TENSOR_MAX_ABS_DIFF_H_
