#include "tests/model/reference_fixture.h"

#include <cmath>
#include <cstring>
#include <cstdlib>
#include <stdexcept>

#include "server/model/layers/table_attention.h"
#include "server/util/json_util.h"
#include "tests/testing/max_abs_diff.h"

namespace relserve::testing {

std::vector<float> FloatData(const TensorView& v) {
  std::vector<float> out(v.numel());
  std::memcpy(out.data(), v.data, v.nbytes);
  return out;
}

EngineOptions TestEngineOptions() {
  EngineOptions options;
  if (const char* device = std::getenv("RELSERVE_TEST_DEVICE"); device != nullptr && *device != '\0') {
    options.device = device;
  }
  if (const char* biased = std::getenv("RELSERVE_TEST_BIASED_ATTENTION"); biased != nullptr) {
    // "1": the biased path of GPUs on the CPU; "tables": the table path where it applies.
    options.kernels.gpu_attention_on_cpu = std::string(biased) == "1" || std::string(biased) == "tables";
    if (std::string(biased) == "tables") options.gpu_attention.path = DeviceAttention::kTables;
  }
  return options;
}

PaddedBatch ReadReferenceInputs(const std::string& path) {
  auto j = ReadJsonFile(path);
  if (!j.ok()) throw std::runtime_error(std::string(j.status().message()));
  PaddedBatch b;
  auto rows = (*j)["input_ids"];
  b.batch = static_cast<int64_t>(rows.size());
  b.length = static_cast<int64_t>(rows[0].size());
  for (const auto& r : rows) for (const auto& v : r) b.input_ids.push_back(v.get<int64_t>());
  for (const auto& r : (*j)["attention_mask"]) for (const auto& v : r) b.attention_mask.push_back(v.get<int64_t>());
  if (j->contains("token_type_ids")) {
    for (const auto& r : (*j)["token_type_ids"]) for (const auto& v : r) b.token_type_ids.push_back(v.get<int64_t>());
  }
  return b;
}

double MaxAbsDiffMasked(const NamedTensor& actual, const std::vector<float>& expected,
                        const std::vector<int64_t>& expected_shape, const PaddedBatch& batch) {
  if (actual.shape != expected_shape) return kNotComparable;
  double worst = 0;
  const bool per_token = expected_shape.size() == 3;
  const int64_t inner = per_token ? expected_shape[2] : 1;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (per_token) {
      const int64_t token = static_cast<int64_t>(i) / inner;  // b * length + t
      if (batch.attention_mask[token] == 0) continue;
    }
    worst = std::max(worst, AbsDiff(actual.data[i], expected[i]));
  }
  return worst;
}

std::vector<SequenceInput> ReferenceSequences(const std::string& name) {
  PaddedBatch b = ReadReferenceInputs(ReferenceDir(name) + "/inputs.json");
  std::vector<SequenceInput> out(b.batch);
  for (int64_t r = 0; r < b.batch; ++r) {
    for (int64_t t = 0; t < b.length; ++t) {
      if (b.attention_mask[r * b.length + t]) out[r].input_ids.push_back(static_cast<int32_t>(b.input_ids[r * b.length + t]));
    }
  }
  return out;
}

double Cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) ab += double(a[i]) * b[i], aa += double(a[i]) * a[i], bb += double(b[i]) * b[i];
  return ab / std::sqrt(aa * bb);
}

}  // namespace relserve::testing
