#include "server/model/layers/packed_linear.h"

#include <cstring>
#include <string>

#include <ATen/ATen.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "absl/strings/str_cat.h"
#include "server/model/layers/gemm_rows.h"
#include "server/model/layers/layers.h"

namespace relserve {

namespace {

// The epilogue of act and residual for an output of rows x n in `dtype`.
GemmEpilogue EpilogueOf(EpilogueActivation act, const at::Tensor& residual, int64_t rows, int64_t n,
                        at::ScalarType dtype) {
  GemmEpilogue e;
  e.activation = act;
  if (residual.defined()) {
    TORCH_CHECK(residual.device().is_cpu() && residual.scalar_type() == dtype && residual.is_contiguous() &&
                    residual.numel() == rows * n && (residual.dim() == 0 || residual.size(-1) == n),
                "the GEMM's residual: expected a contiguous ", c10::toString(dtype), " CPU tensor of ", rows, " x ", n,
                " values");
    e.residual = residual.data_ptr();
    e.ldr = n;
  }
  return e;
}

}  // namespace

at::Tensor PackedLinearApply(const PackedWeights& weights, const at::Tensor& bias, const at::Tensor& x,
                             EpilogueActivation act, const at::Tensor& residual) {
  TORCH_CHECK(x.scalar_type() == at::kFloat && x.device().is_cpu(), "PackedLinearApply: float32 CPU input expected");
  TORCH_CHECK(x.dim() >= 1 && x.size(-1) == weights.k(), "PackedLinearApply: input of ", x.size(-1),
              " features for a weight of ", weights.k());
  const GemmRows g = AsGemmRows(x, weights.k(), weights.n());
  const GemmEpilogue epilogue = EpilogueOf(act, residual, g.rows, weights.n(), at::kFloat);
  at::Tensor out = at::empty({g.rows, weights.n()}, x.options());
  PackedGemm(g.a.data_ptr<float>(), g.rows, g.lda, weights, bias.defined() ? bias.data_ptr<float>() : nullptr,
             out.data_ptr<float>(), weights.n(), epilogue);
  return out.view(g.out_sizes);
}

at::Tensor PackedBFloat16LinearApply(const PackedBFloat16Weights& weights, const at::Tensor& bias, const at::Tensor& x,
                                     EpilogueActivation act, const at::Tensor& residual) {
  TORCH_CHECK(x.device().is_cpu(), "PackedBFloat16LinearApply: CPU input expected");
  TORCH_CHECK(x.dim() >= 1 && x.size(-1) == weights.k(), "PackedBFloat16LinearApply: input of ", x.size(-1),
              " features for a weight of ", weights.k());
  TORCH_CHECK((act == EpilogueActivation::kNone && !residual.defined()) || x.scalar_type() == at::kBFloat16,
              "PackedBFloat16LinearApply: an activation or residual needs a bfloat16 input");
  const GemmRows g = AsGemmRows(x.to(at::kBFloat16), weights.k(), weights.n());
  const GemmEpilogue epilogue = EpilogueOf(act, residual, g.rows, weights.n(), at::kBFloat16);
  const at::Tensor b = bias.defined() ? bias.to(at::kBFloat16).contiguous() : at::Tensor();
  at::Tensor out = at::empty({g.rows, weights.n()}, g.a.options());
  GemmBFloat16(reinterpret_cast<const uint16_t*>(g.a.data_ptr<at::BFloat16>()), g.rows, g.lda, weights,
               b.defined() ? reinterpret_cast<const uint16_t*>(b.data_ptr<at::BFloat16>()) : nullptr,
               reinterpret_cast<uint16_t*>(out.data_ptr<at::BFloat16>()), weights.n(), PackedBFloat16Weights::Best(),
               epilogue);
  return out.view(g.out_sizes).to(x.scalar_type());
}

int64_t DefaultPackedLinearMaxRows(Float32Kernel kernel, bool amd_cpu) {
  return kernel == Float32Kernel::kAvx512 && !amd_cpu ? kPackedLinearMaxRows : kPackedLinearEveryRow;
}

int64_t DefaultPackedLinearMaxRows(Float32Kernel kernel) { return DefaultPackedLinearMaxRows(kernel, ThisCpuIsAmd()); }

bool Float32TakesEveryBatchByDefault() {
  return PackedWeights::Supported() && DefaultPackedLinearMaxRows(PackedWeights::Best()) == kPackedLinearEveryRow;
}

bool ThisCpuIsAmd() {
#if defined(__x86_64__)
  static const bool amd = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0) return false;
    char vendor[13];
    std::memcpy(vendor, &ebx, 4);
    std::memcpy(vendor + 4, &edx, 4);
    std::memcpy(vendor + 8, &ecx, 4);
    vendor[12] = '\0';
    return std::string(vendor) == "AuthenticAMD";
  }();
  return amd;
