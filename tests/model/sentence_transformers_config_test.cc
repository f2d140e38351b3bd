// LoadSentenceTransformersConfig on hand-written module folders: the Pooling and Dense numbers it
// accepts, and the precise errors for the ones it cannot use.

#include "server/model/sentence_transformers_config.h"

#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "gtest/gtest.h"
#include "server/util/file_util.h"

namespace relserve {
namespace {

class SentenceTransformersConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = JoinPath(::testing::TempDir(),
                    "relserve_st_config_" + std::to_string(getpid()) + "_" +
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    RemoveTree(dir_);  // a directory left by an earlier process with the same id
    ASSERT_EQ(mkdir(dir_.c_str(), 0755), 0) << dir_;
    ASSERT_EQ(mkdir(JoinPath(dir_, "1_Pooling").c_str(), 0755), 0);
    ASSERT_EQ(mkdir(JoinPath(dir_, "2_Dense").c_str(), 0755), 0);
    Write("modules.json",
          R"([{"type": "sentence_transformers.models.Transformer", "path": ""},)"
          R"( {"type": "sentence_transformers.models.Pooling", "path": "1_Pooling"},)"
          R"( {"type": "sentence_transformers.models.Dense", "path": "2_Dense"}])");
    Write("1_Pooling/config.json", R"({"word_embedding_dimension": 8, "pooling_mode_mean_tokens": true})");
    Write("2_Dense/config.json", R"({"in_features": 8, "out_features": 4})");
  }

  void TearDown() override { RemoveTree(dir_); }

  void Write(const std::string& name, const std::string& contents) {
    ASSERT_TRUE(WriteStringToFile(JoinPath(dir_, name), contents).ok()) << name;
  }

  // The error of loading the folder, which must be INVALID_ARGUMENT.
  std::string LoadError() {
    auto st = LoadSentenceTransformersConfig(dir_);
    EXPECT_EQ(st.status().code(), absl::StatusCode::kInvalidArgument) << st.status();
    return std::string(st.status().message());
  }

  std::string dir_;
};

TEST_F(SentenceTransformersConfigTest, ReadsPoolingAndDense) {
  auto st = LoadSentenceTransformersConfig(dir_);
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->pooling.word_embedding_dimension, 8);
  EXPECT_EQ(st->pooling.output_dimension(), 8);
  ASSERT_EQ(st->dense.size(), 1u);
  EXPECT_EQ(st->dense[0].in_features, 8);
  EXPECT_EQ(st->dense[0].out_features, 4);
  EXPECT_TRUE(st->dense[0].bias);
}

TEST_F(SentenceTransformersConfigTest, PoolingWithoutDimensionTakesTheHiddenSizeLater) {
  // Pooler::Create fills in the model's hidden size for 0; the mode is still enabled.
  Write("1_Pooling/config.json", R"({"pooling_mode_cls_token": true})");
  auto st = LoadSentenceTransformersConfig(dir_);
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->pooling.word_embedding_dimension, 0);
  EXPECT_TRUE(st->pooling.cls);
}

TEST_F(SentenceTransformersConfigTest, PoolingWithoutModesIsRefused) {
  Write("1_Pooling/config.json", R"({"word_embedding_dimension": 8})");
  EXPECT_NE(LoadError().find("no pooling mode is enabled"), std::string::npos);
}

TEST_F(SentenceTransformersConfigTest, PoolingDimensionThatOverflowsTheOutputIsRefused) {
  // Two modes of 2^31 - 1 values each would overflow output_dimension().
  Write("1_Pooling/config.json",
        R"({"word_embedding_dimension": 2147483647, "pooling_mode_mean_tokens": true,)"
        R"( "pooling_mode_max_tokens": true})");
  const std::string error = LoadError();
  EXPECT_NE(error.find("\"word_embedding_dimension\" must be at most"), std::string::npos) << error;
}

TEST_F(SentenceTransformersConfigTest, NegativePoolingDimensionIsRefused) {
  Write("1_Pooling/config.json",
        R"({"word_embedding_dimension": -8, "pooling_mode_mean_tokens": true})");
  EXPECT_NE(LoadError().find("word_embedding_dimension"), std::string::npos);
}

TEST_F(SentenceTransformersConfigTest, DenseFeaturesBeyondIntAreRefusedNotTruncated) {
  // get<int>() made 2^32 + 8 into 8 and accepted it.
  Write("2_Dense/config.json", R"({"in_features": 4294967304, "out_features": 4})");
  const std::string error = LoadError();
  EXPECT_NE(error.find("\"in_features\" must be at most"), std::string::npos) << error;
  EXPECT_NE(error.find("4294967304"), std::string::npos) << error;
}

TEST_F(SentenceTransformersConfigTest, DenseFeaturesAsHugeFloatAreRefused) {
  // The fuzzer's input (tests/fuzz/regressions/config_json): a float beyond int's range, which
  // get<int>() converted with undefined behaviour.
  Write("2_Dense/config.json", R"({"in_features": 184467440737095516158, "out_features": 4})");
  EXPECT_NE(LoadError().find("\"in_features\""), std::string::npos);
}

TEST_F(SentenceTransformersConfigTest, DenseWithoutFeaturesOrWithBadBiasIsRefused) {
  Write("2_Dense/config.json", R"({"in_features": 8})");
  EXPECT_NE(LoadError().find("\"out_features\" is missing"), std::string::npos);
  Write("2_Dense/config.json", R"({"in_features": 8, "out_features": 4, "bias": "yes"})");
  EXPECT_NE(LoadError().find("\"bias\""), std::string::npos);
  Write("2_Dense/config.json", R"([8, 4])");
  EXPECT_NE(LoadError().find("not a JSON object"), std::string::npos);
}

// A value nested 200,000 deep used to overflow the stack (printed whole into the type error of
// its key); ParseJson refuses it at parse, and the error names the file and the key.
TEST_F(SentenceTransformersConfigTest, DeeplyNestedValuesAreRefusedNamingTheFile) {
  const std::string deep = std::string(200000, '[') + "8" + std::string(200000, ']');
  Write("1_Pooling/config.json", R"({"pooling_mode_mean_tokens": true, "word_embedding_dimension": )" + deep + "}");
  std::string error = LoadError();
  EXPECT_NE(error.find("1_Pooling/config.json: invalid JSON at \"word_embedding_dimension\""), std::string::npos)
      << error.substr(0, 500);
  EXPECT_NE(error.find("deeper than 128 levels"), std::string::npos) << error.substr(0, 500);
  Write("1_Pooling/config.json", R"({"word_embedding_dimension": 8, "pooling_mode_mean_tokens": true})");
  Write("2_Dense/config.json", R"({"in_features": 8, "out_features": )" + deep + "}");
  error = LoadError();
  EXPECT_NE(error.find("2_Dense/config.json: invalid JSON at \"out_features\""), std::string::npos)
      << error.substr(0, 500);
  Write("modules.json", deep);
  error = LoadError();
  EXPECT_NE(error.find("modules.json: invalid JSON"), std::string::npos) << error.substr(0, 500);
  EXPECT_NE(error.find("deeper than 128 levels"), std::string::npos) << error.substr(0, 500);
}

}  // namespace
}  // namespace relserve
