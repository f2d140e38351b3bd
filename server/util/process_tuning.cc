#include "server/util/process_tuning.h"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "server/util/flag_table.h"
#include "server/util/malloc_mmap_threshold.h"
#include "server/util/openblas_core.h"

namespace relserve {

absl::StatusOr<AllocatorMode> AllocatorModeFromEnvironment(const GetEnv& getenv) {
  const char* value = getenv("RELSERVE_ALLOCATOR");
  if (value == nullptr || *value == '\0') {
    const char* defaults = getenv("RELSERVE_MALLOC_DEFAULTS");
    return defaults != nullptr && std::string(defaults) == "1" ? AllocatorMode::kSystem : AllocatorMode::kCache;
  }
  const std::string mode = value;
  if (mode == "cache") return AllocatorMode::kCache;
  if (mode == "heap") return AllocatorMode::kHeap;
  if (mode == "system") return AllocatorMode::kSystem;
  return absl::InvalidArgumentError(
      absl::StrCat("RELSERVE_ALLOCATOR=\"", mode, "\": expected cache, heap or system"));
}

namespace {

// libgomp's spin iterations before a thread sleeps (about 100,000 a millisecond, its own estimate).
constexpr char kShortSpinCount[] = "10000";

}  // namespace

std::string AskedFlag(char** argv, const GetEnv& getenv, const std::string& name) {
  const std::string flag = "--" + name;
  std::string value;
  for (int i = 1; argv[i] != nullptr; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind(flag + "=", 0) == 0) value = arg.substr(flag.size() + 1);
    if (arg == flag && argv[i + 1] != nullptr) value = argv[i + 1];
  }
  if (value.empty()) {
    if (const char* env = getenv(FlagVariableName("RELSERVE_", name).c_str()); env != nullptr) value = env;
  }
  return value;
}

std::string AskedDType(char** argv, const GetEnv& getenv) { return AskedFlag(argv, getenv, "dtype"); }

bool ShortSpinFor(const std::string& dtype, bool float32_takes_every_batch, const std::string& float32_gemm) {
  if (dtype == "bfloat16" || dtype == "int8") return true;
  return (dtype.empty() || dtype == "float32") && float32_takes_every_batch && float32_gemm != "blas";
}

void TuneProcessForInference(char** argv, const GetEnv& getenv, bool float32_takes_every_batch) {
  const absl::StatusOr<AllocatorMode> mode = AllocatorModeFromEnvironment(getenv);
  if (!mode.ok()) {
    std::cerr << (argv[0] != nullptr ? argv[0] : "relserve") << ": " << mode.status().message() << "\n";
    std::exit(2);
  }
  const std::string dtype = AskedDType(argv, getenv);
  const bool set_wait = getenv("OMP_WAIT_POLICY") == nullptr;
  const bool set_timeout = getenv("OPENBLAS_THREAD_TIMEOUT") == nullptr && dtype == "int8";
  const bool set_spin = set_wait && getenv("GOMP_SPINCOUNT") == nullptr &&
                        ShortSpinFor(dtype, float32_takes_every_batch, AskedFlag(argv, getenv, "float32-gemm"));
  const std::string blas_core = getenv("OPENBLAS_CORETYPE") == nullptr
                                    ? OpenBlasCoreToForce(LoadedOpenBlasCore(), DetectCpuVectorFeatures())
                                    : std::string();
  if ((set_wait || set_timeout || !blas_core.empty()) && getenv("RELSERVE_NO_REEXEC") == nullptr) {
    if (set_wait) setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    if (set_spin) setenv("GOMP_SPINCOUNT", kShortSpinCount, 1);  // read by libgomp before the policy
    if (set_timeout) setenv("OPENBLAS_THREAD_TIMEOUT", "4", 1);
    if (!blas_core.empty()) setenv("OPENBLAS_CORETYPE", blas_core.c_str(), 1);
    setenv("RELSERVE_NO_REEXEC", "1", 1);  // never loop, whatever happens to the variable
    execv("/proc/self/exe", argv);
    // execv failed: carry on with the spinning policy.
  }
  TuneMalloc(*mode);
}

void TuneMalloc(AllocatorMode mode) {
  if (mode == AllocatorMode::kHeap) {
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, INT_MAX);
  } else if (mode == AllocatorMode::kCache) {
    // Request bodies, parsed JSON and answers of long texts are large and short-lived, and come
    // from whichever HTTP thread took the call: mapped on their own (a fixed threshold, which
    // glibc otherwise raises after each large free), they go back to the system when freed, and
    // the rest is spread over no more arenas than cores, so that a thread's high-water mark does
    // not stay resident (docs/PERFORMANCE.md, "Memory of long texts").
    mallopt(M_MMAP_THRESHOLD, static_cast<int>(kMallocMmapThresholdBytes));
    mallopt(M_ARENA_MAX, static_cast<int>(std::max(2u, std::thread::hardware_concurrency())));
  }
}

}  // namespace relserve
