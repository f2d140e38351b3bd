#ifndef RELSERVE_SERVER_CHECKPOINT_PYTORCH_BIN_CHECKPOINT_H_
#define RELSERVE_SERVER_CHECKPOINT_PYTORCH_BIN_CHECKPOINT_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/checkpoint/pytorch_bin_file.h"
#include "server/checkpoint/checkpoint.h"

namespace relserve {

// A model's weights as transformers saved them before safetensors: one pytorch_model.bin, or
// shards listed by pytorch_model.bin.index.json (the same index format as safetensors'). Files
// stay mapped for the checkpoint's lifetime.
class PytorchBinCheckpoint : public Checkpoint {
 public:
  static constexpr char kSingleFile[] = "pytorch_model.bin";
  static constexpr char kIndexFile[] = "pytorch_model.bin.index.json";

  // Prefers the single file when both exist, as transformers does. NOT_FOUND when the
  // directory or both files are missing, or a shard is; INVALID_ARGUMENT for a malformed index
  // or a tensor present in two shards; DATA_LOSS when a tensor the index lists is missing from
  // its shard; plus any error of PytorchBinFile::Open.
  static absl::StatusOr<std::unique_ptr<PytorchBinCheckpoint>> OpenDirectory(const std::string& dir);
  // One file that torch.save wrote a state dict to, whatever its name (bge-m3's
  // sparse_linear.pt): dir() is the file's folder and file_names() its name. The errors of
  // PytorchBinFile::Open.
  static absl::StatusOr<std::unique_ptr<PytorchBinCheckpoint>> OpenFile(const std::string& path);

  const std::vector<std::unique_ptr<PytorchBinFile>>& files() const { return files_; }

 private:
  explicit PytorchBinCheckpoint(std::string dir) : Checkpoint(std::move(dir)) {}

  std::vector<std::unique_ptr<PytorchBinFile>> files_;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_CHECKPOINT_PYTORCH_BIN_CHECKPOINT_H_
