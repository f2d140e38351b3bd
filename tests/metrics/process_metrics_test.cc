#include "server/metrics/process_metrics.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/metrics/server_metrics.h"
#include "tests/metrics/metrics_test_util.h"

namespace relserve {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

ProcessStats ReadSelf() {
  auto stats = ReadProcessStats();
  EXPECT_TRUE(stats.ok()) << stats.status();
  return stats.value_or(ProcessStats{});
}

double ProcessCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// A /proc lookalike in a temporary folder.
class FakeProc : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("process_metrics_test." + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "self" / "fd");
    for (const char* fd : {"0", "1", "2", "7"}) Write("self/fd/" + std::string(fd), "");
    // The command name holds spaces and parentheses, as a thread or process may name itself.
    // utime 14 = 250 ticks, stime 15 = 150, starttime 22 = 1000, vsize 23, rss 24 = 3000 pages.
    Write("self/stat",
          "4242 (relserve (worker) 1) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 150 0 0 20 0 9 0 1000 "
          "987654321 3000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n");
    Write("self/limits",
          "Limit                     Soft Limit           Hard Limit           Units     \n"
          "Max open files            1024                 524288               files     \n");
    Write("stat", "cpu  1 2 3\nbtime 1700000000\nprocesses 10\n");
    source_.process_dir = (dir_ / "self").string();
    source_.system_stat = (dir_ / "stat").string();
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const std::string& name, const std::string& text) { std::ofstream(dir_ / name) << text; }

  fs::path dir_;
  ProcessSource source_;
};

TEST_F(FakeProc, ReadsEveryFieldWhereProcPutsIt) {
  auto stats = ReadProcessStats(source_);
  ASSERT_TRUE(stats.ok()) << stats.status();
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  EXPECT_DOUBLE_EQ(stats->resident_memory_bytes, 3000.0 * static_cast<double>(sysconf(_SC_PAGESIZE)));
  EXPECT_DOUBLE_EQ(stats->virtual_memory_bytes, 987654321);
  EXPECT_DOUBLE_EQ(stats->open_fds, 4);
  EXPECT_DOUBLE_EQ(stats->max_fds, 1024);
  EXPECT_DOUBLE_EQ(stats->start_time_seconds, 1700000000 + 1000 / ticks);
  EXPECT_DOUBLE_EQ(stats->cpu_seconds_total, 400 / ticks);
}

TEST_F(FakeProc, UnlimitedDescriptorsAreInfinite) {
  Write("self/limits", "Max open files            unlimited            unlimited            files     \n");
  auto stats = ReadProcessStats(source_);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_TRUE(std::isinf(stats->max_fds));
  EXPECT_THAT(RenderProcessMetrics(*stats), HasSubstr("process_max_fds +Inf"));
}

TEST_F(FakeProc, MalformedOrMissingFilesAreErrorsNamingThem) {
  Write("self/stat", "4242 (relserve) S 1 2 3\n");  // cut short
  auto stats = ReadProcessStats(source_);
  EXPECT_EQ(stats.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(stats.status().message()), HasSubstr("self/stat: field 14"));

  Write("self/stat", "no parentheses here\n");
  EXPECT_THAT(std::string(ReadProcessStats(source_).status().message()), HasSubstr("no command name"));

  SetUp();
  Write("stat", "cpu 1 2 3\n");
  EXPECT_THAT(std::string(ReadProcessStats(source_).status().message()), HasSubstr("no btime line"));

  SetUp();
  fs::remove(dir_ / "self" / "limits");
  stats = ReadProcessStats(source_);
  EXPECT_EQ(stats.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(stats.status().message()), HasSubstr("self/limits"));
}

TEST(ProcessMetricsTest, ResidentMemoryFollowsTouchedPages) {
  const double before = ReadSelf().resident_memory_bytes;
  EXPECT_GT(before, 1 << 20);
  const size_t bytes = size_t{64} << 20;
  void* block = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(block, MAP_FAILED);
  std::memset(block, 1, bytes);
  const double touched = ReadSelf().resident_memory_bytes;
  EXPECT_GE(touched - before, 0.9 * static_cast<double>(bytes));
  munmap(block, bytes);
  EXPECT_LE(ReadSelf().resident_memory_bytes, touched - 0.9 * static_cast<double>(bytes));
}

TEST(ProcessMetricsTest, DescriptorsStartAndCpuTimeOfThisProcess) {
  const ProcessStats first = ReadSelf();
  const int fd = open("/dev/null", O_RDONLY);
  ASSERT_GE(fd, 0);
  EXPECT_DOUBLE_EQ(ReadSelf().open_fds, first.open_fds + 1);
  close(fd);
  rlimit limit{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &limit), 0);
  if (limit.rlim_cur != RLIM_INFINITY) {
    EXPECT_DOUBLE_EQ(first.max_fds, static_cast<double>(limit.rlim_cur));
  }
  // Started before now, and not long before (a test process is seconds old).
  EXPECT_LE(first.start_time_seconds, NowSeconds() + 1);
  EXPECT_GT(first.start_time_seconds, NowSeconds() - 600);
  // A third of a second of this process's own CPU time (however busy the machine) shows in the
  // counter, which counts in clock ticks.
  const double cpu_start = ProcessCpuSeconds();
  volatile double sink = 0;
  while (ProcessCpuSeconds() - cpu_start < 0.35) sink = sink + std::sqrt(static_cast<double>(sink) + 1);
  EXPECT_GE(ReadSelf().cpu_seconds_total - first.cpu_seconds_total, 0.3);
}

TEST(ProcessMetricsTest, ServedWithTheServerMetrics) {
  ServerMetrics m;
  const metrics_test::Exposition e = metrics_test::ParseExposition(m.Render());
  EXPECT_TRUE(e.errors.empty());
  const std::map<std::string, std::string> expected = {
      {"process_resident_memory_bytes", "gauge"}, {"process_virtual_memory_bytes", "gauge"},
      {"process_open_fds", "gauge"},              {"process_max_fds", "gauge"},
      {"process_start_time_seconds", "gauge"},    {"process_cpu_seconds_total", "counter"},
  };
  for (const auto& [family, type] : expected) {
    ASSERT_TRUE(e.type.count(family)) << family;
    EXPECT_EQ(e.type.at(family), type) << family;
    EXPECT_FALSE(e.help.at(family).empty()) << family;
    ASSERT_EQ(e.Find(family).size(), 1u) << family;
  }
  EXPECT_GT(e.Find("process_resident_memory_bytes")[0].value, 1 << 20);
}

}  // namespace
}  // namespace relserve
