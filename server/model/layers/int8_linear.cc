#include "server/model/layers/int8_linear.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/quantized/PackedParams.h>

#include "absl/strings/str_cat.h"
#include "server/model/kernels/amx_gemm.h"
#include "server/model/layers/gemm_rows.h"
#include "server/model/layers/layers.h"
#include "server/util/status_macros.h"

namespace relserve {

struct Int8Weights {
  c10::intrusive_ptr<LinearPackedParamsBase> packed;  // Int8Gemm::kOneDnn
  std::shared_ptr<const PackedInt8Weights> packed_int8;  // Int8Gemm::kAmx, kVnni and kAvx2
  Int8Kernel kernel = Int8Kernel::kAmx;
  at::Tensor bias;  // kAmx, kVnni, kAvx2: float32, contiguous, or undefined
};

absl::Status EnableInt8Engine() {
  const auto& engines = at::globalContext().supportedQEngines();
  for (at::QEngine e : engines) {
    if (e == at::QEngine::ONEDNN) {
      at::globalContext().setQEngine(at::QEngine::ONEDNN);
      return absl::OkStatus();
    }
  }
  return absl::FailedPreconditionError(
      "int8 needs LibTorch's oneDNN quantized engine, which this LibTorch was built without");
}

namespace {

Int8Kernel KernelOf(Int8Gemm gemm) {
  return gemm == Int8Gemm::kAmx ? Int8Kernel::kAmx : gemm == Int8Gemm::kVnni ? Int8Kernel::kVnni : Int8Kernel::kAvx2;
}

}  // namespace

absl::StatusOr<int> Int8WeightLevel(Int8Gemm gemm, Int8WeightBits bits) {
  const bool seven_bit_gemm = gemm == Int8Gemm::kAvx2 || (gemm == Int8Gemm::kOneDnn && OneDnnInt8SevenBitWeights());
  switch (bits) {
    case Int8WeightBits::kSeven:
      return PackedInt8Weights::kSevenBitLevel;
    case Int8WeightBits::kEight:
      if (gemm == Int8Gemm::kOneDnn && OneDnnInt8SevenBitWeights()) {
        return absl::InvalidArgumentError(
            "--int8-weight-bits 8: oneDNN's int8 linear on this CPU (no VNNI) sums pairs of products in 16 bits, "
            "which 8-bit weights would saturate; use --int8-gemm auto (relserve's exact AVX2 kernel) or 7 or auto bits");
      }
      return PackedInt8Weights::kEightBitLevel;
    case Int8WeightBits::kAuto:
      break;
  }
  return seven_bit_gemm ? PackedInt8Weights::kSevenBitLevel : PackedInt8Weights::kEightBitLevel;
}

std::shared_ptr<const Int8Weights> QuantizeInt8(const at::Tensor& weight, const at::Tensor& bias, Int8Gemm gemm,
                                                Int8WeightBits bits) {
  const absl::StatusOr<int> level = Int8WeightLevel(gemm, bits);
  TORCH_CHECK(level.ok(), std::string(level.status().message()));
  const at::Tensor w = weight.to(at::kFloat).contiguous();
  if (gemm != Int8Gemm::kOneDnn) {
    auto out = std::make_shared<Int8Weights>();
    out->kernel = KernelOf(gemm);
    out->packed_int8 = PackedInt8Weights::Quantize(w.data_ptr<float>(), w.size(0), w.size(1), w.size(1), *level);
    if (bias.defined()) out->bias = bias.to(at::kFloat).contiguous();
    return out;
  }
  // One symmetric scale per output channel; an all-zero row keeps scale 1 (its int8 is 0). Without
  // VNNI the weights take 7 bits (OneDnnInt8SevenBitWeights).
  at::Tensor amax = w.abs().amax({1});
  const double qmax = *level;
  at::Tensor scales = at::where(amax > 0, amax / qmax, at::ones_like(amax)).to(at::kDouble);
  at::Tensor zero_points = at::zeros({w.size(0)}, at::kLong);
  at::Tensor qw = at::quantize_per_channel(w, scales, zero_points, /*axis=*/0, at::kQInt8);
  static const auto prepack =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("quantized::linear_prepack", "")
          .typed<c10::intrusive_ptr<LinearPackedParamsBase>(at::Tensor, c10::optional<at::Tensor>)>();
  c10::optional<at::Tensor> b;
  if (bias.defined()) b = bias.to(at::kFloat).contiguous();
  auto out = std::make_shared<Int8Weights>();
  out->packed = prepack.call(qw, b);
  return out;
}

at::Tensor Int8Apply(const Int8Weights& weights, const at::Tensor& x) {
  if (weights.packed_int8 != nullptr) {
    const PackedInt8Weights& w = *weights.packed_int8;
    TORCH_CHECK(x.device().is_cpu(), "Int8Apply: CPU input expected");
    TORCH_CHECK(x.dim() >= 1 && x.size(-1) == w.k(), "Int8Apply: input of ", x.size(-1), " features for a weight of ",
                w.k());
    const GemmRows g = AsGemmRows(x.to(at::kFloat), w.k(), w.n());
    at::Tensor out = at::empty({g.rows, w.n()}, g.a.options());
    GemmInt8(g.a.data_ptr<float>(), g.rows, g.lda, w, weights.bias.defined() ? weights.bias.data_ptr<float>() : nullptr,
             out.data_ptr<float>(), w.n(), weights.kernel);
    return out.view(g.out_sizes);
  }
  return weights.packed->apply_dynamic(x.contiguous(), /*reduce_range=*/false);
}

bool OneDnnInt8SevenBitWeights() {
#if defined(__x86_64__)
  static const bool vnni = __builtin_cpu_supports("avx512vnni") || __builtin_cpu_supports("avxvnni");
  return !vnni;
#else
  return false;
#endif
}

Int8Gemm ChooseInt8Gemm(bool own) {
  if (!own) return Int8Gemm::kOneDnn;
  if (PackedInt8Weights::Supported()) return Int8Gemm::kAmx;
  if (PackedInt8Weights::VnniSupported()) return Int8Gemm::kVnni;
  if (PackedInt8Weights::Avx2Supported()) return Int8Gemm::kAvx2;
  return Int8Gemm::kOneDnn;
}

const char* Int8GemmName(Int8Gemm gemm) {
  switch (gemm) {
    case Int8Gemm::kAmx:
      return "relserve-amx-int8";
    case Int8Gemm::kVnni:
      return "relserve-vnni-int8";
    case Int8Gemm::kAvx2:
      return "relserve-avx2-int8";
    case Int8Gemm::kOneDnn:
      break;
  }
  return "onednn-int8";
}

absl::Status QuantizeLinearsInt8(const std::vector<Linear*>& layers, Int8Gemm gemm, Int8WeightBits bits) {
  if (gemm == Int8Gemm::kAmx && !PackedInt8Weights::Supported()) {
    return absl::FailedPreconditionError("the int8 GEMM in AMX tiles needs a CPU with AMX-INT8 that the kernel lets this process use");
  }
  if (gemm == Int8Gemm::kVnni && !PackedInt8Weights::VnniSupported()) {
    return absl::FailedPreconditionError("the int8 GEMM on AVX-512 VNNI needs a CPU with AVX-512 VNNI");
  }
  if (gemm == Int8Gemm::kAvx2 && !PackedInt8Weights::Avx2Supported()) {
    return absl::FailedPreconditionError("the int8 GEMM on AVX2 needs an x86-64 CPU with AVX2 and FMA");
  }
  RETURN_IF_ERROR(Int8WeightLevel(gemm, bits).status());
  for (Linear* layer : layers) {
    if (layer == nullptr || layer->int8 != nullptr || !layer->weight.defined()) continue;
    if (!layer->weight.device().is_cpu()) {
      return absl::InvalidArgumentError(
          absl::StrCat("int8 runs on the CPU only; the weights are on ", layer->weight.device().str()));
    }
    if (layer->weight.dim() != 2 || layer->weight.size(0) == 0 || layer->weight.size(1) == 0) continue;
    layer->int8 = QuantizeInt8(layer->weight, layer->bias, gemm, bits);
    layer->weight = at::Tensor();
    layer->bias = at::Tensor();
  }
  return absl::OkStatus();
}

}  // namespace relserve
