#ifndef RELSERVE_TESTS_MODEL_REFERENCE_FIXTURE_H_
#define RELSERVE_TESTS_MODEL_REFERENCE_FIXTURE_H_

#include <string>
#include <vector>

#include "server/model/engine.h"
#include "server/safetensors/safetensors_file.h"

namespace relserve::testing {

inline std::string TestDataDir() { return RELSERVE_TEST_DATA_DIR; }
inline std::string ReferenceDir(const std::string& name) { return TestDataDir() + "/reference/" + name; }

// The options model tests load engines with: RELSERVE_TEST_DEVICE names the device (default
// cpu; the GPU round sets cuda), and RELSERVE_TEST_BIASED_ATTENTION=1 makes the CPU take the
// attention path of GPUs (biased_attention.h; EngineKernels::gpu_attention_on_cpu), =tables the
// table path where it applies (table_attention.h).
EngineOptions TestEngineOptions();

// inputs.json of a reference folder as a padded batch.
PaddedBatch ReadReferenceInputs(const std::string& path);

// The unpadded rows of the reference folder `name`'s inputs.json, as serving sequences.
std::vector<SequenceInput> ReferenceSequences(const std::string& name);

// The cosine of two vectors of one length, in double.
double Cosine(const std::vector<float>& a, const std::vector<float>& b);

// A float32 tensor of a safetensors file (expected.safetensors) as a vector.
std::vector<float> FloatData(const TensorView& v);

// Largest |a - b| over the positions where mask is 1, for [batch, length, ...] tensors
// (or over everything for tensors without a length axis, such as logits); as
// tests/testing/max_abs_diff.h, kNotComparable (+inf) for a NaN or an infinity.
double MaxAbsDiffMasked(const NamedTensor& actual, const std::vector<float>& expected,
                        const std::vector<int64_t>& expected_shape, const PaddedBatch& batch);

}  // namespace relserve::testing

#endif  // RELSERVE_TESTS_MODEL_REFERENCE_FIXTURE_H_
