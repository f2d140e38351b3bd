#ifndef RELSERVE_TESTS_MODEL_NAIVE_OPS_H_
#define RELSERVE_TESTS_MODEL_NAIVE_OPS_H_

// What the naive references (naive_reference.cc; families/mpnet/naive_mpnet_reference.cc,
// families/xlnet/naive_xlnet.cc) share: the checkpoint read as float64 and torch.nn's building
// blocks on row-major [rows, features] buffers, in plain loops, in double precision.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tests/model/naive_reference.h"

namespace relserve::naive {

using Vec = std::vector<double>;

// The checkpoint's float32 tensors as float64 (model.double()); its errors (std::runtime_error)
// start with `who`.
class Weights {
 public:
  Weights(const std::string& dir, const std::string& who);
  bool Has(const std::string& name) const { return tensors_.count(name) > 0; }
  bool AnyStartsWith(const std::string& prefix) const;
  // The tensor, which must exist with this shape.
  const Tensor& Get(const std::string& name, const std::vector<int64_t>& shape) const;

 private:
  std::string who_;
  std::map<std::string, Tensor> tensors_;
};

// nn.Linear: y = x @ W^T + b. x [rows, in], W [out, in], b [out] or none.
Vec Linear(const Vec& x, int64_t rows, const Tensor& w, const Tensor* b);

// nn.LayerNorm(n, eps) with weight and bias: biased variance over the last dimension.
Vec LayerNorm(const Vec& x, int64_t rows, int64_t n, const Tensor& w, const Tensor& b, double eps);

// torch.softmax over one row of n values, in place.
void SoftmaxRow(double* row, int64_t n);

}  // namespace relserve::naive

#endif  // RELSERVE_TESTS_MODEL_NAIVE_OPS_H_
