#ifndef RELSERVE_SERVER_CHECKPOINT_MODEL_CHECKPOINT_H_
#define RELSERVE_SERVER_CHECKPOINT_MODEL_CHECKPOINT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/checkpoint/checkpoint.h"

namespace relserve {

// The weights of a model directory, in the first format present in the order transformers
// looks for them: model.safetensors, model.safetensors.index.json, pytorch_model.bin,
// pytorch_model.bin.index.json. NOT_FOUND naming the directory and the four files when it has
// none of them (or is missing); otherwise the errors of SafetensorsCheckpoint::OpenDirectory or
// PytorchBinCheckpoint::OpenDirectory for the format found. A file that is there but not a
// regular file (a directory, a dangling link) is INVALID_ARGUMENT, not an absent file.
absl::StatusOr<std::unique_ptr<Checkpoint>> OpenModelCheckpoint(const std::string& dir);

}  // namespace relserve

#endif  // RELSERVE_SERVER_CHECKPOINT_MODEL_CHECKPOINT_H_
