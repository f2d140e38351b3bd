#ifndef RELSERVE_SERVER_BACKEND_MODEL_TYPES_H_
#define RELSERVE_SERVER_BACKEND_MODEL_TYPES_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace relserve {

// What scores a classification head's logits become by default (config.json's problem_type;
// a head without one is single-label with two or more labels, regression with one).
enum class ProblemType { kSingleLabel, kMultiLabel, kRegression };
// Weights and activations. kInt8: the encoder layers' projections in int8 (CPU), the rest float32.
enum class DType { kFloat32, kBFloat16, kFloat16, kInt8 };
// sentence_transformers.models.Pooling's modes, in the order it concatenates them.
enum class PoolingMode { kCls, kMax, kMean, kMeanSqrtLen, kWeightedMean, kLastToken };

const char* ProblemTypeName(ProblemType t);  // "single_label_classification", ...
const char* DTypeName(DType t);              // "float32", "bfloat16", "float16", "int8"
const char* PoolingModeName(PoolingMode m);  // sentence-transformers' names: "cls", "mean", "lasttoken", ...

// DTypeName's inverse, for the flag tables (the server's --dtype, relserve-model's): the one place
// a dtype's name is read; below them it travels as a DType. INVALID_ARGUMENT naming the value and
// the known names otherwise.
absl::StatusOr<DType> ParseDType(std::string_view name);

// config.json's problem_type: "multi_label_classification" and "regression" are those;
// anything else, an empty one included, is single-label.
ProblemType ProblemTypeFromConfig(const std::string& name);

// How a pooled embedding is made: the modes, concatenated; then sentence-transformers' Dense
// modules (their output widths, in order); then Normalize.
struct PoolingInfo {
  std::vector<PoolingMode> modes;
  std::vector<int> dense_out_features;
  bool normalize = false;

  // The modes alone, comma-separated: "mean", "cls,max".
  std::string ModeNames() const;
  // Everything: "mean", "cls+dense(256)+normalize", "mean,max+normalize".
  std::string Describe() const;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_BACKEND_MODEL_TYPES_H_
