#include "server/model/model_flops.h"

#include <algorithm>
#include <chrono>
#include <string>

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include "server/model/runtime/device.h"
#include "server/model/families/family_descriptor.h"
#include "server/model/layers/int8_linear.h"

namespace relserve {

double EncoderFlopsPerToken(const ModelConfig& config, int64_t length) {
  return config.family == nullptr ? 0 : config.family->FlopsPerToken(config, length);
}

double MeasureMatmulFlops(DType dtype, int64_t n, double seconds, const std::string& device_name) {
  c10::InferenceMode guard;
  const at::ScalarType t = dtype == DType::kBFloat16 ? at::kBFloat16 : dtype == DType::kFloat16 ? at::kHalf : at::kFloat;
  auto device = ParseDevice(device_name);
  if (!device.ok()) return 0;
  DeviceStreamScope stream(*device);
  // Random data: a product of zeros runs faster than real data on some GPUs.
  at::Tensor a = at::randn({n, n}).to(*device, t), b = at::randn({n, n}).to(*device, t);
  // int8: the encoder's dynamically quantized product (int8_linear.h), activation quantization
  // included, as the engine runs it.
  std::shared_ptr<const Int8Weights> int8;
  if (dtype == DType::kInt8) {
    if (!device->is_cpu()) return 0;
    const Int8Gemm gemm = ChooseInt8Gemm(/*own=*/true);
    if (gemm == Int8Gemm::kOneDnn && !EnableInt8Engine().ok()) return 0;
    int8 = QuantizeInt8(b, at::Tensor(), gemm);
  }
  at::Tensor c = int8 ? Int8Apply(*int8, a) : at::mm(a, b);  // warm-up: thread pools, packing, kernels
  SynchronizeDevice(*device);
  using Clock = std::chrono::steady_clock;
  int iters = 0;
  const auto start = Clock::now();
  double elapsed = 0;
  // A GPU queues products ahead of the host: rounds of several, each waited for.
  const int per_round = device->is_cpu() ? 1 : 20;
  do {
    for (int i = 0; i < per_round; ++i) {
      if (int8) {
        c = Int8Apply(*int8, a);
      } else {
        at::mm_out(c, a, b);
      }
    }
    SynchronizeDevice(*device);
    iters += per_round;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  } while (elapsed < seconds);
  return 2.0 * n * n * n * iters / elapsed;
}

}  // namespace relserve
