// OutputHeads (model/heads/output_heads.h) without any head loaded: what it says of the model and
// which outputs it refuses, with the words the engine's callers see. The heads themselves, loaded
// from checkpoints and run through the engine, are the other tests of this folder.
#include "server/model/heads/output_heads.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace relserve {
namespace {

using ::testing::HasSubstr;

TEST(OutputHeadsTest, NoHeadsRefusesTheirOutputsAndSaysWhy) {
  OutputHeads heads;
  ModelConfig config;
  config.architecture = "BertModel";
  ModelInfo info;
  const std::string described = heads.Describe(config, std::nullopt, &info);
  EXPECT_EQ(described,
            "sparse: none (it is not a *ForMaskedLM architecture with a masked-LM head, and there is no "
            "sparse_linear.pt); multi-vector: none (there is no colbert_linear.pt)");
  EXPECT_EQ(info.sparse_kind, "");
  EXPECT_EQ(info.multi_vector_kind, "");
  EXPECT_EQ(info.multi_vector_dim, 0);

  EXPECT_TRUE(heads.CheckOutputs(kOutputPooled | kOutputLogits | kOutputTokenStates, "BertModel").ok());
  const absl::Status sparse = heads.CheckOutputs(kOutputPooled | kOutputSparse, "BertModel");
  EXPECT_EQ(sparse.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(sparse.message()), HasSubstr("model BertModel has no sparse head: it is not a *ForMaskedLM"));
  const absl::Status multi = heads.CheckOutputs(kOutputMultiVector, "BertModel");
  EXPECT_EQ(multi.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(multi.message()), HasSubstr("has no multi-vector head: there is no colbert_linear.pt"));
  const absl::Status tokens = heads.CheckOutputs(kOutputTokenLogits, "BertModel");
  EXPECT_EQ(tokens.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(tokens.message()), HasSubstr("has no token-classification head"));
}

// A SpladePooling module needs a masked-LM head to pool: refused naming the directory and the
// architecture.
TEST(OutputHeadsTest, SpladePoolingWithoutAMaskedLmHeadIsRefused) {
  OutputHeads heads;
  MaskedLmHead::Pooling pooling;
  pooling.sum = true;
  const absl::Status s = heads.SetSpladePooling(pooling, "/models/x", "BertModel");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("/models/x: modules.json has a SpladePooling module"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("(BertModel)"));
}

}  // namespace
}  // namespace relserve
