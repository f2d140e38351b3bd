// Loading: model directories, their tokenizer_config.json, and files that are missing or broken.

#include <filesystem>
#include <string>

#include "gtest/gtest.h"
#include "server/tokenizer/tokenizer.h"
#include "tests/tokenizer/tokenizer_test_util.h"

namespace relserve {
namespace {

using ::relserve::testing::CopyFile;
using ::relserve::testing::MakeTempDir;
using ::relserve::testing::ReferenceModelPath;
using ::relserve::testing::WriteFile;

bool Contains(const absl::Status& status, std::string_view part) {
  return std::string(status.message()).find(part) != std::string::npos;
}

TEST(TokenizerLoadTest, DebertaDirectoryWithConfig) {
  const std::string dir = MakeTempDir("load_deberta");
  CopyFile(ReferenceModelPath(), JoinPath(dir, "spm.model"));
  WriteFile(JoinPath(dir, "tokenizer_config.json"),
            R"({"do_lower_case": true, "model_max_length": 64, "vocab_type": "spm"})");
  auto tokenizer = Tokenizer::Load(dir, TokenizerFamily::kDeberta, 512);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_TRUE((*tokenizer)->lower_case());
  EXPECT_EQ((*tokenizer)->default_max_length(), 64);  // the file's limit wins over the argument

  auto plain = Tokenizer::LoadModelFile(ReferenceModelPath(), TokenizerFamily::kDeberta, 512);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE((*plain)->lower_case());
  // DebertaV2Tokenizer lowers with Python's str.lower: every script, not only ASCII.
  EXPECT_EQ((*tokenizer)->EncodeRaw("MiXeD CaSe \xC3\x89T\xC3\xA9 \xCE\xA3\xCE\x9F").value(),
            (*plain)->EncodeRaw("mixed case \xC3\xA9t\xC3\xA9 \xCF\x83\xCE\xBF").value());
  EXPECT_NE((*plain)->EncodeRaw("MiXeD").value(), (*plain)->EncodeRaw("mixed").value());
  // U+0130 (İ) lowers to "i" and a combining dot above, and "i" is in the vocabulary.
  EXPECT_EQ((*tokenizer)->EncodeRaw("\xC4\xB0").value(), (*plain)->EncodeRaw("i\xCC\x87").value());
  EXPECT_NE((*plain)->EncodeRaw("\xC4\xB0").value(), (*plain)->EncodeRaw("i\xCC\x87").value());
}

TEST(TokenizerLoadTest, T5IgnoresDoLowerCase) {
  // T5Tokenizer has no do_lower_case: transformers passes the key through and lowers nothing.
  const std::string dir = MakeTempDir("load_t5_lower");
  CopyFile(ReferenceModelPath(), JoinPath(dir, "spiece.model"));
  WriteFile(JoinPath(dir, "tokenizer_config.json"), R"({"do_lower_case": true})");
  auto tokenizer = Tokenizer::Load(dir, TokenizerFamily::kT5, 512);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_FALSE((*tokenizer)->lower_case());
  auto plain = Tokenizer::LoadModelFile(ReferenceModelPath(), TokenizerFamily::kT5, 512);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ((*tokenizer)->EncodeRaw("MiXeD").value(), (*plain)->EncodeRaw("MiXeD").value());
}

TEST(TokenizerLoadTest, ConfiguredSpecialTokenNamesAreUsed) {
  const std::string dir = MakeTempDir("load_special");
  CopyFile(ReferenceModelPath(), JoinPath(dir, "spm.model"));
  // Swapping the roles of [CLS] and [SEP] is silly but shows the names are read.
  WriteFile(JoinPath(dir, "special_tokens_map.json"),
            R"({"cls_token": {"content": "[SEP]"}, "sep_token": "[CLS]"})");
  auto tokenizer = Tokenizer::Load(dir, TokenizerFamily::kDeberta, 512);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ((*tokenizer)->cls_id(), 2);
  EXPECT_EQ((*tokenizer)->sep_id(), 1);
}

TEST(TokenizerLoadTest, NoLimitSentinelFallsBackToTheArgument) {
  const std::string dir = MakeTempDir("load_sentinel");
  CopyFile(ReferenceModelPath(), JoinPath(dir, "spm.model"));
  WriteFile(JoinPath(dir, "tokenizer_config.json"),
            R"({"model_max_length": 1000000000000000019884624838656})");
  auto tokenizer = Tokenizer::Load(dir, TokenizerFamily::kDeberta, 256);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ((*tokenizer)->default_max_length(), 256);

  auto no_limit = Tokenizer::Load(dir, TokenizerFamily::kDeberta, 0);
  EXPECT_EQ(no_limit.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Tokenizer::LoadModelFile(ReferenceModelPath(), TokenizerFamily::kT5, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TokenizerLoadTest, EitherModelFileNameIsAccepted) {
  const std::string dir = MakeTempDir("load_t5_spm_name");
  CopyFile(ReferenceModelPath(), JoinPath(dir, "spm.model"));
  EXPECT_TRUE(Tokenizer::Load(dir, TokenizerFamily::kT5, 512).ok());
}

TEST(TokenizerLoadTest, MissingModelIsNotFound) {
  auto file = Tokenizer::LoadModelFile(JoinPath(MakeTempDir("load_missing"), "nope.model"),
                                       TokenizerFamily::kDeberta, 512);
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(Contains(file.status(), "nope.model")) << file.status();

  const std::string empty_dir = MakeTempDir("load_empty_dir");
  auto dir = Tokenizer::Load(empty_dir, TokenizerFamily::kDeberta, 512);
  EXPECT_EQ(dir.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(Contains(dir.status(), "spm.model")) << dir.status();
  EXPECT_TRUE(Contains(dir.status(), "spiece.model")) << dir.status();

  auto no_dir = Tokenizer::Load(JoinPath(empty_dir, "absent"), TokenizerFamily::kT5, 512);
  EXPECT_EQ(no_dir.status().code(), absl::StatusCode::kNotFound);
}

TEST(TokenizerLoadTest, CorruptModelIsAnErrorNotACrash) {
  const std::string dir = MakeTempDir("load_corrupt");
  auto model = ReadFileToString(ReferenceModelPath());
  ASSERT_TRUE(model.ok());
  std::string garbage(4096, '\0');
  for (size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<char>((i * 7919u) >> 3);
  const std::pair<const char*, std::string> files[] = {
      {"empty.model", ""},
      {"truncated.model", model->substr(0, model->size() / 3)},
      {"garbage.model", garbage},
      {"json.model", R"({"not": "a model"})"},
  };
  for (const auto& [name, contents] : files) {
    const std::string path = JoinPath(dir, name);
    WriteFile(path, contents);
    auto tokenizer = Tokenizer::LoadModelFile(path, TokenizerFamily::kDeberta, 512);
    EXPECT_EQ(tokenizer.status().code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_TRUE(Contains(tokenizer.status(), path)) << tokenizer.status();
  }
  // SentencePiece itself throws when handed a directory.
  EXPECT_EQ(Tokenizer::LoadModelFile(dir, TokenizerFamily::kDeberta, 512).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TokenizerLoadTest, BrokenConfigIsInvalidArgument) {
  const std::string dir = MakeTempDir("load_bad_config");
  CopyFile(ReferenceModelPath(), JoinPath(dir, "spm.model"));
  WriteFile(JoinPath(dir, "tokenizer_config.json"), R"({"do_lower_case": "no"})");
  auto tokenizer = Tokenizer::Load(dir, TokenizerFamily::kDeberta, 512);
  EXPECT_EQ(tokenizer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(tokenizer.status(), "tokenizer_config.json")) << tokenizer.status();
}

// A directory under a tokenizer file's name is an error naming it: it used to count as no file,
// so that spm.model as a directory gave "no SentencePiece model" (or, with spiece.model
// present, went unnoticed), and tokenizer_config.json as one was skipped.
TEST(TokenizerLoadTest, DirectoriesUnderFileNamesAreErrors) {
  for (const char* name : {"spm.model", "spiece.model", "tokenizer_config.json", "special_tokens_map.json"}) {
    const std::string dir = MakeTempDir(std::string("load_dir_") + name);
    if (std::string(name) != "spm.model") CopyFile(ReferenceModelPath(), JoinPath(dir, "spm.model"));
    std::filesystem::create_directory(JoinPath(dir, name));
    auto tokenizer = Tokenizer::Load(dir, TokenizerFamily::kDeberta, 512);
    EXPECT_EQ(tokenizer.status().code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_TRUE(Contains(tokenizer.status(), std::string(name) + ": is a directory")) << tokenizer.status();
  }
}

// A number beyond double range in tokenizer_config.json is an error naming the key; it used to
// abort the process.
TEST(TokenizerLoadTest, NumberBeyondDoubleRangeInConfigIsAnError) {
  const std::string dir = MakeTempDir("load_overflow");
  CopyFile(ReferenceModelPath(), JoinPath(dir, "spm.model"));
  WriteFile(JoinPath(dir, "tokenizer_config.json"), R"({"model_max_length": 1e400})");
  auto tokenizer = Tokenizer::Load(dir, TokenizerFamily::kDeberta, 512);
  EXPECT_EQ(tokenizer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(tokenizer.status(), "tokenizer_config.json: invalid JSON at \"model_max_length\"")) << tokenizer.status();
}

}  // namespace
}  // namespace relserve
