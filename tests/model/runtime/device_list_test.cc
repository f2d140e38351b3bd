#include "server/model/runtime/device_list.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/model/runtime/device.h"

namespace relserve {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(DeviceListTest, OneCopyPerItem) {
  auto one = ExpandDeviceList("cpu");
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_THAT(*one, ElementsAre("cpu"));
  auto twice = ExpandDeviceList("cpu, cpu");
  ASSERT_TRUE(twice.ok()) << twice.status();
  EXPECT_THAT(*twice, ElementsAre("cpu", "cpu"));
}

TEST(DeviceListTest, BadItemsAreNamed) {
  auto empty = ExpandDeviceList("cpu,,cpu");
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(empty.status().message()), HasSubstr("empty item"));
  auto unknown = ExpandDeviceList("cpu,tpu");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(unknown.status().message()), HasSubstr("\"tpu\""));
}

// "cuda" is every visible GPU; without CUDA (this build, or no device) it is refused as
// ParseDevice refuses it.
TEST(DeviceListTest, CudaIsEveryVisibleGpu) {
  auto all = ExpandDeviceList("cuda");
  if (!CudaCompiledIn() || CudaDeviceCount() == 0) {
    EXPECT_EQ(all.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(ExpandDeviceList("cpu,cuda:0").status().code(), absl::StatusCode::kFailedPrecondition);
    return;
  }
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(static_cast<int>(all->size()), CudaDeviceCount());
  for (int i = 0; i < CudaDeviceCount(); ++i) EXPECT_EQ((*all)[i], "cuda:" + std::to_string(i));
  auto mixed = ExpandDeviceList("cpu,cuda:0");
  EXPECT_EQ(mixed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(mixed.status().message()), HasSubstr("mixes the CPU and GPUs"));
  auto repeated = ExpandDeviceList("cuda:0,cuda:0");
  ASSERT_TRUE(repeated.ok()) << repeated.status();
  EXPECT_THAT(*repeated, ElementsAre("cuda:0", "cuda:0"));
}

}  // namespace
}  // namespace relserve
