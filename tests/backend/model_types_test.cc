#include "server/backend/model_types.h"

#include <string>

#include <gtest/gtest.h>

namespace relserve {
namespace {

// The words ListModels, TEI's /info and the metrics' model_info labels carry.
TEST(ModelTypesTest, NamesAreTheEcosystemsWords) {
  EXPECT_STREQ(DTypeName(DType::kFloat32), "float32");
  EXPECT_STREQ(DTypeName(DType::kBFloat16), "bfloat16");
  EXPECT_STREQ(DTypeName(DType::kFloat16), "float16");
  EXPECT_STREQ(DTypeName(DType::kInt8), "int8");
  EXPECT_STREQ(ProblemTypeName(ProblemType::kSingleLabel), "single_label_classification");
  EXPECT_STREQ(ProblemTypeName(ProblemType::kMultiLabel), "multi_label_classification");
  EXPECT_STREQ(ProblemTypeName(ProblemType::kRegression), "regression");
  // sentence-transformers' Pooling.get_pooling_mode_str() names.
  EXPECT_STREQ(PoolingModeName(PoolingMode::kCls), "cls");
  EXPECT_STREQ(PoolingModeName(PoolingMode::kMax), "max");
  EXPECT_STREQ(PoolingModeName(PoolingMode::kMean), "mean");
  EXPECT_STREQ(PoolingModeName(PoolingMode::kMeanSqrtLen), "mean_sqrt_len");
  EXPECT_STREQ(PoolingModeName(PoolingMode::kWeightedMean), "weightedmean");
  EXPECT_STREQ(PoolingModeName(PoolingMode::kLastToken), "lasttoken");
}

TEST(ModelTypesTest, ProblemTypeFromConfigDefaultsToSingleLabel) {
  EXPECT_EQ(ProblemTypeFromConfig("multi_label_classification"), ProblemType::kMultiLabel);
  EXPECT_EQ(ProblemTypeFromConfig("regression"), ProblemType::kRegression);
  EXPECT_EQ(ProblemTypeFromConfig("single_label_classification"), ProblemType::kSingleLabel);
  EXPECT_EQ(ProblemTypeFromConfig(""), ProblemType::kSingleLabel);
}

TEST(ModelTypesTest, PoolingDescribesModesThenDenseThenNormalize) {
  PoolingInfo p;
  p.modes = {PoolingMode::kMean};
  EXPECT_EQ(p.ModeNames(), "mean");
  EXPECT_EQ(p.Describe(), "mean");
  p.modes = {PoolingMode::kCls, PoolingMode::kMax};
  p.dense_out_features = {768, 256};
  p.normalize = true;
  EXPECT_EQ(p.ModeNames(), "cls,max");
  EXPECT_EQ(p.Describe(), "cls,max+dense(768)+dense(256)+normalize");
  p.dense_out_features.clear();
  EXPECT_EQ(p.Describe(), "cls,max+normalize");
}

// The flag tables read a dtype's name once, with ParseDType: each name back to its DType, and
// anything else (an alias, another case, an empty value) refused naming the value and the names.
TEST(ModelTypesTest, ParseDTypeReadsBackEveryName) {
  for (DType t : {DType::kFloat32, DType::kBFloat16, DType::kFloat16, DType::kInt8}) {
    auto parsed = ParseDType(DTypeName(t));
    ASSERT_TRUE(parsed.ok()) << DTypeName(t);
    EXPECT_EQ(*parsed, t);
  }
  for (const char* bad : {"int4", "fp16", "Float32", ""}) {
    auto parsed = ParseDType(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find(std::string("\"") + bad + "\""), absl::string_view::npos);
    EXPECT_NE(parsed.status().message().find("float32, bfloat16, float16, int8"), absl::string_view::npos);
  }
}

}  // namespace
}  // namespace relserve
