#ifndef RELSERVE_SERVER_MODEL_LAYERS_RELATIVE_POSITION_H_
#define RELSERVE_SERVER_MODEL_LAYERS_RELATIVE_POSITION_H_

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace relserve {

// transformers.models.deberta_v2.modeling_deberta_v2.build_relative_position (with
// make_log_bucket_position when bucket_size > 0): int64 [query_size, key_size] holding the
// (bucketed) distance query - key. The logarithm runs in float32, as the reference's does,
// so that bucket boundaries land on the same side.
at::Tensor DebertaRelativePosition(int64_t query_size, int64_t key_size, int64_t bucket_size,
                                   int64_t max_position);

// transformers.models.t5.modeling_t5.T5Attention._relative_position_bucket for the encoder
// (bidirectional), applied to memory - context positions: int64 [query_len, key_len].
at::Tensor T5RelativePositionBucket(int64_t query_len, int64_t key_len, int64_t num_buckets,
                                    int64_t max_distance);

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_LAYERS_RELATIVE_POSITION_H_
