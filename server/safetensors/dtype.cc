#include "server/safetensors/dtype.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace relserve {
namespace {

struct DTypeInfo {
  StDType dtype;
  std::string_view name;
  size_t size;
  int layout_rank;
};

// Ranks follow the Rust enum: BOOL, U8, I8, F8_E5M2, F8_E4M3, I16, U16, F16, BF16, I32, U32,
// F32, F64, I64, U64.
constexpr DTypeInfo kDTypes[] = {
    {StDType::kF64, "F64", 8, 12},  {StDType::kF32, "F32", 4, 11}, {StDType::kF16, "F16", 2, 7},
    {StDType::kBF16, "BF16", 2, 8}, {StDType::kI64, "I64", 8, 13}, {StDType::kI32, "I32", 4, 9},
    {StDType::kI16, "I16", 2, 5},   {StDType::kI8, "I8", 1, 2},    {StDType::kU8, "U8", 1, 1},
    {StDType::kBool, "BOOL", 1, 0},
};

const DTypeInfo& Info(StDType dtype) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.dtype == dtype) return info;
  }
  // Unreachable for valid enumerators; a cast-in garbage value falls back to BOOL's entry
  // rather than reading out of bounds.
  return kDTypes[9];
}

}  // namespace

absl::StatusOr<StDType> ParseStDType(std::string_view s) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.name == s) return info.dtype;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unsupported safetensors dtype '", std::string(s), "'"));
}

std::string_view StDTypeName(StDType dtype) { return Info(dtype).name; }

size_t StDTypeSize(StDType dtype) { return Info(dtype).size; }

int StDTypeLayoutRank(StDType dtype) { return Info(dtype).layout_rank; }

}  // namespace relserve
