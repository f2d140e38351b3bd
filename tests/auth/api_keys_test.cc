#include "server/auth/api_keys.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace relserve {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(ConstantTimeEqualsTest, AgreesWithEquality) {
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_TRUE(ConstantTimeEquals("secret-key", "secret-key"));
  EXPECT_TRUE(ConstantTimeEquals(std::string("a\0b", 3), std::string("a\0b", 3)));
  EXPECT_FALSE(ConstantTimeEquals("secret-key", "Secret-key"));  // first byte
  EXPECT_FALSE(ConstantTimeEquals("secret-key", "secret-kez"));  // last byte
  EXPECT_FALSE(ConstantTimeEquals("secret-key", "secret-ke"));   // a prefix
  EXPECT_FALSE(ConstantTimeEquals("secret-key", "secret-key2"));
  EXPECT_FALSE(ConstantTimeEquals("", "x"));
  EXPECT_FALSE(ConstantTimeEquals(std::string("a\0b", 3), std::string("a\0c", 3)));
}

// The least time, over several runs, that comparing `a` with `b` takes.
double MinSeconds(const std::string& a, const std::string& b) {
  double best = 1e9;
  for (int i = 0; i < 15; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const bool equal = ConstantTimeEquals(a, b);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_FALSE(equal);
    best = std::min(best, s);
  }
  return best;
}

// Where two equally long strings differ does not change the time: a comparison that stops at
// the first differing byte would answer a difference in the first byte of 4 MiB about a
// thousand times sooner than one in the last byte.
TEST(ConstantTimeEqualsTest, TimeDoesNotDependOnWhereTheStringsDiffer) {
  const std::string key(4 << 20, 'k');
  std::string first = key, last = key;
  first.front() = 'x';
  last.back() = 'x';
  const double at_first = MinSeconds(key, first);
  const double at_last = MinSeconds(key, last);
  EXPECT_GT(at_first / at_last, 0.5) << at_first << " s against " << at_last << " s";
  EXPECT_LT(at_first / at_last, 2.0) << at_first << " s against " << at_last << " s";
}

std::unique_ptr<ApiKeys> Keys(const std::vector<std::string>& keys) {
  auto k = ApiKeys::Create(keys, "--api-key");
  EXPECT_TRUE(k.ok()) << k.status();
  return k.ok() ? std::move(*k) : nullptr;
}

TEST(ApiKeysTest, BearerTokenWithTheKeyPasses) {
  auto keys = Keys({"k3y-0ne"});
  EXPECT_TRUE(keys->Check("Bearer k3y-0ne").ok());
  EXPECT_TRUE(keys->Check("bearer k3y-0ne").ok());  // the scheme's case does not matter
  EXPECT_TRUE(keys->Check("  BEARER \t k3y-0ne  ").ok());
}

TEST(ApiKeysTest, RefusalsSayWhetherTheKeyWasMissingOrWrongAndNeverQuoteIt) {
  auto keys = Keys({"k3y-0ne"});
  struct Case {
    std::optional<std::string_view> header;
    const char* message;
  };
  const std::vector<Case> cases = {
      {std::nullopt, "missing API key"},
      {"", "missing API key"},
      {"Bearer", "missing API key"},
      {"Bearer   ", "missing API key"},
      {"k3y-0ne", "not a Bearer token"},  // the key without the scheme
      {"Basic k3y-0ne", "not a Bearer token"},
      {"Bearer k3y-0nE", "invalid API key"},
      {"Bearer k3y-0ne2", "invalid API key"},
      {"Bearer k3y-0n", "invalid API key"},
      {"Bearer k3y 0ne", "invalid API key"},
  };
  for (const Case& c : cases) {
    const absl::Status s = keys->Check(c.header);
    EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << c.message;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.message)) << s;
    EXPECT_THAT(std::string(s.message()), Not(HasSubstr("k3y"))) << s;
  }
  EXPECT_THAT(std::string(keys->Check(std::nullopt).message()), HasSubstr("authorization: Bearer <key>"));
}

TEST(ApiKeysTest, AnyOfSeveralKeysPasses) {
  auto keys = Keys({"old-key", "new-key"});
  EXPECT_EQ(keys->size(), 2u);
  EXPECT_TRUE(keys->Check("Bearer old-key").ok());
  EXPECT_TRUE(keys->Check("Bearer new-key").ok());
  EXPECT_EQ(keys->Check("Bearer other-key").code(), absl::StatusCode::kUnauthenticated);
}

