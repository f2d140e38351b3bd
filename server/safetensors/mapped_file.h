#ifndef RELSERVE_SERVER_SAFETENSORS_MAPPED_FILE_H_
#define RELSERVE_SERVER_SAFETENSORS_MAPPED_FILE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"

namespace relserve {

// A whole regular file mapped read-only (PROT_READ, MAP_PRIVATE): pages are loaded on demand
// and shared with the page cache, so opening a multi-gigabyte checkpoint costs no copy.
// If another process truncates the file while it is mapped, touching the lost pages raises
// SIGBUS; checkpoints are expected to be immutable while served.
class MappedFile {
 public:
  // NOT_FOUND if the path does not exist; INVALID_ARGUMENT if it is not a regular file.
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path);
  ~MappedFile();

  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  // Null for an empty file (a zero-length mapping is not allowed).
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}

  std::string path_;
  const uint8_t* data_;
  size_t size_;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_SAFETENSORS_MAPPED_FILE_H_
