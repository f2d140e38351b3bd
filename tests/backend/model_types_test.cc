#include "server/backend/model_types.h"

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

}  // namespace
}  // namespace relserve
