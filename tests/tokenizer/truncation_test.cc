#include "server/tokenizer/truncation.h"

#include "gtest/gtest.h"

namespace relserve {
namespace {

// transformers' loop, one token at a time (PreTrainedTokenizerBase.truncate_sequences with
// TruncationStrategy.LONGEST_FIRST): the first text loses a token only when strictly longer.
TruncatedLengths ReferenceLongestFirst(int first, int second, int budget) {
  while (first + second > budget) {
    if (first > second) {
      --first;
    } else {
      --second;
    }
  }
  return {first, second};
}

TEST(TruncationTest, NothingToCutWhenWithinBudget) {
  const TruncatedLengths kept = TruncateLongestFirst(3, 4, 7);
  EXPECT_EQ(kept.first, 3);
  EXPECT_EQ(kept.second, 4);
}

TEST(TruncationTest, SingleTextIsCutFromTheEnd) {
  const TruncatedLengths kept = TruncateLongestFirst(10, 0, 4);
  EXPECT_EQ(kept.first, 4);
  EXPECT_EQ(kept.second, 0);
}

TEST(TruncationTest, LongerTextIsCutFirst) {
  const TruncatedLengths kept = TruncateLongestFirst(20, 5, 15);
  EXPECT_EQ(kept.first, 10);
  EXPECT_EQ(kept.second, 5);
}

TEST(TruncationTest, TiesCutTheSecondText) {
  const TruncatedLengths kept = TruncateLongestFirst(6, 6, 11);
  EXPECT_EQ(kept.first, 6);
  EXPECT_EQ(kept.second, 5);
}

TEST(TruncationTest, OnlyFirstCutsTheFirstText) {
  EXPECT_EQ(TruncateOnlyFirst(10, 4, 20).first, 10);  // fits
  EXPECT_EQ(TruncateOnlyFirst(10, 4, 20).second, 4);
  EXPECT_EQ(TruncateOnlyFirst(10, 4, 9).first, 5);
  EXPECT_EQ(TruncateOnlyFirst(10, 4, 9).second, 4);
  EXPECT_EQ(TruncateOnlyFirst(10, 12, 9).first, 0);   // nothing of the first fits
  EXPECT_EQ(TruncateOnlyFirst(10, 12, 9).second, 12);  // the second is never cut
}

TEST(TruncationTest, MatchesTransformersLoopEverywhere) {
  for (int first = 0; first <= 24; ++first) {
    for (int second = 0; second <= 24; ++second) {
      for (int budget = 0; budget <= 50; ++budget) {
        const TruncatedLengths want = ReferenceLongestFirst(first, second, budget);
        const TruncatedLengths got = TruncateLongestFirst(first, second, budget);
        ASSERT_EQ(got.first, want.first) << first << " " << second << " " << budget;
        ASSERT_EQ(got.second, want.second) << first << " " << second << " " << budget;
      }
    }
  }
}

TEST(TruncationTest, FirstKeptTokenFollowsTheDirection) {
  EXPECT_EQ(FirstKeptToken(10, 4, TruncationDirection::kRight), 0);
  EXPECT_EQ(FirstKeptToken(10, 4, TruncationDirection::kLeft), 6);  // the last 4 stay
  EXPECT_EQ(FirstKeptToken(10, 10, TruncationDirection::kLeft), 0);  // nothing cut
  EXPECT_EQ(FirstKeptToken(10, 0, TruncationDirection::kLeft), 10);  // everything cut
  EXPECT_EQ(FirstKeptToken(0, 0, TruncationDirection::kLeft), 0);
}

}  // namespace
}  // namespace relserve
