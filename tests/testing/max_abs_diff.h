#ifndef RELSERVE_TESTS_TESTING_MAX_ABS_DIFF_H_
#define RELSERVE_TESTS_TESTING_MAX_ABS_DIFF_H_

// The one way tests compare numbers: max |a - b| that fails on anything not finite. A NaN or
// an infinity on either side, or two sequences of different sizes, give +inf, which no
// tolerance accepts (std::max(worst, NaN) keeps `worst`, so a loop written with it passes an
// all-NaN output).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <iterator>
#include <limits>

namespace relserve::testing {

// What a comparison that cannot be made returns: larger than every tolerance.
inline constexpr double kNotComparable = std::numeric_limits<double>::infinity();

// |a - b|, or kNotComparable where either is NaN or infinite.
inline double AbsDiff(double a, double b) {
  if (!std::isfinite(a) || !std::isfinite(b)) return kNotComparable;
  return std::fabs(a - b);
}

// The largest AbsDiff of two sequences of numbers (std::vector, protobuf's RepeatedField, ...)
// element by element; kNotComparable when their sizes differ. Two empty sequences give 0.
template <typename A, typename B>
double MaxAbsDiff(const A& a, const B& b) {
  if (static_cast<size_t>(std::size(a)) != static_cast<size_t>(std::size(b))) return kNotComparable;
  double worst = 0;
  auto x = std::begin(a);
  for (auto y = std::begin(b); x != std::end(a); ++x, ++y) {
    worst = std::max(worst, AbsDiff(static_cast<double>(*x), static_cast<double>(*y)));
  }
  return worst;
}

}  // namespace relserve::testing

#endif  // RELSERVE_TESTS_TESTING_MAX_ABS_DIFF_H_
