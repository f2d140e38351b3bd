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

}  // namespace relserve
