#ifndef RELSERVE_SERVER_UTIL_OPENBLAS_CORE_H_
#define RELSERVE_SERVER_UTIL_OPENBLAS_CORE_H_

#include <string>

namespace relserve {

// OpenBLAS (Debian 12 ships 0.3.21, built with DYNAMIC_ARCH) picks its kernels by the CPU's
// family and model when it loads. A model it does not know gets its generic "Prescott" kernels
// (SSE3), whatever the CPU can do: on an Emerald Rapids Xeon (family 6, model 207) float32 GEMMs
// ran at about a quarter of the speed of the AVX-512 kernels the same library holds
// (docs/PERFORMANCE.md, "OpenBLAS's kernels on CPUs it does not know"). OPENBLAS_CORETYPE, read
// when the library loads, names the kernels instead.

// What the CPU offers that OpenBLAS has kernels for.
struct CpuVectorFeatures {
  bool avx2_fma = false;  // Haswell's kernels
  bool avx512 = false;    // AVX-512 F, CD, BW, DQ and VL: SkylakeX's kernels
};

// This CPU's features (cpuid, through the compiler's builtins).
CpuVectorFeatures DetectCpuVectorFeatures();

// The OPENBLAS_CORETYPE value to set given the name of the kernels OpenBLAS loaded (as
// openblas_get_corename() returns it; compared without case) and the CPU's features: "SKYLAKEX"
// or "HASWELL" when OpenBLAS fell back to "Prescott" on a CPU with AVX-512 or AVX2 and FMA;
// empty otherwise (OpenBLAS knew the CPU, or it is not OpenBLAS: empty name).
std::string OpenBlasCoreToForce(const std::string& loaded_core, const CpuVectorFeatures& cpu);

// The name of the kernels the OpenBLAS of this process uses (openblas_get_corename, looked up
// at run time); empty when the BLAS is not OpenBLAS.
std::string LoadedOpenBlasCore();

}  // namespace relserve

#endif  // RELSERVE_SERVER_UTIL_OPENBLAS_CORE_H_
