#include "server/checkpoint/model_checkpoint.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/checkpoint/pytorch_bin_checkpoint.h"
#include "server/safetensors/safetensors_writer.h"
#include "tests/safetensors/test_files.h"

namespace relserve {
namespace {

using ::relserve::testing::ReadBytes;
using ::relserve::testing::TestDataPath;
using ::relserve::testing::WriteBytes;

const char* const kShard1 = "pytorch_model-00001-of-00002.bin";
const char* const kShard2 = "pytorch_model-00002-of-00002.bin";

float FirstFloat(const TensorView* view) {
  float v;
  std::memcpy(&v, view->data, 4);
  return v;
}

class ModelCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::ScratchDir(); }
  void TearDown() override { testing::RemoveScratchDir(dir_); }

  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  void CopyFixture(const std::string& from, const std::string& to) {
    WriteBytes(Path(to), ReadBytes(TestDataPath("pytorch_bin/" + from)));
  }
  // The shards transformers' save_pretrained wrote (make_fixtures.py).
  void CopySharded() {
    for (const char* name : {kShard1, kShard2, "pytorch_model.bin.index.json"}) {
      CopyFixture(std::string("sharded/") + name, name);
    }
  }
  void WriteSafetensors(const std::string& name, const std::string& tensor) {
    SafetensorsWriter writer;
    const float value = 7;
    ASSERT_TRUE(writer.Add(tensor, StDType::kF32, {1}, &value, 4).ok());
    ASSERT_TRUE(writer.WriteFile(Path(name)).ok());
  }
  void ExpectError(absl::StatusCode code, const std::vector<std::string>& needles) {
    auto checkpoint = OpenModelCheckpoint(dir_);
    ASSERT_FALSE(checkpoint.ok());
    EXPECT_EQ(checkpoint.status().code(), code) << checkpoint.status();
    for (const std::string& needle : needles) {
      EXPECT_NE(checkpoint.status().message().find(needle), std::string::npos)
          << "'" << needle << "' not in " << checkpoint.status();
    }
  }

  std::string dir_;
};

TEST_F(ModelCheckpointTest, ReadsShardedPytorchBin) {
  auto checkpoint = OpenModelCheckpoint(TestDataPath("pytorch_bin/sharded"));
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_NE(dynamic_cast<const PytorchBinCheckpoint*>(checkpoint->get()), nullptr);
  EXPECT_EQ((*checkpoint)->Names(), (std::vector<std::string>{"a.bias", "a.weight", "b.weight"}));
  EXPECT_EQ((*checkpoint)->file_names(), (std::vector<std::string>{kShard1, kShard2}));
  const std::pair<const char*, float> expected[] = {{"a.bias", 2}, {"a.weight", 1}, {"b.weight", 3}};
  for (const auto& [name, value] : expected) {
    auto view = (*checkpoint)->Get(name);
    ASSERT_TRUE(view.ok()) << view.status();
    EXPECT_EQ(FirstFloat(*view), value) << name;
  }
  EXPECT_EQ((*checkpoint)->Get("c").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ModelCheckpointTest, ReadsASingleFileBeforeItsIndex) {
  CopySharded();
  CopyFixture("protocol4.bin", "pytorch_model.bin");
  auto checkpoint = OpenModelCheckpoint(dir_);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_EQ((*checkpoint)->Names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ((*checkpoint)->file_names(), (std::vector<std::string>{"pytorch_model.bin"}));
}

// transformers' order: safetensors first, single file before index, in both formats.
TEST_F(ModelCheckpointTest, PrefersSafetensors) {
  CopySharded();
  CopyFixture("protocol4.bin", "pytorch_model.bin");
  WriteSafetensors("model.safetensors", "from_safetensors");
  auto single = OpenModelCheckpoint(dir_);
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_EQ((*single)->Names(), (std::vector<std::string>{"from_safetensors"}));

  ASSERT_EQ(std::remove(Path("model.safetensors").c_str()), 0);
  WriteSafetensors("model-00001-of-00001.safetensors", "from_shard");
  WriteBytes(Path("model.safetensors.index.json"),
             R"({"weight_map": {"from_shard": "model-00001-of-00001.safetensors"}})");
  auto sharded = OpenModelCheckpoint(dir_);
  ASSERT_TRUE(sharded.ok()) << sharded.status();
  EXPECT_EQ((*sharded)->Names(), (std::vector<std::string>{"from_shard"}));
}

TEST_F(ModelCheckpointTest, NoWeightsNamesEveryFileLookedFor) {
  ExpectError(absl::StatusCode::kNotFound, {dir_, "model.safetensors, model.safetensors.index.json, pytorch_model.bin or "
                                                  "pytorch_model.bin.index.json"});
  auto absent = OpenModelCheckpoint(Path("absent"));
  EXPECT_EQ(absent.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(absent.status().message().find("no such directory"), std::string::npos);
}

TEST_F(ModelCheckpointTest, ADirectoryInPlaceOfTheWeightsIsAnError) {
  ASSERT_EQ(mkdir(Path("pytorch_model.bin").c_str(), 0755), 0);
  ExpectError(absl::StatusCode::kInvalidArgument, {"pytorch_model.bin"});
}

TEST_F(ModelCheckpointTest, MissingShardIsNotFound) {
  CopySharded();
  ASSERT_EQ(std::remove(Path(kShard2).c_str()), 0);
  ExpectError(absl::StatusCode::kNotFound, {"pytorch_model.bin.index.json", kShard2, "'b.weight'"});
}

TEST_F(ModelCheckpointTest, TensorMissingFromItsShardIsDataLoss) {
  CopySharded();
  WriteBytes(Path("pytorch_model.bin.index.json"),
             std::string(R"({"weight_map": {"a.bias": ")") + kShard1 + R"(", "a.weight": ")" + kShard1 +
                 R"(", "b.weight": ")" + kShard1 + R"("}})");
  ExpectError(absl::StatusCode::kDataLoss, {"'b.weight' is listed in shard '", kShard1, "but that shard does not hold it"});
}

TEST_F(ModelCheckpointTest, CorruptOrRefusedShardNamesIt) {
  CopySharded();
  const std::string shard = ReadBytes(Path(kShard1));
  WriteBytes(Path(kShard1), shard.substr(0, shard.size() / 2));
  ExpectError(absl::StatusCode::kDataLoss, {std::string("shard '") + kShard1 + "'", "truncated"});
  CopyFixture("malicious_system.bin", kShard1);
  ExpectError(absl::StatusCode::kInvalidArgument, {kShard1, "refused global \"posix.system\""});
}

TEST_F(ModelCheckpointTest, RefusesAShardOutsideTheDirectory) {
  CopySharded();
  WriteBytes(Path("pytorch_model.bin.index.json"), R"({"weight_map": {"a.bias": "../pytorch_model.bin"}})");
  ExpectError(absl::StatusCode::kInvalidArgument, {"not a relative path inside the directory"});
}

}  // namespace
}  // namespace relserve
