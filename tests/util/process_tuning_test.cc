#include "server/util/process_tuning.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace relserve {
namespace {

class AllocatorModeTest : public ::testing::Test {
 protected:
  void SetUp() override { Clear(); }
  void TearDown() override { Clear(); }
  static void Clear() {
    unsetenv("RELSERVE_ALLOCATOR");
    unsetenv("RELSERVE_MALLOC_DEFAULTS");
  }
  static AllocatorMode Mode() {
    auto mode = AllocatorModeFromEnvironment();
    EXPECT_TRUE(mode.ok()) << mode.status();
    return mode.value_or(AllocatorMode::kCache);
  }
};

TEST_F(AllocatorModeTest, TheBufferCacheByDefault) {
  EXPECT_EQ(Mode(), AllocatorMode::kCache);
  setenv("RELSERVE_ALLOCATOR", "", 1);
  EXPECT_EQ(Mode(), AllocatorMode::kCache);
}

TEST_F(AllocatorModeTest, EachModeByName) {
  setenv("RELSERVE_ALLOCATOR", "cache", 1);
  EXPECT_EQ(Mode(), AllocatorMode::kCache);
  setenv("RELSERVE_ALLOCATOR", "heap", 1);
  EXPECT_EQ(Mode(), AllocatorMode::kHeap);
  setenv("RELSERVE_ALLOCATOR", "system", 1);
  EXPECT_EQ(Mode(), AllocatorMode::kSystem);
}

TEST_F(AllocatorModeTest, TheOlderSwitchMeansSystemUnlessTheModeIsNamed) {
  setenv("RELSERVE_MALLOC_DEFAULTS", "1", 1);
  EXPECT_EQ(Mode(), AllocatorMode::kSystem);
  setenv("RELSERVE_ALLOCATOR", "heap", 1);
  EXPECT_EQ(Mode(), AllocatorMode::kHeap);
  unsetenv("RELSERVE_ALLOCATOR");
  setenv("RELSERVE_MALLOC_DEFAULTS", "0", 1);
  EXPECT_EQ(Mode(), AllocatorMode::kCache);
}

TEST_F(AllocatorModeTest, AnUnknownValueNamesTheVariableAndTheChoices) {
  setenv("RELSERVE_ALLOCATOR", "jemalloc", 1);
  auto mode = AllocatorModeFromEnvironment();
  ASSERT_EQ(mode.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(mode.status().message()),
              ::testing::AllOf(::testing::HasSubstr("RELSERVE_ALLOCATOR=\"jemalloc\""),
                               ::testing::HasSubstr("cache, heap or system")));
}

TEST(AsksForInt8Test, EitherFlagFormOrTheEnvironment) {
  unsetenv("RELSERVE_DTYPE");
  auto asks = [](std::vector<std::string> args) {
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    return AsksForInt8(argv.data());
  };
  EXPECT_TRUE(asks({"relserve", "--model", "m=/m", "--dtype", "int8"}));
  EXPECT_TRUE(asks({"relserve-model", "bench", "--dtype=int8"}));
  EXPECT_FALSE(asks({"relserve", "--dtype", "bfloat16"}));
  EXPECT_FALSE(asks({"relserve", "--dtype"}));  // no value: the flag parser's error, not ours
  EXPECT_FALSE(asks({"relserve", "--model", "int8"}));
  EXPECT_FALSE(asks({"relserve"}));
  setenv("RELSERVE_DTYPE", "int8", 1);
  EXPECT_TRUE(asks({"relserve"}));
  unsetenv("RELSERVE_DTYPE");
}

}  // namespace
}  // namespace relserve
