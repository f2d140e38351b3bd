#ifndef RELSERVE_TESTS_MODEL_MODEL_DIR_BUILDER_H_
#define RELSERVE_TESTS_MODEL_MODEL_DIR_BUILDER_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "server/safetensors/dtype.h"

namespace relserve::testing {

// A tensor held in memory while a test rewrites a checkpoint.
struct HostTensor {
  StDType dtype = StDType::kF32;
  std::vector<int64_t> shape;
  std::string bytes;
};
using TensorMap = std::map<std::string, HostTensor>;

// A scratch copy of a model directory that a test may break on purpose. Removed on destruction.
class ModelDirBuilder {
 public:
  explicit ModelDirBuilder(const std::string& source_dir);
  ~ModelDirBuilder();

  const std::string& dir() const { return dir_; }
  nlohmann::json& config() { return config_; }
  TensorMap& tensors() { return tensors_; }

  // Writes config.json and model.safetensors (or `shards` shard files with an index).
  void Write(int shards = 1) const;
  // Writes raw bytes to a file of the directory (e.g. a truncated model.safetensors).
  void WriteRaw(const std::string& name, const std::string& bytes) const;
  std::string ReadRaw(const std::string& name) const;

 private:
  std::string dir_;
  nlohmann::json config_;
  TensorMap tensors_;
};

}  // namespace relserve::testing

#endif  // RELSERVE_TESTS_MODEL_MODEL_DIR_BUILDER_H_
