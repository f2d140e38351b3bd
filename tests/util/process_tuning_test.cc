#include "server/util/process_tuning.h"

#include <cstdlib>

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

}  // namespace
}  // namespace relserve
