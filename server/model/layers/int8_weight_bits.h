#ifndef RELSERVE_SERVER_MODEL_LAYERS_INT8_WEIGHT_BITS_H_
#define RELSERVE_SERVER_MODEL_LAYERS_INT8_WEIGHT_BITS_H_

#include <string_view>

#include "absl/status/statusor.h"

namespace relserve {

// How many bits int8's weights take (--int8-weight-bits, EngineOptions::int8_weight_bits): each
// output feature's scale is its max |w| / 127 with 8 bits, / 63 with 7. 8 bits are about 4 times
// closer to float32 (docs/PERFORMANCE.md), 7 are what CPUs without VNNI multiply fastest:
//   kAuto:  8 bits where that is as fast (relserve's GEMM in AMX tiles or VNNI registers, oneDNN's
//           on a CPU with VNNI); 7 on relserve's AVX2 kernel (its 8-bit kernel runs about 0.75
//           times the rate) and on oneDNN's without VNNI (whose 8-bit products saturate).
//   kSeven: 7 bits everywhere.
//   kEight: 8 bits everywhere; on relserve's AVX2 kernel the exact, slower one. Refused at load
//           where oneDNN's int8 linear would run without VNNI (its sums would saturate).
enum class Int8WeightBits { kAuto, kSeven, kEight };

// "auto", "7" or "8"; INVALID_ARGUMENT naming the three otherwise.
absl::StatusOr<Int8WeightBits> ParseInt8WeightBits(std::string_view name);
std::string_view Int8WeightBitsName(Int8WeightBits value);

// The help of --int8-weight-bits, the same on the server and in relserve-model.
std::string_view Int8WeightBitsHelp();

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_LAYERS_INT8_WEIGHT_BITS_H_
