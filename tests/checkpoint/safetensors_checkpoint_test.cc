#include "server/checkpoint/safetensors_checkpoint.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/safetensors/safetensors_writer.h"
#include "tests/safetensors/test_files.h"

namespace relserve {
namespace {

using ::relserve::testing::ReadBytes;
using ::relserve::testing::TestDataPath;
using ::relserve::testing::WriteBytes;

// Writes a shard holding one 4-element F32 tensor per name, filled with `fill`.
void WriteShard(const std::string& path, const std::vector<std::string>& names, char fill) {
  SafetensorsWriter writer;
  const std::string bytes(16, fill);
  for (const std::string& name : names) {
    ASSERT_TRUE(writer.Add(name, StDType::kF32, {4}, bytes.data(), bytes.size()).ok());
  }
  writer.SetMetadata({{"format", "pt"}});
  ASSERT_TRUE(writer.WriteFile(path).ok());
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::ScratchDir(); }
  void TearDown() override { testing::RemoveScratchDir(dir_); }

  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  // Three shards as transformers' save_pretrained lays them out.
  void WriteShardedCheckpoint() {
    WriteShard(Path("model-00001-of-00003.safetensors"), {"a.weight", "a.bias"}, 1);
    WriteShard(Path("model-00002-of-00003.safetensors"), {"b.weight"}, 2);
    WriteShard(Path("model-00003-of-00003.safetensors"), {"c.weight", "c.bias"}, 3);
    WriteIndex(R"({"metadata":{"total_size":80},"weight_map":{
      "a.bias":"model-00001-of-00003.safetensors","a.weight":"model-00001-of-00003.safetensors",
      "b.weight":"model-00002-of-00003.safetensors",
      "c.bias":"model-00003-of-00003.safetensors",
      "c.weight":"model-00003-of-00003.safetensors"}})");
  }

  void WriteIndex(const std::string& json) {
    WriteBytes(Path(SafetensorsCheckpoint::kIndexFile), json);
  }

  void ExpectError(absl::StatusCode code, const std::vector<std::string>& needles) {
    auto checkpoint = SafetensorsCheckpoint::OpenDirectory(dir_);
    ASSERT_FALSE(checkpoint.ok());
    EXPECT_EQ(checkpoint.status().code(), code) << checkpoint.status();
    const std::string message(checkpoint.status().message());
    for (const std::string& needle : needles) {
      EXPECT_NE(message.find(needle), std::string::npos) << "'" << needle << "' not in " << message;
    }
  }

  std::string dir_;
};

TEST_F(CheckpointTest, OpensReferenceDirectory) {
  auto checkpoint = SafetensorsCheckpoint::OpenDirectory(TestDataPath("reference/deberta_v3_like"));
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_EQ((*checkpoint)->Names().size(), 54u);
  const TensorView* words = (*checkpoint)->Find("embeddings.word_embeddings.weight");
  ASSERT_NE(words, nullptr);
  EXPECT_EQ(words->dtype, StDType::kF32);
  EXPECT_EQ(words->shape, (std::vector<int64_t>{1000, 32}));
  const TensorView* rel = (*checkpoint)->Find("encoder.rel_embeddings.weight");
  ASSERT_NE(rel, nullptr);
  EXPECT_EQ(rel->dtype, StDType::kF32);
  EXPECT_EQ(rel->shape, (std::vector<int64_t>{64, 32}));
}

TEST_F(CheckpointTest, SingleFileRoundTrip) {
  WriteShard(Path("model.safetensors"), {"z", "y"}, 9);
  auto checkpoint = SafetensorsCheckpoint::OpenDirectory(dir_);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_EQ((*checkpoint)->Names(), (std::vector<std::string>{"y", "z"}));
  EXPECT_EQ((*checkpoint)->files().size(), 1u);
  ASSERT_NE((*checkpoint)->Find("z"), nullptr);
  EXPECT_EQ((*checkpoint)->Find("z")->data[15], 9);
  EXPECT_EQ((*checkpoint)->Find("x"), nullptr);
  auto missing = (*checkpoint)->Get("x");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("'x'"), std::string::npos);
}

