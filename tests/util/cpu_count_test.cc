#include "server/util/cpu_count.h"

#include <sched.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace relserve {
namespace {

namespace fs = std::filesystem;

// A fake /proc/self/cgroup and /sys/fs/cgroup tree in a temporary folder.
class CpuCountTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) / ("cpu-count-" + std::to_string(getpid()) + "-" +
                                              ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_ / "sys");
  }
  void TearDown() override { fs::remove_all(root_); }

  void Write(const std::string& relative, const std::string& text) {
    const fs::path p = root_ / relative;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  std::string proc() const { return (root_ / "proc-self-cgroup").string(); }
  std::string sys() const { return (root_ / "sys").string(); }
  double Quota() const { return CgroupCpuQuota(proc(), sys()); }

  fs::path root_;
};

TEST_F(CpuCountTest, CgroupV2TakesTheSmallestLimitOfTheCgroupAndItsAncestors) {
  Write("proc-self-cgroup", "0::/kubepods/pod1/ctr\n");
  Write("sys/kubepods/pod1/ctr/cpu.max", "400000 100000\n");
  EXPECT_DOUBLE_EQ(Quota(), 4);
  Write("sys/kubepods/cpu.max", "250000 100000\n");
  EXPECT_DOUBLE_EQ(Quota(), 2.5);
}

TEST_F(CpuCountTest, CgroupV2MaxMeansNoLimit) {
  Write("proc-self-cgroup", "0::/user.slice\n");
  Write("sys/user.slice/cpu.max", "max 100000\n");
  EXPECT_DOUBLE_EQ(Quota(), 0);
}

TEST_F(CpuCountTest, CgroupV2InsideAContainerNamespaceReadsTheRoot) {
  Write("proc-self-cgroup", "0::/\n");
  Write("sys/cpu.max", "150000 100000\n");
  EXPECT_DOUBLE_EQ(Quota(), 1.5);
}

TEST_F(CpuCountTest, CgroupV1CfsQuota) {
  Write("proc-self-cgroup", "4:memory:/x\n2:cpu,cpuacct:/docker/abc\n");
  Write("sys/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "300000\n");
  Write("sys/cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n");
  EXPECT_DOUBLE_EQ(Quota(), 3);
  Write("sys/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "-1\n");  // no limit
  EXPECT_DOUBLE_EQ(Quota(), 0);
  // A container sees its own cgroup at the mount's root while /proc names the host's path.
  Write("sys/cpu/cpu.cfs_quota_us", "200000\n");
  Write("sys/cpu/cpu.cfs_period_us", "100000\n");
  Write("proc-self-cgroup", "1:cpu:/docker/abc\n");
  EXPECT_DOUBLE_EQ(Quota(), 2);
}

TEST_F(CpuCountTest, MissingOrMalformedFilesMeanNoLimit) {
  EXPECT_DOUBLE_EQ(Quota(), 0);  // no /proc/self/cgroup at all
  Write("proc-self-cgroup", "garbage\n0::/a\n");
  Write("sys/a/cpu.max", "lots 100000\n");
  EXPECT_DOUBLE_EQ(Quota(), 0);
}

TEST_F(CpuCountTest, DetectTakesTheAffinityMaskAndRoundsAQuotaDown) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  const int allowed = CPU_COUNT(&set);

  CpuCount none = DetectCpuCount(proc(), sys());
  EXPECT_EQ(none.affinity, allowed);
  EXPECT_EQ(none.cpus, allowed);
  EXPECT_THAT(none.Describe(), ::testing::HasSubstr("no cgroup quota"));

  Write("proc-self-cgroup", "0::/\n");
  Write("sys/cpu.max", "150000 100000\n");
  CpuCount limited = DetectCpuCount(proc(), sys());
  EXPECT_EQ(limited.cpus, 1);  // 1.5 CPUs: plan for 1
  EXPECT_THAT(limited.Describe(), ::testing::HasSubstr("cgroup quota 1.5"));

  Write("sys/cpu.max", "50000 100000\n");
  EXPECT_EQ(DetectCpuCount(proc(), sys()).cpus, 1);  // never 0
}

}  // namespace
}  // namespace relserve
