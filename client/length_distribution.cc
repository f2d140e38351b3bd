#include "client/length_distribution.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace relserve::client {
namespace {

absl::Status Invalid(const std::string& spec, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("--lengths \"", spec, "\": ", why,
                                                 " (expected fixed:N, uniform:A:B, log-uniform:A:B or file:PATH)"));
}

}  // namespace

absl::StatusOr<LengthDistribution> LengthDistribution::Parse(const std::string& spec, int min_length) {
  const auto colon = spec.find(':');
  const std::string kind = spec.substr(0, colon);
  const std::string rest = colon == std::string::npos ? "" : spec.substr(colon + 1);
  if (kind == "file") {
    if (rest.empty()) return Invalid(spec, "no file named");
    std::ifstream in(rest);
    if (!in) return Invalid(spec, "cannot read the file");
    std::stringstream text;
    text << in.rdbuf();
    auto list = FromList(text.str(), min_length);
    if (!list.ok()) return Invalid(spec, std::string(list.status().message()));
    list->spec_ = spec;
    return list;
  }
  std::vector<int> numbers;
  for (absl::string_view part : absl::StrSplit(rest, ':', absl::SkipEmpty())) {
    int x;
    if (!absl::SimpleAtoi(part, &x)) return Invalid(spec, absl::StrCat("\"", part, "\" is not an integer"));
    if (x < min_length) return Invalid(spec, absl::StrCat("lengths must be at least ", min_length));
    numbers.push_back(x);
  }
  if (kind == "fixed") {
    if (numbers.size() != 1) return Invalid(spec, "fixed takes one length");
    return LengthDistribution(Kind::kFixed, numbers[0], numbers[0], {}, spec);
  }
  if (kind == "uniform" || kind == "log-uniform") {
    if (numbers.size() != 2) return Invalid(spec, absl::StrCat(kind, " takes two lengths, A:B"));
    if (numbers[1] < numbers[0]) return Invalid(spec, "A must not exceed B");
    return LengthDistribution(kind == "uniform" ? Kind::kUniform : Kind::kLogUniform, numbers[0], numbers[1], {},
                              spec);
  }
  return Invalid(spec, absl::StrCat("unknown distribution \"", kind, "\""));
}

absl::StatusOr<LengthDistribution> LengthDistribution::FromList(const std::string& text, int min_length) {
  std::vector<int> list;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    int x;
    if (!absl::SimpleAtoi(line, &x) || x < min_length) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", line_number, ": \"", line, "\" is not a length >= ", min_length));
    }
    list.push_back(x);
  }
  if (list.empty()) return absl::InvalidArgumentError("no lengths listed");
  const auto [lo, hi] = std::minmax_element(list.begin(), list.end());
  const int min = *lo, max = *hi;
  return LengthDistribution(Kind::kList, min, max, std::move(list), "file");
}

int LengthDistribution::Draw(std::mt19937_64& rng) const {
  switch (kind_) {
    case Kind::kFixed:
      return min_;
    case Kind::kUniform:
      return std::uniform_int_distribution<int>(min_, max_)(rng);
    case Kind::kLogUniform: {
      // exp of a uniform draw over [log A, log(B + 1)), floored: each length in [A, B] gets the
      // log-width of its own unit interval.
      std::uniform_real_distribution<double> u(std::log(min_), std::log(max_ + 1.0));
      return std::clamp(static_cast<int>(std::exp(u(rng))), min_, max_);
    }
    case Kind::kList:
      return list_[std::uniform_int_distribution<size_t>(0, list_.size() - 1)(rng)];
  }
  return min_;
}

}  // namespace relserve::client