#else
  return false;
#endif
}

bool UsePackedLinear(const PackedLinear& packed, const at::Tensor& x) {
  if (packed.bfloat16 != nullptr) return true;
  const int64_t in = x.dim() >= 1 ? x.size(-1) : 1;
  return in > 0 && x.numel() / in <= packed.max_rows;
}

absl::Status PackLinearsFloat32(const std::vector<Linear*>& layers, int64_t max_rows) {
  if (!PackedWeights::Supported()) {
    return absl::FailedPreconditionError(
        "the packed float32 GEMM needs a CPU with AVX-512F, or AVX2 and FMA");
  }
  for (Linear* layer : layers) {
    if (layer == nullptr || layer->packed != nullptr || layer->int8 != nullptr || !layer->weight.defined()) continue;
    const at::Tensor& w = layer->weight;
    if (!w.device().is_cpu() || w.scalar_type() != at::kFloat || w.dim() != 2) {
      return absl::InvalidArgumentError(absl::StrCat("the packed float32 GEMM takes 2-D float32 CPU weights; got ",
                                                     w.dim(), "-D ", std::string(c10::toString(w.scalar_type())),
                                                     " on ", w.device().str()));
    }
    const at::Tensor dense = w.contiguous();
    auto packed = std::make_shared<PackedLinear>();
    packed->weights = PackedWeights::Pack(dense.data_ptr<float>(), dense.size(0), dense.size(1), dense.size(1));
    packed->max_rows = max_rows;
    layer->packed = std::move(packed);
    if (max_rows == kPackedLinearEveryRow) layer->weight = at::Tensor();  // no input reads it again
    if (layer->bias.defined()) layer->bias = layer->bias.contiguous();
  }
  return absl::OkStatus();
}

absl::Status PackLinearsBFloat16(const std::vector<Linear*>& layers) {
  if (!PackedBFloat16Weights::Supported()) {
    return absl::FailedPreconditionError("the bfloat16 GEMM needs a CPU with AVX512-BF16, or AMX-BF16 that the kernel lets this process use");
  }
  for (Linear* layer : layers) {
    if (layer == nullptr || layer->packed != nullptr || layer->int8 != nullptr || !layer->weight.defined()) continue;
    const at::Tensor& w = layer->weight;
    if (!w.device().is_cpu() || w.scalar_type() != at::kBFloat16 || w.dim() != 2) {
      return absl::InvalidArgumentError(absl::StrCat("the bfloat16 GEMM takes 2-D bfloat16 CPU weights; got ", w.dim(),
                                                     "-D ", std::string(c10::toString(w.scalar_type())), " on ",
                                                     w.device().str()));
    }
    if (w.size(0) == 0 || w.size(1) == 0) continue;
    const at::Tensor dense = w.contiguous();
    auto packed = std::make_shared<PackedLinear>();
    packed->bfloat16 = PackedBFloat16Weights::Pack(reinterpret_cast<const uint16_t*>(dense.data_ptr<at::BFloat16>()),
                                                   dense.size(0), dense.size(1), dense.size(1));
    layer->packed = std::move(packed);
    layer->weight = at::Tensor();
    if (layer->bias.defined()) layer->bias = layer->bias.contiguous();
  }
  return absl::OkStatus();
}

}  // namespace relserve