TEST(ApiKeysTest, KeysMustBeVisibleAsciiAndErrorsDoNotQuoteThem) {
  for (const std::string& bad :
       std::vector<std::string>{"", "with space", "tab\there", "caf\xc3\xa9", std::string("nul\0", 4)}) {
    auto k = ApiKeys::Create({bad}, "--api-key");
    EXPECT_EQ(k.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(k.status().message()), HasSubstr("--api-key")) << bad;
    if (bad.size() > 3) {
      EXPECT_THAT(std::string(k.status().message()), Not(HasSubstr(bad.substr(0, 3))));
    }
  }
  EXPECT_EQ(ApiKeys::Create({}, "--api-key").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(ApiKeys::Create({"good", "not good"}, "--api-key-file f").status().message()),
              HasSubstr("--api-key-file f (key 2)"));
}

TEST(ApiKeyFileTest, OneKeyPerLineBlankLinesAndWhitespaceIgnored) {
  auto keys = ParseApiKeyFile("\n  first-key  \r\n\n\tsecond-key\nthird-key", "keys.txt");
  ASSERT_TRUE(keys.ok()) << keys.status();
  EXPECT_THAT(*keys, ElementsAre("first-key", "second-key", "third-key"));
}

TEST(ApiKeyFileTest, BadContentsNameTheFileAndTheLine) {
  for (const std::string empty : {"", "\n\n", "  \r\n\t\n"}) {
    auto keys = ParseApiKeyFile(empty, "keys.txt");
    EXPECT_EQ(keys.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(keys.status().message()), HasSubstr("--api-key-file keys.txt: the file holds no API key"));
  }
  auto keys = ParseApiKeyFile("good-key\n\nbad key-part\n", "keys.txt");
  EXPECT_EQ(keys.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(keys.status().message()), HasSubstr("--api-key-file keys.txt: line 3:"));
  EXPECT_THAT(std::string(keys.status().message()), Not(HasSubstr("key-part")));
}

class ApiKeyFlagsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("relserve-api-keys-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& contents) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << contents;
    return path;
  }
  std::filesystem::path dir_;
};

TEST_F(ApiKeyFlagsTest, NeitherKeyNorFileMeansNoKeys) {
  auto keys = ApiKeys::FromFlags("", "");
  ASSERT_TRUE(keys.ok()) << keys.status();
  EXPECT_EQ(*keys, nullptr);
}

TEST_F(ApiKeyFlagsTest, KeyOrFile) {
  auto one = ApiKeys::FromFlags("the-key", "");
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_TRUE((*one)->Check("Bearer the-key").ok());
  auto file = ApiKeys::FromFlags("", Write("keys", "a-key\nb-key\n"));
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->size(), 2u);
  EXPECT_TRUE((*file)->Check("Bearer b-key").ok());
  EXPECT_FALSE((*file)->Check("Bearer the-key").ok());
}

TEST_F(ApiKeyFlagsTest, BadFilesAndBothFlagsNameTheFlag) {
  struct Case {
    std::string key, file;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"k", Write("keys", "k\n"), "--api-key and --api-key-file exclude each other"},
      {"", (dir_ / "absent").string(), "--api-key-file: " + (dir_ / "absent").string() + ": no such file"},
      {"", dir_.string(), "--api-key-file: " + dir_.string() + ": not a regular file"},
      {"", "/dev/zero", "--api-key-file: /dev/zero: not a regular file"},
      {"", Write("empty", ""), "the file holds no API key"},
      {"", Write("big", std::string((1 << 20) + 1, 'k')), "more than the limit of 1048576"},
  };
  for (const Case& c : cases) {
    auto keys = ApiKeys::FromFlags(c.key, c.file);
    EXPECT_FALSE(keys.ok()) << c.message;
    EXPECT_THAT(std::string(keys.status().message()), HasSubstr(c.message));
  }
  const std::string unreadable = Write("unreadable", "k\n");
  std::filesystem::permissions(unreadable, std::filesystem::perms::none);
  if (access(unreadable.c_str(), R_OK) != 0) {  // root reads anything
    auto keys = ApiKeys::FromFlags("", unreadable);
    EXPECT_FALSE(keys.ok());
    EXPECT_THAT(std::string(keys.status().message()), HasSubstr("--api-key-file: " + unreadable));
  }
}

}  // namespace
}  // namespace relserve
