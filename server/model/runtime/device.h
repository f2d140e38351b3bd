#ifndef RELSERVE_SERVER_MODEL_RUNTIME_DEVICE_H_
#define RELSERVE_SERVER_MODEL_RUNTIME_DEVICE_H_

#include <memory>
#include <string>

#include <c10/core/Device.h>

#include "absl/status/statusor.h"

namespace relserve {

// True when this build links a CUDA LibTorch (the Debian LibTorch is CPU only).
bool CudaCompiledIn();
// CUDA devices this process can use (0 without CUDA).
int CudaDeviceCount();

// "cpu", "cuda" (device 0) or "cuda:N". FAILED_PRECONDITION when the build has no CUDA or
// the device is not there; INVALID_ARGUMENT for anything else.
absl::StatusOr<c10::Device> ParseDevice(const std::string& name);

// While alive, the calling thread's work on `device` is queued on a stream of its own (one per
// thread and device, taken once from LibTorch's pool) with `device` current, so that workers
// sharing a GPU overlap instead of serialising on the default stream. Nothing on the CPU.
class DeviceStreamScope {
 public:
  explicit DeviceStreamScope(const c10::Device& device);
  ~DeviceStreamScope();
  DeviceStreamScope(const DeviceStreamScope&) = delete;
  DeviceStreamScope& operator=(const DeviceStreamScope&) = delete;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Waits until everything queued on `device` by any stream has run: after loading weights, and
// after filling a cache that other threads' streams then read. Nothing on the CPU.
void SynchronizeDevice(const c10::Device& device);

// Frees the cached blocks of the device's allocator (after an out-of-memory error, so that a
// split batch finds the memory). Nothing on the CPU.
void ReleaseCachedDeviceMemory(const c10::Device& device);

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_RUNTIME_DEVICE_H_
