#ifndef RELSERVE_CLIENT_LENGTH_DISTRIBUTION_H_
#define RELSERVE_CLIENT_LENGTH_DISTRIBUTION_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace relserve::client {

// The sequence lengths (in tokens, special tokens included) `relserve-client bench` draws:
//   fixed:N            always N
//   uniform:A:B        every length in [A, B] equally likely
//   log-uniform:A:B    log(length) uniform: as many short as long sequences per octave, the
//                      shape of real mixed-length traffic (the serving benchmark's)
//   file:PATH          uniformly one of the lengths listed in PATH, one per line (a sample of
//                      a production workload, repeated lengths weighing more)
class LengthDistribution {
 public:
  // `spec` is one of the forms above; lengths must be >= min_length (the special tokens).
  static absl::StatusOr<LengthDistribution> Parse(const std::string& spec, int min_length = 1);
  // The lengths of a file:PATH distribution from the file's text; blank lines and lines
  // starting with '#' are skipped.
  static absl::StatusOr<LengthDistribution> FromList(const std::string& text, int min_length = 1);

  int Draw(std::mt19937_64& rng) const;
  int min() const { return min_; }
  int max() const { return max_; }
  const std::string& spec() const { return spec_; }

 private:
  enum class Kind { kFixed, kUniform, kLogUniform, kList };
  LengthDistribution(Kind kind, int min, int max, std::vector<int> list, std::string spec)
      : kind_(kind), min_(min), max_(max), list_(std::move(list)), spec_(std::move(spec)) {}

  Kind kind_;
  int min_;
  int max_;
  std::vector<int> list_;
  std::string spec_;
};

}  // namespace relserve::client

#endif  // RELSERVE_CLIENT_LENGTH_DISTRIBUTION_H_
