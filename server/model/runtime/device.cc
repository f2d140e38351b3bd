#include "server/model/runtime/device.h"

#include <map>

#include "absl/strings/str_cat.h"

#ifdef RELSERVE_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace relserve {

bool CudaCompiledIn() {
#ifdef RELSERVE_WITH_CUDA
  return true;
#else
  return false;
#endif
}

int CudaDeviceCount() {
#ifdef RELSERVE_WITH_CUDA
  return static_cast<int>(c10::cuda::device_count());
#else
  return 0;
#endif
}

absl::StatusOr<c10::Device> ParseDevice(const std::string& name) {
  if (name == "cpu") return c10::Device(c10::kCPU);
  int index = 0;
  if (name != "cuda") {
    const std::string prefix = "cuda:";
    const std::string digits = name.substr(name.size() > prefix.size() ? prefix.size() : name.size());
    if (name.compare(0, prefix.size(), prefix) != 0 || digits.empty() || digits.size() > 3 ||
        digits.find_first_not_of("0123456789") != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("device \"", name, "\" is not one of cpu, cuda, cuda:N"));
    }
    index = std::stoi(digits);
  }
  if (!CudaCompiledIn()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "device \"", name, "\": this build of relserve has no CUDA support (it links a CPU-only "
        "LibTorch; build against a CUDA LibTorch, as Dockerfile.cuda does)"));
  }
  const int count = CudaDeviceCount();
  if (index >= count) {
    return absl::FailedPreconditionError(absl::StrCat("device \"", name, "\": ",
                                                      count == 0 ? "no CUDA device is visible"
                                                                 : absl::StrCat("only ", count, " CUDA device",
                                                                                count == 1 ? " is" : "s are",
                                                                                " visible")));
  }
  return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(index));
}

#ifdef RELSERVE_WITH_CUDA

struct DeviceStreamScope::Impl {
  explicit Impl(c10::cuda::CUDAStream stream) : guard(stream) {}
  c10::cuda::CUDAStreamGuard guard;
};

DeviceStreamScope::DeviceStreamScope(const c10::Device& device) {
  if (!device.is_cuda()) return;
  thread_local std::map<int, c10::cuda::CUDAStream> streams;
  const int index = device.has_index() ? device.index() : 0;
  auto it = streams.find(index);
  if (it == streams.end()) {
    it = streams.emplace(index, c10::cuda::getStreamFromPool(/*isHighPriority=*/false,
                                                            static_cast<c10::DeviceIndex>(index)))
             .first;
  }
  impl_ = std::make_unique<Impl>(it->second);
}

void SynchronizeDevice(const c10::Device& device) {
  if (!device.is_cuda()) return;
  c10::cuda::CUDAGuard guard(device);
  c10::cuda::device_synchronize();
}

void ReleaseCachedDeviceMemory(const c10::Device& device) {
  if (!device.is_cuda()) return;
  c10::cuda::CUDACachingAllocator::emptyCache();
}

#else

struct DeviceStreamScope::Impl {};
DeviceStreamScope::DeviceStreamScope(const c10::Device&) {}
void SynchronizeDevice(const c10::Device&) {}
void ReleaseCachedDeviceMemory(const c10::Device&) {}

#endif

DeviceStreamScope::~DeviceStreamScope() = default;

}  // namespace relserve
