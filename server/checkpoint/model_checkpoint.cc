#include "server/checkpoint/model_checkpoint.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/checkpoint/pytorch_bin_checkpoint.h"
#include "server/checkpoint/safetensors_checkpoint.h"
#include "server/util/file_util.h"
#include "server/util/status_macros.h"

namespace relserve {

absl::StatusOr<std::unique_ptr<Checkpoint>> OpenModelCheckpoint(const std::string& dir) {
  if (!IsDirectory(dir)) return absl::NotFoundError(absl::StrCat(dir, ": no such directory"));
  for (const char* name : {SafetensorsCheckpoint::kSingleFile, SafetensorsCheckpoint::kIndexFile}) {
    ASSIGN_OR_RETURN(const bool present, OptionalFileExists(JoinPath(dir, name)));
    if (present) return SafetensorsCheckpoint::OpenDirectory(dir);
  }
  for (const char* name : {PytorchBinCheckpoint::kSingleFile, PytorchBinCheckpoint::kIndexFile}) {
    ASSIGN_OR_RETURN(const bool present, OptionalFileExists(JoinPath(dir, name)));
    if (present) return PytorchBinCheckpoint::OpenDirectory(dir);
  }
  return absl::NotFoundError(absl::StrCat(dir, ": holds no weights: none of ", SafetensorsCheckpoint::kSingleFile,
                                          ", ", SafetensorsCheckpoint::kIndexFile, ", ",
                                          PytorchBinCheckpoint::kSingleFile, " or ", PytorchBinCheckpoint::kIndexFile));
}

}  // namespace relserve
