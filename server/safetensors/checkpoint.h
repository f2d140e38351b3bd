#ifndef RELSERVE_SERVER_SAFETENSORS_CHECKPOINT_H_
#define RELSERVE_SERVER_SAFETENSORS_CHECKPOINT_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "server/safetensors/safetensors_file.h"
#include "server/safetensors/tensor_view.h"

namespace relserve {

// A model's weights as Hugging Face saves them: one model.safetensors, or shards listed by
// model.safetensors.index.json ({"metadata": {...}, "weight_map": {tensor: shard file}}).
// All files stay mapped for the checkpoint's lifetime; views point into them.
class SafetensorsCheckpoint {
 public:
  static constexpr char kSingleFile[] = "model.safetensors";
  static constexpr char kIndexFile[] = "model.safetensors.index.json";

  // Prefers the single file when both exist, as transformers does. NOT_FOUND when the
  // directory or both files are missing, or a shard is; INVALID_ARGUMENT for a malformed index
  // or a tensor present in two shards; DATA_LOSS when a tensor the index lists is missing from
  // its shard; plus any error of SafetensorsFile::Open.
  static absl::StatusOr<std::unique_ptr<SafetensorsCheckpoint>> OpenDirectory(
      const std::string& dir);

  SafetensorsCheckpoint(const SafetensorsCheckpoint&) = delete;
  SafetensorsCheckpoint& operator=(const SafetensorsCheckpoint&) = delete;

  // nullptr if absent.
  const TensorView* Find(std::string_view name) const;
  // Like Find, but NOT_FOUND naming the directory and the tensor.
  absl::StatusOr<const TensorView*> Get(std::string_view name) const;
  // All tensor names, sorted.
  std::vector<std::string> Names() const;
  const std::string& dir() const { return dir_; }
  // One file, or the shards in name order.
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }

 private:
  explicit SafetensorsCheckpoint(std::string dir) : dir_(std::move(dir)) {}

  // Registers every tensor of `file`, known by `label` in messages; INVALID_ARGUMENT if one is
  // already held by another file.
  absl::Status AddFile(std::unique_ptr<SafetensorsFile> file, const std::string& label);
  absl::Status OpenShards(const std::string& index_path);

  struct Located {
    const TensorView* view;
    size_t file;  // index into files_ and labels_
  };

  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::vector<std::string> labels_;
  std::map<std::string, Located, std::less<>> by_name_;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_SAFETENSORS_CHECKPOINT_H_
