#ifndef RELSERVE_SERVER_CHECKPOINT_PYTORCH_BIN_FILE_H_
#define RELSERVE_SERVER_CHECKPOINT_PYTORCH_BIN_FILE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/safetensors/mapped_file.h"
#include "server/safetensors/tensor_view.h"

namespace relserve {

// The tensors of a state dict that torch.save wrote (PyTorch 1.6 and later: a zip archive of
// data.pkl and one data/<key> entry per storage), read without Python and without running the
// pickle (ReadStateDictPickle). Contiguous tensors are views into the buffer given to
// ParsePytorchBin; other views (transposed, strided, expanded) are copied out, row-major, into
// buffers this object owns. No view may hold more elements than its storage, and the copies
// together may not exceed the storages' size, so a small file cannot claim a large allocation.
// Every entry read is checked against its CRC-32.
struct PytorchBinTensors {
  std::vector<TensorView> tensors;  // in the pickle's order
  std::vector<std::vector<uint8_t>> copies;
};

// `label` starts every message (the file's path). INVALID_ARGUMENT for what relserve does not
// read: the legacy pre-1.6 format (with how to convert it), a TorchScript archive, a Git LFS
// pointer, big-endian storages, or a pickle ReadStateDictPickle refuses; DATA_LOSS for an empty,
// truncated or corrupt file, or a storage entry that is missing or of the wrong size.
absl::StatusOr<std::unique_ptr<PytorchBinTensors>> ParsePytorchBin(const uint8_t* data, size_t size,
                                                                   const std::string& label);

// One pytorch_model.bin (or shard), mapped read-only for this object's lifetime.
class PytorchBinFile {
 public:
  // NOT_FOUND for a missing file, INVALID_ARGUMENT for something that is not a regular file,
  // plus the errors of ParsePytorchBin. Messages start with the path.
  static absl::StatusOr<std::unique_ptr<PytorchBinFile>> Open(const std::string& path);

  PytorchBinFile(const PytorchBinFile&) = delete;
  PytorchBinFile& operator=(const PytorchBinFile&) = delete;

  const std::string& path() const { return file_->path(); }
  const std::vector<TensorView>& tensors() const { return contents_->tensors; }

 private:
  PytorchBinFile(std::unique_ptr<MappedFile> file, std::unique_ptr<PytorchBinTensors> contents)
      : file_(std::move(file)), contents_(std::move(contents)) {}

  std::unique_ptr<MappedFile> file_;
  std::unique_ptr<PytorchBinTensors> contents_;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_CHECKPOINT_PYTORCH_BIN_FILE_H_
