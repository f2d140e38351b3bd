#ifndef RELSERVE_TESTS_MODEL_FAMILIES_MPNET_NAIVE_MPNET_REFERENCE_H_
#define RELSERVE_TESTS_MODEL_FAMILIES_MPNET_NAIVE_MPNET_REFERENCE_H_

// A deliberately naive, literal port of transformers 4.40.2's MPNet forward pass
// (models/mpnet/modeling_mpnet.py: MPNetModel, MPNetForSequenceClassification) in double
// precision, in the manner of naive_reference.h: std::vector and explicit loops, no LibTorch,
// no code shared with the engine. naive::Forward runs it for model_type "mpnet".
//
// Where the reference computes in float32 even in a float64 model (the logarithm of
// relative_position_bucket), the port does the same.

#include <cstdint>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/model/naive_reference.h"

namespace relserve::naive {

// MPNetModel / MPNetForSequenceClassification / MPNetForMaskedLM (as its MPNetModel) with
// output_hidden_states=True on a right-padded batch: hidden_state_0..N, last_hidden_state and,
// for MPNetForSequenceClassification, logits. Throws std::runtime_error for what transformers
// could not run.
Outputs MpnetForward(const nlohmann::json& config, const std::string& model_dir, const PaddedBatch& batch);

// MPNetEncoder.relative_position_bucket for one relative position (memory - context), with
// the defaults compute_position_bias uses unless told otherwise.
int64_t MpnetRelativePositionBucket(int64_t relative_position, int64_t num_buckets = 32,
                                    int64_t max_distance = 128);

// create_position_ids_from_input_ids(input_ids, padding_idx) for one row.
std::vector<int64_t> MpnetPositionIds(const std::vector<int64_t>& row, int64_t padding_idx = 1);

}  // namespace relserve::naive

#endif  // RELSERVE_TESTS_MODEL_FAMILIES_MPNET_NAIVE_MPNET_REFERENCE_H_
