#ifndef RELSERVE_SERVER_SAFETENSORS_SAFETENSORS_WRITER_H_
#define RELSERVE_SERVER_SAFETENSORS_SAFETENSORS_WRITER_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "server/safetensors/dtype.h"

namespace relserve {

// Builds a .safetensors file byte-for-byte as Python's `safetensors` writes it:
// tensors laid out by descending dtype alignment then name, header keys in that same order with
// "__metadata__" first, compact JSON padded with spaces to a multiple of 8 bytes.
class SafetensorsWriter {
 public:
  // Copies the bytes (little-endian, row-major). INVALID_ARGUMENT on a duplicate or reserved
  // name, a name that is not UTF-8, a negative dimension, or nbytes != numel * dtype size.
  absl::Status Add(const std::string& name, StDType dtype, std::vector<int64_t> shape,
                   const void* data, size_t nbytes);
  // E.g. {"format": "pt"}, which transformers expects. Without a call the header has no
  // "__metadata__" key at all; an empty map writes an empty one, as Python does.
  void SetMetadata(std::map<std::string, std::string> metadata);

  // Writes path + ".tmp", then renames it over path so readers never see a partial file.
  // INVALID_ARGUMENT if metadata is not UTF-8 or the header would exceed the readers' limit.
  absl::Status WriteFile(const std::string& path) const;
  // The whole file image. Metadata that is not valid UTF-8 is written with U+FFFD in place of
  // the bad bytes (WriteFile refuses it instead).
  std::string Serialize() const;

 private:
  struct Entry {
    std::string name;
    StDType dtype;
    std::vector<int64_t> shape;
    std::string bytes;
  };

  // Entries in data-buffer order.
  std::vector<const Entry*> LayoutOrder() const;
  // 8-byte length prefix plus the padded JSON header.
  std::string SerializeHeader(const std::vector<const Entry*>& order) const;
  absl::Status CheckWritable() const;

  std::vector<Entry> entries_;
  std::set<std::string> names_;
  std::optional<std::map<std::string, std::string>> metadata_;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_SAFETENSORS_SAFETENSORS_WRITER_H_
