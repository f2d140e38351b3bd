#ifndef RELSERVE_TESTS_MODEL_FAMILIES_XLNET_NAIVE_XLNET_H_
#define RELSERVE_TESTS_MODEL_FAMILIES_XLNET_NAIVE_XLNET_H_

// The naive port (naive_reference.h) of transformers 4.40.2's models/xlnet/modeling_xlnet.py:
// XLNetModel.forward without memory, permutation mask or target mapping, and
// XLNetForSequenceClassification's SequenceSummary and logits_proj, in float64 with explicit
// loops, literally: the [L, klen + qlen] position product and rel_shift_bnij, the one-hot
// seg_mat, create_mask, non_tgt_mask and the 1e30 mask, and the summary over every position of
// the padded batch (hidden_states[:, -1], [:, 0], .mean(1)), as transformers computes them.
// The sinusoid table is float32, as relative_positional_encoding builds it.

#include <string>

#include "nlohmann/json.hpp"
#include "tests/model/naive_reference.h"

namespace relserve::naive {

// XLNetModel, or XLNetForSequenceClassification (with logits) when `architectures` names it.
// Throws std::runtime_error for what transformers would refuse.
Outputs XlnetForward(const nlohmann::json& config, const std::string& model_dir, const PaddedBatch& batch);

}  // namespace relserve::naive

#endif  // RELSERVE_TESTS_MODEL_FAMILIES_XLNET_NAIVE_XLNET_H_
