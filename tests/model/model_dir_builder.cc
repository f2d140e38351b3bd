#include "tests/model/model_dir_builder.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "server/checkpoint/safetensors_checkpoint.h"
#include "server/safetensors/safetensors_writer.h"
#include "server/util/file_util.h"
#include "server/util/json_util.h"

namespace relserve::testing {
namespace fs = std::filesystem;

ModelDirBuilder::ModelDirBuilder(const std::string& source_dir) {
  std::string tmpl = (fs::temp_directory_path() / "relserve-model-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  dir_ = tmpl;
  auto config = ReadJsonFile(source_dir + "/config.json");
  if (!config.ok()) throw std::runtime_error(std::string(config.status().message()));
  config_ = *config;
  auto checkpoint = SafetensorsCheckpoint::OpenDirectory(source_dir);
  if (!checkpoint.ok()) throw std::runtime_error(std::string(checkpoint.status().message()));
  for (const std::string& name : (*checkpoint)->Names()) {
    const TensorView* v = (*checkpoint)->Find(name);
    tensors_[name] = HostTensor{v->dtype, v->shape, std::string(reinterpret_cast<const char*>(v->data), v->nbytes)};
  }
}

ModelDirBuilder::~ModelDirBuilder() {
  RemoveTree(dir_);
}

void ModelDirBuilder::Write(int shards) const {
  if (!WriteStringToFile(dir_ + "/config.json", config_.dump(2)).ok()) throw std::runtime_error("write config");
  for (const auto& entry : fs::directory_iterator(dir_)) {
    if (entry.path().filename().string().find("model") == 0) fs::remove(entry.path());
  }
  std::vector<SafetensorsWriter> writers(shards);
  nlohmann::json weight_map = nlohmann::json::object();
  int i = 0;
  for (const auto& [name, t] : tensors_) {
    const int shard = i++ % shards;
    if (!writers[shard].Add(name, t.dtype, t.shape, t.bytes.data(), t.bytes.size()).ok()) {
      throw std::runtime_error("add " + name);
    }
    weight_map[name] = "model-0000" + std::to_string(shard + 1) + "-of-0000" + std::to_string(shards) + ".safetensors";
  }
  if (shards == 1) {
    if (!writers[0].WriteFile(dir_ + "/model.safetensors").ok()) throw std::runtime_error("write weights");
    return;
  }
  for (int s = 0; s < shards; ++s) {
    const std::string file = "model-0000" + std::to_string(s + 1) + "-of-0000" + std::to_string(shards) + ".safetensors";
    if (!writers[s].WriteFile(dir_ + "/" + file).ok()) throw std::runtime_error("write shard");
  }
  nlohmann::json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}};
  WriteRaw("model.safetensors.index.json", index.dump(2));
}

void ModelDirBuilder::WriteRaw(const std::string& name, const std::string& bytes) const {
  if (!WriteStringToFile(dir_ + "/" + name, bytes).ok()) throw std::runtime_error("write " + name);
}

std::string ModelDirBuilder::ReadRaw(const std::string& name) const {
  auto s = ReadFileToString(dir_ + "/" + name);
  if (!s.ok()) throw std::runtime_error(std::string(s.status().message()));
  return *s;
}

}  // namespace relserve::testing