TEST_F(CheckpointTest, ShardedRoundTrip) {
  WriteShardedCheckpoint();
  auto checkpoint = SafetensorsCheckpoint::OpenDirectory(dir_);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_EQ((*checkpoint)->Names(),
            (std::vector<std::string>{"a.bias", "a.weight", "b.weight", "c.bias", "c.weight"}));
  EXPECT_EQ((*checkpoint)->files().size(), 3u);
  const std::pair<const char*, int> expected[] = {
      {"a.bias", 1}, {"a.weight", 1}, {"b.weight", 2}, {"c.bias", 3}, {"c.weight", 3}};
  for (const auto& [name, fill] : expected) {
    auto view = (*checkpoint)->Get(name);
    ASSERT_TRUE(view.ok()) << view.status();
    EXPECT_EQ((*view)->name, name);
    EXPECT_EQ((*view)->shape, (std::vector<int64_t>{4}));
    EXPECT_EQ((*view)->data[0], fill) << name;
  }
}

TEST_F(CheckpointTest, PrefersSingleFileOverIndex) {
  WriteShardedCheckpoint();
  WriteShard(Path("model.safetensors"), {"only"}, 5);
  auto checkpoint = SafetensorsCheckpoint::OpenDirectory(dir_);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_EQ((*checkpoint)->Names(), (std::vector<std::string>{"only"}));
}

TEST_F(CheckpointTest, MissingDirectoryOrFilesIsNotFound) {
  auto absent = SafetensorsCheckpoint::OpenDirectory(Path("absent"));
  EXPECT_EQ(absent.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(absent.status().message().find("absent"), std::string::npos);
  ExpectError(absl::StatusCode::kNotFound, {dir_, "model.safetensors.index.json"});
}

TEST_F(CheckpointTest, RejectsMalformedIndex) {
  WriteShardedCheckpoint();
  const std::pair<std::string, std::string> cases[] = {
      {"{\"weight_map\":", "invalid JSON"},
      {"[]", "not a JSON object"},
      {R"({"metadata":{}})", "missing 'weight_map'"},
      {R"({"weight_map":["a"]})", "not an object"},
      {R"({"weight_map":{}})", "empty"},
      {R"({"weight_map":{"a.bias":1}})", "'a.bias'"},
      {R"({"weight_map":{"a.bias":"../model-00001-of-00003.safetensors"}})", "'a.bias'"},
      {R"({"weight_map":{"a.bias":"/model-00001-of-00003.safetensors"}})", "relative path"},
  };
  for (const auto& [json, needle] : cases) {
    SCOPED_TRACE(json);
    WriteIndex(json);
    ExpectError(absl::StatusCode::kInvalidArgument,
                {Path(SafetensorsCheckpoint::kIndexFile), needle});
  }
}

TEST_F(CheckpointTest, MissingShardIsNotFound) {
  WriteShardedCheckpoint();
  ASSERT_EQ(std::remove(Path("model-00002-of-00003.safetensors").c_str()), 0);
  ExpectError(absl::StatusCode::kNotFound, {"model-00002-of-00003.safetensors", "'b.weight'"});
}

TEST_F(CheckpointTest, TensorMissingFromItsShardIsDataLoss) {
  WriteShardedCheckpoint();
  WriteShard(Path("model-00002-of-00003.safetensors"), {"b.other"}, 2);
  ExpectError(absl::StatusCode::kDataLoss, {"'b.weight'", "model-00002-of-00003.safetensors"});
}

TEST_F(CheckpointTest, TensorInTwoShardsIsInvalidArgument) {
  WriteShardedCheckpoint();
  WriteShard(Path("model-00002-of-00003.safetensors"), {"b.weight", "a.bias"}, 2);
  ExpectError(absl::StatusCode::kInvalidArgument,
              {"'a.bias'", "model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors"});
}

TEST_F(CheckpointTest, CorruptShardReportsShardAndCause) {
  WriteShardedCheckpoint();
  const std::string shard = Path("model-00003-of-00003.safetensors");
  const std::string bytes = ReadBytes(shard);
  WriteBytes(shard, bytes.substr(0, bytes.size() - 1));
  ExpectError(absl::StatusCode::kDataLoss, {shard, "truncated"});
}

}  // namespace
}  // namespace relserve
