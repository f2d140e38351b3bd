#include "server/hub/file_selection.h"

#include <map>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace relserve {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A repository's listing and the contents of the files selection reads.
struct Repo {
  Repo(std::vector<std::string> files, std::map<std::string, std::string> contents = {})
      : files(std::move(files)), contents(std::move(contents)) {}

  std::vector<std::string> files;
  std::map<std::string, std::string> contents;
  std::vector<std::string> reads;

  absl::StatusOr<std::vector<std::string>> Select() {
    return SelectModelFiles(files, [this](const std::string& f) -> absl::StatusOr<std::string> {
      reads.push_back(f);
      const auto it = contents.find(f);
      if (it == contents.end()) return absl::NotFoundError(f + " was not expected to be read");
      return it->second;
    });
  }
};

TEST(FileSelectionTest, ConfigTokenizerThenWeightsInOrderOfPreference) {
  Repo r({"README.md", ".gitattributes", "config.json", "model.safetensors", "pytorch_model.bin", "tf_model.h5",
          "spm.model", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
          "vocab.txt", "merges.txt", "vocab.json", "onnx/model.onnx"});
  absl::StatusOr<std::vector<std::string>> files = r.Select();
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_THAT(*files, ElementsAre("config.json", "spm.model", "tokenizer.json", "tokenizer_config.json",
                                  "special_tokens_map.json", "vocab.txt", "vocab.json", "merges.txt",
                                  "added_tokens.json", "model.safetensors"));
  EXPECT_TRUE(r.reads.empty());

  r = Repo({"config.json", "pytorch_model.bin", "spiece.model"});
  EXPECT_THAT(*r.Select(), ElementsAre("config.json", "spiece.model", "pytorch_model.bin"));
  // XLM-RoBERTa's SentencePiece model.
  r = Repo({"config.json", "model.safetensors", "sentencepiece.bpe.model", "tokenizer.json"});
  EXPECT_THAT(*r.Select(),
              ElementsAre("config.json", "tokenizer.json", "sentencepiece.bpe.model", "model.safetensors"));
}

TEST(FileSelectionTest, ShardedWeightsFromTheIndex) {
  Repo r({"config.json", "model.safetensors.index.json", "model-2.safetensors", "model-1.safetensors",
          "pytorch_model.bin.index.json", "pytorch_model-1.bin"},
         {{"model.safetensors.index.json",
           R"({"weight_map": {"z": "model-2.safetensors", "a": "model-1.safetensors", "b": "model-2.safetensors"}})"}});
  absl::StatusOr<std::vector<std::string>> files = r.Select();
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_THAT(*files, ElementsAre("config.json", "model.safetensors.index.json", "model-1.safetensors",
                                  "model-2.safetensors"));
  EXPECT_THAT(r.reads, ElementsAre("model.safetensors.index.json"));

  r = Repo({"config.json", "pytorch_model.bin.index.json", "pytorch_model-00001-of-00001.bin"},
           {{"pytorch_model.bin.index.json", R"({"weight_map": {"w": "pytorch_model-00001-of-00001.bin"}})"}});
  EXPECT_THAT(*r.Select(), ElementsAre("config.json", "pytorch_model.bin.index.json", "pytorch_model-00001-of-00001.bin"));
}

