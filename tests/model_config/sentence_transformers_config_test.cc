// LoadSentenceTransformersConfig on hand-written module folders: the Pooling and Dense numbers it
// accepts, and the precise errors for the ones it cannot use.

#include "server/model_config/sentence_transformers_config.h"

#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <utility>
#include <vector>

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

// A SparseEncoder (sentence-transformers 5): MLMTransformer and SpladePooling, no Pooling.
TEST_F(SentenceTransformersConfigTest, ReadsASparseEncodersSpladePooling) {
  ASSERT_EQ(mkdir(JoinPath(dir_, "1_SpladePooling").c_str(), 0755), 0);
  Write("modules.json",
        R"([{"type": "sentence_transformers.sparse_encoder.models.MLMTransformer", "path": ""},)"
        R"( {"type": "sentence_transformers.sparse_encoder.models.SpladePooling", "path": "1_SpladePooling"}])");
  Write("sentence_bert_config.json", R"({"max_seq_length": 256, "do_lower_case": false})");
  Write("1_SpladePooling/config.json",
        R"({"pooling_strategy": "max", "activation_function": "relu", "word_embedding_dimension": null})");
  auto st = LoadSentenceTransformersConfig(dir_);
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_FALSE(st->has_pooling);
  ASSERT_TRUE(st->splade.has_value());
  EXPECT_FALSE(st->splade->sum);
  EXPECT_FALSE(st->splade->log1p_relu);
  EXPECT_EQ(st->max_seq_length, 256);  // the MLMTransformer's settings, as a Transformer's
  Write("1_SpladePooling/config.json", R"({"pooling_strategy": "sum", "activation_function": "log1p_relu"})");
  st = LoadSentenceTransformersConfig(dir_);
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_TRUE(st->splade->sum);
  EXPECT_TRUE(st->splade->log1p_relu);
  EXPECT_EQ(st->splade->Describe(), "splade(sum, log1p_relu)");
  Write("1_SpladePooling/config.json", R"({"pooling_strategy": "mean"})");
  EXPECT_NE(LoadError().find("\"pooling_strategy\" \"mean\" is not max or sum"), std::string::npos) << LoadError();
  Write("1_SpladePooling/config.json", R"({"activation_function": "gelu"})");
  EXPECT_NE(LoadError().find("\"activation_function\" \"gelu\" is not relu or log1p_relu"), std::string::npos)
      << LoadError();
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

TEST_F(SentenceTransformersConfigTest, ReadsTheTransformerModulesLengthAndLowerCasing) {
  auto st = LoadSentenceTransformersConfig(dir_);
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->max_seq_length, 0);  // no sentence_bert_config.json: no limit of its own
  EXPECT_FALSE(st->do_lower_case);
  Write("sentence_bert_config.json", R"({"max_seq_length": 384, "do_lower_case": true})");
  st = LoadSentenceTransformersConfig(dir_);
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->max_seq_length, 384);
  EXPECT_TRUE(st->do_lower_case);
  EXPECT_EQ(st->transformer_config_path, JoinPath(dir_, "sentence_bert_config.json"));
  // null is the default, as for every other key.
  Write("sentence_bert_config.json", R"({"max_seq_length": null, "do_lower_case": false})");
  st = LoadSentenceTransformersConfig(dir_);
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->max_seq_length, 0);
}

TEST_F(SentenceTransformersConfigTest, TheTransformerModulesFolderHoldsItsConfig) {
  // An older layout: the Transformer module in a folder of its own.
  ASSERT_EQ(mkdir(JoinPath(dir_, "0_Transformer").c_str(), 0755), 0);
  Write("modules.json",
        R"([{"type": "sentence_transformers.models.Transformer", "path": "0_Transformer"},)"
        R"( {"type": "sentence_transformers.models.Pooling", "path": "1_Pooling"}])");
  Write("sentence_bert_config.json", R"({"max_seq_length": 512})");
  Write("0_Transformer/sentence_bert_config.json", R"({"max_seq_length": 128})");
  auto st = LoadSentenceTransformersConfig(dir_);
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->max_seq_length, 128);
}

TEST_F(SentenceTransformersConfigTest, WithoutModulesTheRootFilesStillCount) {
  // TEI reads sentence_bert_config.json whether or not modules.json is there.
  ASSERT_EQ(unlink(JoinPath(dir_, "modules.json").c_str()), 0);
  Write("sentence_bert_config.json", R"({"max_seq_length": 256})");
  Write("config_sentence_transformers.json", R"({"similarity_fn_name": "dot"})");
  auto st = LoadSentenceTransformersConfig(dir_);
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_FALSE(st->present);
  EXPECT_EQ(st->max_seq_length, 256);
  EXPECT_EQ(st->similarity_fn_name, "dot");
}

TEST_F(SentenceTransformersConfigTest, BadTransformerSettingsNameTheFileAndKey) {
  for (const char* bad : {R"({"max_seq_length": 0})", R"({"max_seq_length": -5})", R"({"max_seq_length": "384"})",
                          R"({"max_seq_length": 2.5})", R"({"max_seq_length": 1e20})"}) {
    Write("sentence_bert_config.json", bad);
    const std::string error = LoadError();
    EXPECT_NE(error.find("sentence_bert_config.json: \"max_seq_length\""), std::string::npos) << bad << ": " << error;
  }
  Write("sentence_bert_config.json", R"({"do_lower_case": "yes"})");
  std::string error = LoadError();
  EXPECT_NE(error.find("sentence_bert_config.json: \"do_lower_case\""), std::string::npos) << error;
  Write("sentence_bert_config.json", R"([384])");
  error = LoadError();
  EXPECT_NE(error.find("sentence_bert_config.json: not a JSON object"), std::string::npos) << error;
}

