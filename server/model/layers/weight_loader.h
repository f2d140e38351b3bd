#ifndef RELSERVE_SERVER_MODEL_LAYERS_WEIGHT_LOADER_H_
#define RELSERVE_SERVER_MODEL_LAYERS_WEIGHT_LOADER_H_

#include <set>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"
#include "server/checkpoint/checkpoint.h"

namespace relserve {

// Takes tensors out of a checkpoint (safetensors or pytorch_model.bin: OpenModelCheckpoint) by
// their transformers names, checking shape and dtype, converting to the engine's dtype, and
// remembering which names were used so that the rest can be reported as unexpected.
class WeightLoader {
 public:
  // Tensors come out in `dtype` on `device`.
  WeightLoader(const Checkpoint& checkpoint, at::ScalarType dtype,
               c10::Device device = c10::Device(c10::kCPU));

  // The tensor `name`, which must have exactly `shape`. NOT_FOUND names the tensor and the
  // shape it should have; INVALID_ARGUMENT names a wrong shape or a non-float dtype.
  absl::StatusOr<at::Tensor> Get(const std::string& name, const std::vector<int64_t>& shape);
  // Like Get, but returns an undefined tensor when the checkpoint has no such name.
  absl::StatusOr<at::Tensor> GetOptional(const std::string& name, const std::vector<int64_t>& shape);
  bool Has(const std::string& name) const;

  // A size from config.json against the tensor that holds it, before anything is loaded:
  // INVALID_ARGUMENT "<what> in config.json disagrees with tensor "<tensor>" of shape [...]"
  // when dimension `dim` of `tensor` is not `expected`. `what` names the key and its value
  // (ConfigSize()). A missing tensor passes: Get reports it with the shape it should have.
  absl::Status CheckConfigSize(const std::string& what, int64_t expected, const std::string& tensor,
                               size_t dim) const;
  // A config value that leaves `tensor` out of the model while the checkpoint holds it:
  // INVALID_ARGUMENT "<what> in config.json disagrees with the checkpoint, which holds ...".
  absl::Status CheckAbsent(const std::string& what, const std::string& tensor) const;
  // The number of blocks "<prefix>0.", "<prefix>1.", ... the checkpoint holds tensors of (the
  // highest index + 1) against `expected`: INVALID_ARGUMENT naming `what` when they differ.
  absl::Status CheckBlockCount(const std::string& what, int64_t expected, const std::string& prefix) const;
  // Marks a name as consumed without loading it (tied copies, ignored buffers).
  void Skip(const std::string& name);

  // Names that were never taken or skipped, excluding those that start with one of
  // `ignored_prefixes`. Call after loading everything.
  std::vector<std::string> Unused(const std::vector<std::string>& ignored_prefixes) const;
  // INVALID_ARGUMENT listing unexpected tensors, if any.
  absl::Status CheckNoneUnused(const std::vector<std::string>& ignored_prefixes) const;

  at::ScalarType dtype() const { return dtype_; }

 private:
  const Checkpoint& checkpoint_;
  at::ScalarType dtype_;
  c10::Device device_;
  std::set<std::string> used_;
};

std::string ShapeString(const std::vector<int64_t>& shape);
// "\"key\" value", as CheckConfigSize and CheckBlockCount name a size.
std::string ConfigSize(const char* key, int64_t value);

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_LAYERS_WEIGHT_LOADER_H_
