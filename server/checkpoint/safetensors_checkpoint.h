#ifndef RELSERVE_SERVER_CHECKPOINT_SAFETENSORS_CHECKPOINT_H_
#define RELSERVE_SERVER_CHECKPOINT_SAFETENSORS_CHECKPOINT_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/checkpoint/checkpoint.h"
#include "server/safetensors/safetensors_file.h"

namespace relserve {

// A model's weights as Hugging Face saves them: one model.safetensors, or shards listed by
// model.safetensors.index.json. All files stay mapped for the checkpoint's lifetime; views
// point into them.
class SafetensorsCheckpoint : public Checkpoint {
 public:
  static constexpr char kSingleFile[] = "model.safetensors";
  static constexpr char kIndexFile[] = "model.safetensors.index.json";

  // Prefers the single file when both exist, as transformers does. NOT_FOUND when the
  // directory or both files are missing, or a shard is; INVALID_ARGUMENT for a malformed index
  // or a tensor present in two shards; DATA_LOSS when a tensor the index lists is missing from
  // its shard; plus any error of SafetensorsFile::Open.
  static absl::StatusOr<std::unique_ptr<SafetensorsCheckpoint>> OpenDirectory(
      const std::string& dir);

  // One file, or the shards in name order.
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }

 private:
  explicit SafetensorsCheckpoint(std::string dir) : Checkpoint(std::move(dir)) {}

  std::vector<std::unique_ptr<SafetensorsFile>> files_;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_CHECKPOINT_SAFETENSORS_CHECKPOINT_H_
