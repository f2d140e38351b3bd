#include "server/model/layers/relative_position.h"

#include <cmath>

#include <ATen/ATen.h>

namespace relserve {
namespace {

// make_log_bucket_position, op for op.
at::Tensor MakeLogBucketPosition(const at::Tensor& relative_pos, int64_t bucket_size, int64_t max_position) {
  at::Tensor sign = at::sign(relative_pos);
  const int64_t mid = bucket_size / 2;
  at::Tensor abs_pos = at::where((relative_pos < mid) & (relative_pos > -mid),
                                 at::scalar_tensor(mid - 1, relative_pos.options()), at::abs(relative_pos));
  // torch.tensor((max_position - 1) / mid) is a float32 scalar tensor.
  at::Tensor denom = at::log(at::scalar_tensor(static_cast<double>(max_position - 1) / mid, at::kFloat));
  at::Tensor log_pos = at::ceil(at::log(at::div(abs_pos, mid)) / denom * (mid - 1)) + mid;
  return at::where(abs_pos <= mid, relative_pos.to(log_pos.scalar_type()), log_pos * sign);
}

}  // namespace

at::Tensor DebertaRelativePosition(int64_t query_size, int64_t key_size, int64_t bucket_size,
                                   int64_t max_position) {
  at::Tensor q_ids = at::arange(query_size, at::kLong);
  at::Tensor k_ids = at::arange(key_size, at::kLong);
  at::Tensor rel = q_ids.unsqueeze(1) - k_ids.unsqueeze(0);
  if (bucket_size > 0 && max_position > 0) rel = MakeLogBucketPosition(rel, bucket_size, max_position);
  return rel.to(at::kLong);
}

at::Tensor T5RelativePositionBucket(int64_t query_len, int64_t key_len, int64_t num_buckets,
                                    int64_t max_distance) {
  at::Tensor context = at::arange(query_len, at::kLong).unsqueeze(1);
  at::Tensor memory = at::arange(key_len, at::kLong).unsqueeze(0);
  at::Tensor relative_position = memory - context;

  num_buckets /= 2;  // bidirectional
  at::Tensor buckets = (relative_position > 0).to(at::kLong) * num_buckets;
  relative_position = at::abs(relative_position);
  const int64_t max_exact = num_buckets / 2;
  at::Tensor is_small = relative_position < max_exact;
  // math.log(max_distance / max_exact) is a Python float; the rest is float32 tensor math.
  const double log_ratio = std::log(static_cast<double>(max_distance) / max_exact);
  at::Tensor if_large =
      max_exact + (at::log(relative_position.to(at::kFloat) / max_exact) / log_ratio * (num_buckets - max_exact))
                      .to(at::kLong);
  if_large = at::min(if_large, at::full_like(if_large, num_buckets - 1));
  return buckets + at::where(is_small, relative_position, if_large);
}

}  // namespace relserve