TEST(FileSelectionTest, SentenceTransformersModulesBeforeTheModelsWeights) {
  Repo r({"config.json", "model.safetensors", "modules.json", "sentence_bert_config.json",
          "config_sentence_transformers.json", "1_Pooling/config.json", "2_Dense/config.json",
          "2_Dense/pytorch_model.bin", "3_Normalize/unrelated.txt"},
         {{"modules.json", R"([{"idx": 0, "path": "", "type": "sentence_transformers.models.Transformer"},
                               {"idx": 1, "path": "1_Pooling/", "type": "sentence_transformers.models.Pooling"},
                               {"idx": 2, "path": "2_Dense", "type": "sentence_transformers.models.Dense"},
                               {"idx": 3, "path": "3_Normalize", "type": "sentence_transformers.models.Normalize"}])"}});
  absl::StatusOr<std::vector<std::string>> files = r.Select();
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_THAT(*files, ElementsAre("config.json", "modules.json", "sentence_bert_config.json",
                                  "config_sentence_transformers.json", "1_Pooling/config.json", "2_Dense/config.json",
                                  "2_Dense/pytorch_model.bin", "model.safetensors"));
}

// BAAI/bge-m3's listing: its sparse and ColBERT heads sit beside pytorch_model.bin as
// torch.save files, fetched before the weights; the ONNX export and the pictures are not.
TEST(FileSelectionTest, BgeM3HeadsBesideTheWeights) {
  Repo r({".gitattributes", "1_Pooling/config.json", "README.md", "colbert_linear.pt", "config.json",
          "config_sentence_transformers.json", "imgs/bm25.jpg", "long.jpg", "modules.json", "onnx/model.onnx",
          "onnx/model.onnx_data", "pytorch_model.bin", "sentence_bert_config.json", "sentencepiece.bpe.model",
          "sparse_linear.pt", "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json"},
         {{"modules.json", R"([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
                               {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}])"}});
  absl::StatusOr<std::vector<std::string>> files = r.Select();
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_THAT(*files, ElementsAre("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                                  "sentencepiece.bpe.model", "modules.json", "sentence_bert_config.json",
                                  "config_sentence_transformers.json", "1_Pooling/config.json", "sparse_linear.pt",
                                  "colbert_linear.pt", "pytorch_model.bin"));
  // Either one alone, and neither: nothing is required.
  r = Repo({"config.json", "model.safetensors", "colbert_linear.pt"});
  EXPECT_THAT(*r.Select(), ElementsAre("config.json", "colbert_linear.pt", "model.safetensors"));
  r = Repo({"config.json", "model.safetensors", "sparse_linear.pt.backup"});
  EXPECT_THAT(*r.Select(), ElementsAre("config.json", "model.safetensors"));
}

TEST(FileSelectionTest, MissingRequiredFilesAreNamed) {
  struct Case {
    Repo repo;
    absl::StatusCode code;
    const char* message;
  };
  std::vector<Case> cases = {
      {Repo({"model.safetensors"}), absl::StatusCode::kNotFound, "no config.json"},
      {Repo({"config.json", "tf_model.h5", "flax_model.msgpack"}), absl::StatusCode::kNotFound,
       "no weights: none of model.safetensors, model.safetensors.index.json, pytorch_model.bin or "
       "pytorch_model.bin.index.json is there"},
      {Repo({"config.json", "model.safetensors.index.json", "a.safetensors"},
            {{"model.safetensors.index.json", R"({"weight_map": {"x": "a.safetensors", "y": "b.safetensors"}})"}}),
       absl::StatusCode::kNotFound, "model.safetensors.index.json names shards that are missing: b.safetensors"},
      {Repo({"config.json", "model.safetensors.index.json"},
            {{"model.safetensors.index.json", R"({"weight_map": {"x": "../../etc/passwd"}})"}}),
       absl::StatusCode::kInvalidArgument, "\"weight_map\" entry \"x\" is not a file name inside the repository"},
      {Repo({"config.json", "model.safetensors.index.json"}, {{"model.safetensors.index.json", R"({"metadata": {}})"}}),
       absl::StatusCode::kInvalidArgument, "has no \"weight_map\" object"},
      {Repo({"config.json", "model.safetensors", "modules.json"},
            {{"modules.json", R"([{"path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}])"}}),
       absl::StatusCode::kNotFound, "no 1_Pooling/config.json, which modules.json's sentence_transformers.models.Pooling"},
      {Repo({"config.json", "model.safetensors", "modules.json", "2_Dense/config.json"},
            {{"modules.json", R"([{"path": "2_Dense", "type": "sentence_transformers.models.Dense"}])"}}),
       absl::StatusCode::kNotFound, "no weights in 2_Dense/"},
      {Repo({"config.json", "model.safetensors", "modules.json"},
            {{"modules.json", R"([{"path": "../outside", "type": "sentence_transformers.models.Pooling"}])"}}),
       absl::StatusCode::kInvalidArgument, "is not a folder inside the repository"},
      {Repo({"config.json", "model.safetensors", "modules.json"}, {{"modules.json", "{"}}),
       absl::StatusCode::kInvalidArgument, "modules.json"},
  };
  for (Case& c : cases) {
    absl::StatusOr<std::vector<std::string>> files = c.repo.Select();
    ASSERT_EQ(files.status().code(), c.code) << c.message << ": " << files.status();
    EXPECT_THAT(files.status().message(), HasSubstr(c.message));
  }
}

// A value nested 200,000 deep in an index's weight_map or in modules.json (a hostile repository)
// used to overflow the stack of `relserve-model download` as the error quoted it; refused at
// parse, naming the file and the key.
TEST(FileSelectionTest, DeeplyNestedValuesAreRefusedNamingTheFile) {
  const std::string deep = std::string(200000, '[') + "\"a.safetensors\"" + std::string(200000, ']');
  Repo index({"config.json", "model.safetensors.index.json", "a.safetensors"},
             {{"model.safetensors.index.json", R"({"weight_map": {"x": )" + deep + "}}"}});
  absl::StatusOr<std::vector<std::string>> files = index.Select();
  ASSERT_EQ(files.status().code(), absl::StatusCode::kInvalidArgument) << files.status().message().substr(0, 300);
  EXPECT_THAT(std::string(files.status().message()),
              AllOf(HasSubstr("model.safetensors.index.json: invalid JSON at \"weight_map.x\""),
                    HasSubstr("deeper than 128 levels")));
  Repo modules({"config.json", "model.safetensors", "modules.json"},
               {{"modules.json", R"([{"path": "1_Pooling", "type": )" + deep + "}]"}});
  files = modules.Select();
  ASSERT_EQ(files.status().code(), absl::StatusCode::kInvalidArgument) << files.status().message().substr(0, 300);
  EXPECT_THAT(std::string(files.status().message()),
              AllOf(HasSubstr("modules.json: invalid JSON at \"type\""), HasSubstr("deeper than 128 levels")));
}

}  // namespace
}  // namespace relserve
