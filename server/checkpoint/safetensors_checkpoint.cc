#include "server/checkpoint/safetensors_checkpoint.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/util/file_util.h"
#include "server/util/status_macros.h"

namespace relserve {

absl::StatusOr<std::unique_ptr<SafetensorsCheckpoint>> SafetensorsCheckpoint::OpenDirectory(
    const std::string& dir) {
  if (!IsDirectory(dir)) return absl::NotFoundError(absl::StrCat(dir, ": no such directory"));
  std::unique_ptr<SafetensorsCheckpoint> checkpoint(new SafetensorsCheckpoint(dir));
  SafetensorsCheckpoint* self = checkpoint.get();
  auto open = [self](const std::string& path) -> absl::StatusOr<const std::vector<TensorView>*> {
    ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file, SafetensorsFile::Open(path));
    self->files_.push_back(std::move(file));
    return &self->files_.back()->tensors();
  };

  const std::string single = JoinPath(dir, kSingleFile);
  const std::string index = JoinPath(dir, kIndexFile);
  ASSIGN_OR_RETURN(const bool has_single, OptionalFileExists(single));
  if (has_single) {
    ASSIGN_OR_RETURN(const std::vector<TensorView>* tensors, open(single));
    RETURN_IF_ERROR(checkpoint->AddTensors(*tensors, kSingleFile));
    return checkpoint;
  }
  ASSIGN_OR_RETURN(const bool has_index, OptionalFileExists(index));
  if (!has_index) {
    return absl::NotFoundError(
        absl::StrCat(dir, ": has neither ", kSingleFile, " nor ", kIndexFile));
  }
  RETURN_IF_ERROR(checkpoint->AddShards(index, open));
  return checkpoint;
}

}  // namespace relserve
