#ifndef RELSERVE_SERVER_SAFETENSORS_DTYPE_H_
#define RELSERVE_SERVER_SAFETENSORS_DTYPE_H_

#include <cstddef>
#include <string_view>

#include "absl/status/statusor.h"

namespace relserve {

// The safetensors element types this project reads and writes. Rarer ones (U16, U32, U64,
// F8_*) are rejected by name rather than guessed at.
enum class StDType { kF64, kF32, kF16, kBF16, kI64, kI32, kI16, kI8, kU8, kBool };

// "F32" -> kF32 etc.; INVALID_ARGUMENT naming the string otherwise.
absl::StatusOr<StDType> ParseStDType(std::string_view s);
std::string_view StDTypeName(StDType dtype);
size_t StDTypeSize(StDType dtype);

// Position of `dtype` in the Rust safetensors `Dtype` enum, which is declared in increasing
// alignment order; the Python writer lays tensors out by this rank, descending, so that every
// tensor stays aligned. Only the relative order matters.
int StDTypeLayoutRank(StDType dtype);

}  // namespace relserve

#endif  // RELSERVE_SERVER_SAFETENSORS_DTYPE_H_
