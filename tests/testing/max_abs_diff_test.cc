#include "tests/testing/max_abs_diff.h"

#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "tests/testing/tensor_max_abs_diff.h"

namespace relserve::testing {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(MaxAbsDiffTest, AnOrdinaryDifferenceIsTheLargestOne) {
  EXPECT_DOUBLE_EQ(MaxAbsDiff(std::vector<float>{1, 2, 3}, std::vector<double>{1.5, 2, 1}), 2.0);
  EXPECT_EQ(MaxAbsDiff(std::vector<float>{1, -2}, std::vector<float>{1, -2}), 0.0);
  EXPECT_EQ(MaxAbsDiff(std::vector<float>{}, std::vector<float>{}), 0.0);
}

TEST(MaxAbsDiffTest, ANaNOnEitherSideFails) {
  // Wherever the NaN sits: std::max(worst, NaN) would keep `worst` and pass it.
  for (size_t at = 0; at < 3; ++at) {
    std::vector<double> with_nan = {1, 2, 3};
    with_nan[at] = kNaN;
    EXPECT_EQ(MaxAbsDiff(with_nan, std::vector<double>{1, 2, 3}), kNotComparable) << at;
    EXPECT_EQ(MaxAbsDiff(std::vector<double>{1, 2, 3}, with_nan), kNotComparable) << at;
  }
  EXPECT_EQ(MaxAbsDiff(std::vector<float>(4, std::nanf("")), std::vector<float>(4, std::nanf(""))), kNotComparable);
  EXPECT_FALSE(AbsDiff(kNaN, kNaN) <= 1e30);
}

TEST(MaxAbsDiffTest, AnInfinityFailsEvenAgainstTheSameInfinity) {
  EXPECT_EQ(MaxAbsDiff(std::vector<double>{0, kInf}, std::vector<double>{0, 1}), kNotComparable);
  EXPECT_EQ(MaxAbsDiff(std::vector<double>{-kInf}, std::vector<double>{-kInf}), kNotComparable);
}

TEST(MaxAbsDiffTest, SizesThatDifferFail) {
  EXPECT_EQ(MaxAbsDiff(std::vector<float>{1, 2}, std::vector<float>{1, 2, 3}), kNotComparable);
  EXPECT_EQ(MaxAbsDiff(std::vector<float>{}, std::vector<float>{0}), kNotComparable);
}

TEST(TensorMaxAbsDiffTest, FollowsTheSameRule) {
  const at::Tensor a = at::tensor({1.0f, 2.0f, 3.0f});
  EXPECT_DOUBLE_EQ(MaxAbsDiff(a, at::tensor({1.0, 2.5, 3.0}, at::kDouble)), 0.5);
  EXPECT_EQ(MaxAbsDiff(a, at::tensor({1.0f, std::nanf(""), 3.0f})), kNotComparable);
  EXPECT_EQ(MaxAbsDiff(at::tensor({1.0f, std::nanf(""), 3.0f}), a), kNotComparable);
  EXPECT_EQ(MaxAbsDiff(at::tensor({static_cast<float>(kInf)}), at::tensor({static_cast<float>(kInf)})),
            kNotComparable);
  EXPECT_EQ(MaxAbsDiff(a, at::tensor({1.0f, 2.0f})), kNotComparable);
  EXPECT_EQ(MaxAbsDiff(a.view({1, 3}), a.view({3, 1})), kNotComparable);  // no broadcasting
}

}  // namespace
}  // namespace relserve::testing
