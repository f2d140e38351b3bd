#include "server/model/cpu_gemm_choice.h"

namespace relserve {

const std::vector<CpuGemmChoice>& CpuGemmChoices() {
  static const std::vector<CpuGemmChoice> kChoices = {
      {"float32-gemm", "blas", &EngineKernels::packed_float32_gemm,
       "under --dtype float32 on the CPU: auto packs the encoder's and the output heads' weights once at load for "
       "relserve's GEMM: in AVX-512 registers where the CPU has AVX-512F, which every batch takes on AMD CPUs and "
       "batches of at most 192 tokens on Intel ones (longer ones: LibTorch's BLAS, on the weights as loaded, kept "
       "beside); else in AVX2 registers where it has "
       "AVX2 and FMA, which every batch takes (the weights as loaded are released); blas: LibTorch's BLAS (OpenBLAS) "
       "always, and no packed copy of the weights"},
      {"bfloat16-gemm", "onednn", &EngineKernels::packed_bfloat16_gemm,
       "under --dtype bfloat16 on the CPU: auto packs the encoder's weights once at load, in place of the weights as "
       "loaded, for relserve's GEMM in AMX tiles where the CPU has AMX-BF16, else in AVX-512 registers where it has "
       "AVX512-BF16 (AMD Zen 4, Intel Cooper Lake); onednn: LibTorch's linear (oneDNN, "
       "which reorders the weights on every call)"},
      {"int8-gemm", "onednn", &EngineKernels::packed_int8_gemm,
       "under --dtype int8 on the CPU: auto quantizes and packs the encoder's weights once at load for relserve's "
       "int8 GEMM, in AMX tiles where the CPU has AMX-INT8, else in AVX-512 VNNI registers where it has those, else "
       "in AVX2 registers with 7-bit weights unless --int8-weight-bits 8 (each token quantized with its own scale, so "
       "a sequence's answer does not depend on its batch); onednn, or a CPU with none of them: LibTorch's oneDNN "
       "quantized linear (one scale per batch)"},
  };
  return kChoices;
}

std::string CpuGemmValueName(const CpuGemmChoice& choice) { return "auto|" + choice.fallback; }

}  // namespace relserve
