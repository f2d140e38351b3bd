#include "client/length_distribution.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace relserve::client {
namespace {

using ::testing::HasSubstr;

std::map<int, int> Histogram(const LengthDistribution& d, int draws) {
  std::mt19937_64 rng(7);
  std::map<int, int> counts;
  for (int i = 0; i < draws; ++i) ++counts[d.Draw(rng)];
  return counts;
}

TEST(LengthDistributionTest, FixedAlwaysDrawsItsLength) {
  auto d = LengthDistribution::Parse("fixed:37");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->min(), 37);
  EXPECT_EQ(d->max(), 37);
  EXPECT_EQ(Histogram(*d, 100), (std::map<int, int>{{37, 100}}));
}

TEST(LengthDistributionTest, UniformCoversTheRangeEvenly) {
  auto d = LengthDistribution::Parse("uniform:10:13");
  ASSERT_TRUE(d.ok()) << d.status();
  const auto counts = Histogram(*d, 40000);
  ASSERT_EQ(counts.size(), 4u);
  EXPECT_EQ(counts.begin()->first, 10);
  EXPECT_EQ(counts.rbegin()->first, 13);
  for (const auto& [length, n] : counts) EXPECT_NEAR(n, 10000, 500) << length;
}

TEST(LengthDistributionTest, LogUniformHasAsManyDrawsPerOctave) {
  auto d = LengthDistribution::Parse("log-uniform:8:511");
  ASSERT_TRUE(d.ok()) << d.status();
  int octaves[6] = {};  // [8,16), [16,32), ..., [256,512)
  std::mt19937_64 rng(3);
  for (int i = 0; i < 60000; ++i) {
    const int x = d->Draw(rng);
    ASSERT_GE(x, 8);
    ASSERT_LE(x, 511);
    int o = 0;
    while ((16 << o) <= x) ++o;
    ++octaves[o];
  }
  for (int o = 0; o < 6; ++o) EXPECT_NEAR(octaves[o], 10000, 600) << "octave " << o;
}

TEST(LengthDistributionTest, SameSeedSameLengths) {
  auto d = LengthDistribution::Parse("log-uniform:8:512");
  ASSERT_TRUE(d.ok());
  std::mt19937_64 a(5), b(5);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(d->Draw(a), d->Draw(b));
}

TEST(LengthDistributionTest, ListDrawsOnlyListedLengthsWeightedByRepeats) {
  auto d = LengthDistribution::FromList("# lengths of a sample\n12\n\n40\n40\n 40 \n");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->min(), 12);
  EXPECT_EQ(d->max(), 40);
  const auto counts = Histogram(*d, 8000);
  ASSERT_EQ(counts.size(), 2u);
  EXPECT_NEAR(counts.at(12), 2000, 200);
  EXPECT_NEAR(counts.at(40), 6000, 200);
}

TEST(LengthDistributionTest, FileReadsOneLengthPerLine) {
  const std::string path = (std::filesystem::temp_directory_path() / "relserve-lengths-test.txt").string();
  std::ofstream(path) << "5\n9\n";
  auto d = LengthDistribution::Parse("file:" + path);
  std::filesystem::remove(path);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->min(), 5);
  EXPECT_EQ(d->max(), 9);
  EXPECT_EQ(d->spec(), "file:" + path);
}

TEST(LengthDistributionTest, BadSpecsSayWhatIsWrong) {
  struct Case {
    const char* spec;
    const char* message;
  };
  for (const Case& c : std::vector<Case>{{"fixed", "fixed takes one length"},
                                         {"fixed:x", "\"x\" is not an integer"},
                                         {"fixed:1", "at least 2"},
                                         {"uniform:9", "two lengths"},
                                         {"uniform:20:10", "A must not exceed B"},
                                         {"log-uniform:8:16:32", "two lengths"},
                                         {"normal:8:16", "unknown distribution"},
                                         {"file:/nonexistent/lengths.txt", "cannot read"},
                                         {"file:", "no file named"}}) {
    auto d = LengthDistribution::Parse(c.spec, 2);
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << c.spec;
    EXPECT_THAT(std::string(d.status().message()), HasSubstr(c.message)) << c.spec;
    EXPECT_THAT(std::string(d.status().message()), HasSubstr("--lengths")) << c.spec;
  }
  EXPECT_THAT(std::string(LengthDistribution::FromList("12\nten\n").status().message()), HasSubstr("line 2"));
  EXPECT_EQ(LengthDistribution::FromList("# nothing\n").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace relserve::client
