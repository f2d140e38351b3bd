#ifndef RELSERVE_SERVER_MODEL_RUNTIME_DEVICE_LIST_H_
#define RELSERVE_SERVER_MODEL_RUNTIME_DEVICE_LIST_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace relserve {

// The devices of --device, one copy of each model per item: "cpu"; "cuda:0,cuda:1"; "cuda", every
// visible GPU; a device listed twice runs two copies on it. Each item as ParseDevice takes it
// (its errors, naming the item); INVALID_ARGUMENT for an empty item, or the CPU and GPUs mixed.
// Torch-free, for the server's start-up.
absl::StatusOr<std::vector<std::string>> ExpandDeviceList(const std::string& spec);

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_RUNTIME_DEVICE_LIST_H_