TEST_F(SentenceTransformersConfigTest, ReadsPromptsDefaultPromptAndSimilarity) {
  auto st = LoadSentenceTransformersConfig(dir_);
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_TRUE(st->prompts.empty());
  EXPECT_EQ(st->default_prompt_name, "");
  EXPECT_EQ(st->similarity_fn_name, "");
  EXPECT_TRUE(st->pooling.include_prompt);
  Write("config_sentence_transformers.json",
        R"({"__version__": {"sentence_transformers": "3.0.1"}, "prompts": {"query": "query: ", "document": ""},)"
        R"( "default_prompt_name": "query", "similarity_fn_name": "cosine"})");
  Write("1_Pooling/config.json",
        R"({"word_embedding_dimension": 8, "pooling_mode_mean_tokens": true, "include_prompt": false})");
  st = LoadSentenceTransformersConfig(dir_);
  ASSERT_TRUE(st.ok()) << st.status();
  ASSERT_EQ(st->prompts.size(), 2u);
  EXPECT_EQ(st->prompts[0], (std::pair<std::string, std::string>("document", "")));
  EXPECT_EQ(st->prompts[1], (std::pair<std::string, std::string>("query", "query: ")));
  EXPECT_EQ(st->default_prompt_name, "query");
  EXPECT_EQ(st->similarity_fn_name, "cosine");
  EXPECT_FALSE(st->pooling.include_prompt);
  // sentence-transformers 2 wrote nulls.
  Write("config_sentence_transformers.json",
        R"({"prompts": {}, "default_prompt_name": null, "similarity_fn_name": null})");
  st = LoadSentenceTransformersConfig(dir_);
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_TRUE(st->prompts.empty());
  EXPECT_EQ(st->default_prompt_name, "");
  EXPECT_EQ(st->similarity_fn_name, "");
}

TEST_F(SentenceTransformersConfigTest, BadPromptsAndSimilarityNameTheFileAndKey) {
  struct Case {
    const char* json;
    const char* mention;
  };
  for (const Case& c : std::vector<Case>{
           {R"({"prompts": ["query: "]})", "\"prompts\" must be an object of prompt names to texts"},
           {R"({"prompts": "query: "})", "\"prompts\" must be an object"},
           {R"({"prompts": {"query": 1}})", "\"prompts\" must map each name to a text: \"query\" is 1"},
           {R"({"prompts": {"query": null}})", "\"query\" is null"},
           {R"({"prompts": {"query": "q: "}, "default_prompt_name": "passage"})",
            "\"default_prompt_name\" \"passage\" is not one of the prompts (\"query\")"},
           {R"({"default_prompt_name": "query"})", "\"default_prompt_name\" \"query\" is not one of the prompts (there are none)"},
           {R"({"prompts": {"query": "q: "}, "default_prompt_name": 1})", "\"default_prompt_name\""},
           {R"({"similarity_fn_name": "dot_product"})",
            "\"similarity_fn_name\" \"dot_product\" is not one of cosine, dot, euclidean, manhattan, MaxSim"},
           {R"({"similarity_fn_name": true})", "\"similarity_fn_name\""},
       }) {
    Write("config_sentence_transformers.json", c.json);
    const std::string error = LoadError();
    EXPECT_NE(error.find("config_sentence_transformers.json: "), std::string::npos) << c.json << ": " << error;
    EXPECT_NE(error.find(c.mention), std::string::npos) << c.json << ": " << error;
  }
  Write("config_sentence_transformers.json", R"({"prompts": {}})");
  Write("1_Pooling/config.json",
        R"({"word_embedding_dimension": 8, "pooling_mode_mean_tokens": true, "include_prompt": "no"})");
  EXPECT_NE(LoadError().find("1_Pooling/config.json: \"include_prompt\""), std::string::npos);
}

TEST(FindSentencePromptTest, TheNamedPromptElseTheDefaultElseNone) {
  const SentencePrompts prompts = {{"document", ""}, {"query", "query: "}};
  auto p = FindSentencePrompt(prompts, "", "");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, nullptr);
  p = FindSentencePrompt(prompts, "", "query");
  ASSERT_TRUE(p.ok() && *p != nullptr);
  EXPECT_EQ(**p, "query: ");
  p = FindSentencePrompt(prompts, "query", "");
  ASSERT_TRUE(p.ok() && *p != nullptr);
  EXPECT_EQ(**p, "query: ");
  p = FindSentencePrompt(prompts, "query", "document");
  ASSERT_TRUE(p.ok() && *p != nullptr);
  EXPECT_EQ(**p, "");
  p = FindSentencePrompt(prompts, "query", "x");
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(p.status().message(), "prompt_name \"x\" is not one of the model's prompts: document, query");
  p = FindSentencePrompt({}, "", "x");
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(p.status().message(), "prompt_name \"x\" is not one of the model's prompts: the model has no prompts");
}

}  // namespace
}  // namespace relserve
