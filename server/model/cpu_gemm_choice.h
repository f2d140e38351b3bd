#ifndef RELSERVE_SERVER_MODEL_CPU_GEMM_CHOICE_H_
#define RELSERVE_SERVER_MODEL_CPU_GEMM_CHOICE_H_

#include <string>
#include <vector>

#include "server/model/engine.h"

namespace relserve {

// What runs each precision's projections on the CPU, as relserve's and relserve-model's flags
// choose it: --float32-gemm auto|blas, --bfloat16-gemm auto|onednn, --int8-gemm auto|onednn. "auto"
// is relserve's own GEMM where the CPU has what it needs (the EngineKernels field `own` true), the
// other word the library's (false). One table, so that both programs name, explain and read them
// alike.
struct CpuGemmChoice {
  std::string flag;          // "float32-gemm"
  std::string fallback;      // the word for the library's GEMM: "blas" or "onednn"
  bool EngineKernels::*own;  // true for "auto"
  std::string help;
};

const std::vector<CpuGemmChoice>& CpuGemmChoices();

// "auto|blas": the flag's value words.
std::string CpuGemmValueName(const CpuGemmChoice& choice);

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_CPU_GEMM_CHOICE_H_
