#include "server/util/openblas_core.h"

#include <dlfcn.h>

#include "absl/strings/ascii.h"

namespace relserve {

CpuVectorFeatures DetectCpuVectorFeatures() {
  CpuVectorFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  f.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  f.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vl");
#endif
  return f;
}

std::string OpenBlasCoreToForce(const std::string& loaded_core, const CpuVectorFeatures& cpu) {
  if (absl::AsciiStrToLower(loaded_core) != "prescott") return "";
  if (cpu.avx512) return "SKYLAKEX";
  if (cpu.avx2_fma) return "HASWELL";
  return "";
}

std::string LoadedOpenBlasCore() {
  using CoreNameFn = char* (*)();
  auto fn = reinterpret_cast<CoreNameFn>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  if (fn == nullptr) return "";
  const char* name = fn();
  return name != nullptr ? std::string(name) : std::string();
}

}  // namespace relserve
