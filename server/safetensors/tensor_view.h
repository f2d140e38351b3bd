#ifndef RELSERVE_SERVER_SAFETENSORS_TENSOR_VIEW_H_
#define RELSERVE_SERVER_SAFETENSORS_TENSOR_VIEW_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "server/safetensors/dtype.h"

namespace relserve {

// One tensor inside a mapped safetensors file. Valid for as long as the file object that
// produced it lives. Readers validated that nbytes == numel() * StDTypeSize(dtype) and that the
// element count does not overflow.
struct TensorView {
  std::string name;
  StDType dtype;
  std::vector<int64_t> shape;
  // Points into the read-only mapping. Alignment follows only from the file's layout, so copy
  // with memcpy instead of casting when the type matters.
  const uint8_t* data;
  size_t nbytes;

  // Product of the shape; 1 for a scalar (empty shape), 0 when any dimension is 0.
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_SAFETENSORS_TENSOR_VIEW_H_
