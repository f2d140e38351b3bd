#include "server/backend/model_types.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace relserve {

const char* ProblemTypeName(ProblemType t) {
  switch (t) {
    case ProblemType::kSingleLabel: return "single_label_classification";
    case ProblemType::kMultiLabel: return "multi_label_classification";
    case ProblemType::kRegression: return "regression";
  }
  return "";
}

const char* DTypeName(DType t) {
  switch (t) {
    case DType::kFloat32: return "float32";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat16: return "float16";
    case DType::kInt8: return "int8";
  }
  return "";
}

absl::StatusOr<DType> ParseDType(std::string_view name) {
  for (DType t : {DType::kFloat32, DType::kBFloat16, DType::kFloat16, DType::kInt8}) {
    if (name == DTypeName(t)) return t;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown dtype \"", std::string(name), "\" (known: float32, bfloat16, float16, int8)"));
}

const char* PoolingModeName(PoolingMode m) {
  switch (m) {
    case PoolingMode::kCls: return "cls";
    case PoolingMode::kMax: return "max";
    case PoolingMode::kMean: return "mean";
    case PoolingMode::kMeanSqrtLen: return "mean_sqrt_len";
    case PoolingMode::kWeightedMean: return "weightedmean";
    case PoolingMode::kLastToken: return "lasttoken";
  }
  return "";
}

ProblemType ProblemTypeFromConfig(const std::string& name) {
  if (name == "multi_label_classification") return ProblemType::kMultiLabel;
  if (name == "regression") return ProblemType::kRegression;
  return ProblemType::kSingleLabel;
}

std::string PoolingInfo::ModeNames() const {
  return absl::StrJoin(modes, ",", [](std::string* out, PoolingMode m) { out->append(PoolingModeName(m)); });
}

std::string PoolingInfo::Describe() const {
  std::string s = ModeNames();
  for (int width : dense_out_features) absl::StrAppend(&s, "+dense(", width, ")");
  if (normalize) absl::StrAppend(&s, "+normalize");
  return s;
}

}  // namespace relserve
