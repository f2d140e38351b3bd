#ifndef RELSERVE_SERVER_SAFETENSORS_HEADER_PARSER_H_
#define RELSERVE_SERVER_SAFETENSORS_HEADER_PARSER_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/safetensors/dtype.h"

namespace relserve {

// Same limit as the reference implementation: a larger length prefix is garbage or hostile, and
// refusing it early keeps a corrupt file from making us parse 2^64 bytes.
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

// One header entry; offsets are relative to the start of the data buffer.
struct SafetensorsEntry {
  std::string name;
  StDType dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

struct SafetensorsLayout {
  uint64_t header_bytes = 0;  // N, the JSON length including padding
  uint64_t data_start = 0;    // 8 + N: where offset 0 of the data buffer lies in the file
  std::vector<SafetensorsEntry> tensors;  // in header order
  std::map<std::string, std::string> metadata;
};

// Validates a whole file image of `size` bytes (bytes may be null when size is 0). Nothing past
// `size` is read, so this is safe on arbitrary input. `what` (the file path) starts every error
// message. DATA_LOSS when the file is too short for what its header promises; INVALID_ARGUMENT
// when the header itself is malformed or inconsistent.
//
// Deliberately more lenient than the reference reader in one respect: gaps between tensors and
// trailing bytes after the last one are accepted, since they cannot make a view read out of
// bounds.
absl::StatusOr<SafetensorsLayout> ParseSafetensorsLayout(const uint8_t* bytes, size_t size,
                                                         const std::string& what);

}  // namespace relserve

#endif  // RELSERVE_SERVER_SAFETENSORS_HEADER_PARSER_H_
