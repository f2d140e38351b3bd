#include "server/checkpoint/checkpoint.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "server/util/file_util.h"
#include "server/util/json_util.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

// Shard names come from a file we did not write; keep them inside the checkpoint directory.
bool IsSafeRelativePath(const std::string& name) {
  if (name.empty() || name.front() == '/') return false;
  for (absl::string_view part : absl::StrSplit(name, '/')) {
    if (part == "..") return false;
  }
  return true;
}

// Returns weight_map: tensor name -> shard file name.
absl::StatusOr<std::map<std::string, std::string>> ReadWeightMap(const std::string& index_path) {
  ASSIGN_OR_RETURN(nlohmann::json index, ReadJsonFile(index_path));
  auto invalid = [&](absl::string_view problem) {
    return absl::InvalidArgumentError(absl::StrCat(index_path, ": ", problem));
  };
  if (!index.is_object()) return invalid("index is not a JSON object");
  auto it = index.find("weight_map");
  if (it == index.end()) return invalid("missing 'weight_map'");
  if (!it->is_object()) return invalid("'weight_map' is not an object");
  if (it->empty()) return invalid("'weight_map' is empty");
  std::map<std::string, std::string> weight_map;
  for (const auto& item : it->items()) {
    if (!item.value().is_string()) {
      return invalid(
          absl::StrCat("weight_map entry for tensor '", item.key(), "' is not a file name"));
    }
    std::string shard = item.value().get<std::string>();
    if (!IsSafeRelativePath(shard)) {
      return invalid(absl::StrCat("weight_map entry for tensor '", item.key(), "' names '", shard,
                                  "', which is not a relative path inside the directory"));
    }
    weight_map.emplace(item.key(), std::move(shard));
  }
  return weight_map;
}

}  // namespace

absl::Status Checkpoint::AddShards(const std::string& index_path, const ShardOpener& open_shard) {
  ASSIGN_OR_RETURN(auto weight_map, ReadWeightMap(index_path));
  // Open each shard once, in name order so that file_names() and error messages are
  // deterministic.
  std::map<std::string, std::string> first_tensor_of_shard;
  for (const auto& [tensor, shard] : weight_map) first_tensor_of_shard.emplace(shard, tensor);
  for (const auto& [shard, tensor] : first_tensor_of_shard) {
    auto tensors = open_shard(JoinPath(dir_, shard));
    if (!tensors.ok()) {
      return absl::Status(tensors.status().code(),
                          absl::StrCat(index_path, ": shard '", shard, "' (holding tensor '",
                                       tensor, "'): ", tensors.status().message()));
    }
    RETURN_IF_ERROR(AddTensors(**tensors, shard));
  }
  for (const auto& [tensor, shard] : weight_map) {
    auto it = by_name_.find(tensor);
    if (it == by_name_.end() || labels_[it->second.file] != shard) {
      return absl::DataLossError(absl::StrCat(index_path, ": tensor '", tensor,
                                              "' is listed in shard '", shard,
                                              "' but that shard does not hold it"));
    }
  }
  return absl::OkStatus();
}

absl::Status Checkpoint::AddTensors(const std::vector<TensorView>& tensors,
                                    const std::string& label) {
  const size_t file_index = labels_.size();
  for (const TensorView& view : tensors) {
    auto [it, inserted] = by_name_.emplace(view.name, Located{&view, file_index});
    if (!inserted) {
      return absl::InvalidArgumentError(
          absl::StrCat(dir_, ": tensor '", view.name, "' is in both shard '",
                       labels_[it->second.file], "' and shard '", label, "'"));
    }
  }
  labels_.push_back(label);
  return absl::OkStatus();
}

const TensorView* Checkpoint::Find(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second.view;
}

absl::StatusOr<const TensorView*> Checkpoint::Get(std::string_view name) const {
  const TensorView* view = Find(name);
  if (view == nullptr) {
    return absl::NotFoundError(
        absl::StrCat(dir_, ": checkpoint has no tensor named '", std::string(name), "'"));
  }
  return view;
}

std::vector<std::string> Checkpoint::Names() const {
  std::vector<std::string> names;
  names.reserve(by_name_.size());
  for (const auto& entry : by_name_) names.push_back(entry.first);  // std::map: already sorted
  return names;
}

}  // namespace relserve
