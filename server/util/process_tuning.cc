#include "server/util/process_tuning.h"

#include <malloc.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>

namespace relserve {

void TuneProcessForInference(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") == nullptr && std::getenv("RELSERVE_NO_REEXEC") == nullptr) {
    setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    setenv("RELSERVE_NO_REEXEC", "1", 1);  // never loop, whatever happens to the variable
    execv("/proc/self/exe", argv);
    // execv failed: carry on with the spinning policy.
  }
  if (std::getenv("RELSERVE_MALLOC_DEFAULTS") == nullptr) {
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, INT_MAX);
  }
}

}  // namespace relserve
