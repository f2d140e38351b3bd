#include "server/model/runtime/device_list.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/model/runtime/device.h"

namespace relserve {

absl::StatusOr<std::vector<std::string>> ExpandDeviceList(const std::string& spec) {
  std::vector<std::string> devices;
  for (absl::string_view part : absl::StrSplit(spec, ',')) {
    const std::string item(absl::StripAsciiWhitespace(part));
    if (item.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("device list \"", spec, "\" has an empty item"));
    }
    absl::StatusOr<c10::Device> device = ParseDevice(item);
    if (!device.ok()) return device.status();
    if (item == "cuda") {
      // Every GPU this process sees (ParseDevice has checked there is one).
      for (int i = 0; i < CudaDeviceCount(); ++i) devices.push_back(absl::StrCat("cuda:", i));
    } else {
      devices.push_back(device->str());
    }
  }
  for (const std::string& d : devices) {
    if ((d == "cpu") != (devices.front() == "cpu")) {
      return absl::InvalidArgumentError(
          absl::StrCat("device list \"", spec, "\" mixes the CPU and GPUs; a model runs on one or the other"));
    }
  }
  return devices;
}

}  // namespace relserve
