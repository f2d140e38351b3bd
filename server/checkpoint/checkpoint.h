#ifndef RELSERVE_SERVER_CHECKPOINT_CHECKPOINT_H_
#define RELSERVE_SERVER_CHECKPOINT_CHECKPOINT_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "server/safetensors/tensor_view.h"

namespace relserve {

// A model's weights by name, whatever format they came in: what WeightLoader reads. A format
// (SafetensorsCheckpoint, PytorchBinCheckpoint) opens its files, keeps them alive, and
// registers their tensors through AddTensors/AddShards; views stay valid for the checkpoint's
// lifetime. Immutable once opened, so any thread may read it.
class Checkpoint {
 public:
  virtual ~Checkpoint() = default;
  Checkpoint(const Checkpoint&) = delete;
  Checkpoint& operator=(const Checkpoint&) = delete;

  // nullptr if absent.
  const TensorView* Find(std::string_view name) const;
  // Like Find, but NOT_FOUND naming the directory and the tensor.
  absl::StatusOr<const TensorView*> Get(std::string_view name) const;
  // All tensor names, sorted.
  std::vector<std::string> Names() const;
  const std::string& dir() const { return dir_; }
  // The files read, relative to dir(): one, or the shards in name order.
  const std::vector<std::string>& file_names() const { return labels_; }

 protected:
  explicit Checkpoint(std::string dir) : dir_(std::move(dir)) {}

  // Registers the tensors of one file, known by `label` in messages (its name relative to
  // dir()); INVALID_ARGUMENT if one is already held by another file. `tensors` must outlive
  // this object.
  absl::Status AddTensors(const std::vector<TensorView>& tensors, const std::string& label);
  // Reads the index at `index_path` ({"metadata": {...}, "weight_map": {tensor: shard file}}),
  // opens every shard it names once, in name order, through `open_shard` (given the shard's
  // path; it keeps the file alive and returns its tensors), and checks that each tensor the
  // index lists is in its shard. INVALID_ARGUMENT for a malformed index or a tensor in two
  // shards; a shard's error comes back with its code, prefixed by the index and the shard;
  // DATA_LOSS when a shard does not hold a tensor the index lists.
  using ShardOpener = std::function<absl::StatusOr<const std::vector<TensorView>*>(const std::string& path)>;
  absl::Status AddShards(const std::string& index_path, const ShardOpener& open_shard);

 private:
  struct Located {
    const TensorView* view;
    size_t file;  // index into labels_
  };

  std::string dir_;
  std::vector<std::string> labels_;
  std::map<std::string, Located, std::less<>> by_name_;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_CHECKPOINT_CHECKPOINT_H_
