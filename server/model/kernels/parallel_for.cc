#include "server/model/kernels/parallel_for.h"

#include <ATen/Parallel.h>

namespace relserve {

void ParallelFor(int64_t begin, int64_t end, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  at::parallel_for(begin, end, grain, [&](int64_t b, int64_t e) { fn(b, e); });
}

}  // namespace relserve
