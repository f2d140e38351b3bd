#include "server/model/layers/int8_weight_bits.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace relserve {

absl::StatusOr<Int8WeightBits> ParseInt8WeightBits(std::string_view name) {
  if (name == "auto") return Int8WeightBits::kAuto;
  if (name == "7") return Int8WeightBits::kSeven;
  if (name == "8") return Int8WeightBits::kEight;
  return absl::InvalidArgumentError(
      absl::StrCat("\"", std::string(name), "\" is not a number of int8 weight bits (known: auto, 7, 8)"));
}

std::string_view Int8WeightBitsName(Int8WeightBits value) {
  switch (value) {
    case Int8WeightBits::kAuto:
      return "auto";
    case Int8WeightBits::kSeven:
      return "7";
    case Int8WeightBits::kEight:
      return "8";
  }
  return "auto";
}

std::string_view Int8WeightBitsHelp() {
  return "under --dtype int8 on the CPU, the bits of the weights: auto is 8 where the GEMM multiplies them as "
         "fast (AMX, AVX-512 VNNI) and 7 on CPUs without VNNI (AVX2, such as AMD Zen 2 and 3); 8 there runs "
         "relserve's exact 8-bit AVX2 kernel, about 4 times closer to float32 at 0.73-0.85 times "
         "int8's speed (refused with --int8-gemm onednn there, whose 8-bit sums would saturate); 7 anywhere";
}

}  // namespace relserve
