#include "server/hub/download_progress.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace relserve {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(DownloadProgressTest, LogLinesAtStartEveryTenSecondsAndAtTheEnd) {
  absl::Time now = absl::FromUnixSeconds(1000);
  std::vector<std::string> lines;
  DownloadProgress p(false, [&lines](const std::string& s) { lines.push_back(s); }, [&now] { return now; });
  p.Start("org/repo: model.safetensors", 0, 4'000'000);
  now += absl::Seconds(1);
  p.Advance(1'000'000);
  ASSERT_EQ(lines.size(), 1u);  // nothing before 10 s
  now += absl::Seconds(10);
  p.Advance(1'000'000);
  now += absl::Seconds(1);
  p.Advance(2'000'000);
  p.Finish(true);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "downloading org/repo: model.safetensors (4.0 MB)\n");
  EXPECT_THAT(lines[1], HasSubstr("org/repo: model.safetensors  2.0 MB / 4.0 MB   50%"));
  EXPECT_EQ(lines[2], "downloaded org/repo: model.safetensors: 4.0 MB in 12.0 s\n");
}

TEST(DownloadProgressTest, AResumedOrFailedDownloadSaysSo) {
  absl::Time now = absl::FromUnixSeconds(1000);
  std::vector<std::string> lines;
  DownloadProgress p(false, [&lines](const std::string& s) { lines.push_back(s); }, [&now] { return now; });
  p.Start("org/repo: spm.model", 1500, 3000);
  p.Advance(100);
  p.Finish(false);
  EXPECT_EQ(lines[0], "downloading org/repo: spm.model (3.0 kB), resuming after 1.5 kB\n");
  EXPECT_EQ(lines[1], "download of org/repo: spm.model stopped after 1.6 kB of 3.0 kB\n");
}

TEST(DownloadProgressTest, ATerminalLineIsRedrawnInPlace) {
  absl::Time now = absl::FromUnixSeconds(1000);
  std::vector<std::string> writes;
  DownloadProgress p(true, [&writes](const std::string& s) { writes.push_back(s); }, [&now] { return now; });
  p.Start("org/repo: model.safetensors", 0, 2000);
  now += absl::Milliseconds(50);
  p.Advance(500);  // too soon to redraw
  now += absl::Seconds(1);
  p.Advance(500);
  p.Finish(true);
  ASSERT_EQ(writes.size(), 3u);
  for (const std::string& w : writes) EXPECT_THAT(w, StartsWith("\r"));
  EXPECT_THAT(writes[1], HasSubstr("1.0 kB / 2.0 kB   50%"));
  EXPECT_THAT(writes[2], HasSubstr("\x1b[K\n"));
}

TEST(DownloadProgressTest, Sizes) {
  EXPECT_EQ(FormatBytes(999), "999 B");
  EXPECT_EQ(FormatBytes(294872), "294.9 kB");
  EXPECT_EQ(FormatBytes(1'500'000'000), "1.5 GB");
}

}  // namespace
}  // namespace relserve
