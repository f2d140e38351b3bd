#include "server/util/fd_limit.h"

#include <sys/resource.h>

#include "gtest/gtest.h"

namespace relserve {
namespace {

// Restores the test process's descriptor limit whatever the test did to it.
class FdLimitTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved_), 0); }
  void TearDown() override { ::setrlimit(RLIMIT_NOFILE, &saved_); }
  rlimit saved_{};
};

TEST_F(FdLimitTest, RaisesTheSoftLimitToTheHardLimit) {
  if (saved_.rlim_max != RLIM_INFINITY && saved_.rlim_max <= 64) {
    GTEST_SKIP() << "hard limit " << saved_.rlim_max << " leaves nothing to raise";
  }
  rlimit low = saved_;
  low.rlim_cur = 64;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);

  const absl::StatusOr<OpenFilesLimit> raised = RaiseOpenFilesLimit();
  ASSERT_TRUE(raised.ok()) << raised.status();
  rlimit now{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &now), 0);
  EXPECT_EQ(raised->soft_before, 64u);
  EXPECT_EQ(raised->soft, now.rlim_cur);
  EXPECT_GT(now.rlim_cur, 64u);
  if (saved_.rlim_max != RLIM_INFINITY) {
    EXPECT_EQ(now.rlim_cur, saved_.rlim_max);
    EXPECT_EQ(raised->hard, saved_.rlim_max);
  }
  EXPECT_EQ(now.rlim_max, saved_.rlim_max);  // the hard limit itself is left alone
  EXPECT_EQ(raised->Describe(), "open files limit raised from 64 to " + std::to_string(now.rlim_cur));

  // A second call has nothing left to do.
  const absl::StatusOr<OpenFilesLimit> again = RaiseOpenFilesLimit();
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->soft_before, again->soft);
  EXPECT_EQ(again->Describe(), "open files limit " + std::to_string(now.rlim_cur) + " (the hard limit)");
}

}  // namespace
}  // namespace relserve
