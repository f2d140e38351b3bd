#include "server/http_api/request_deadline.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/http_api/http_status.h"

namespace relserve {

absl::StatusOr<absl::Duration> ParseTimeout(std::string_view value, const std::string& what) {
  const std::string v(absl::StripAsciiWhitespace(absl::string_view(value.data(), value.size())));
  absl::Duration d;
  double seconds = 0;
  if (absl::SimpleAtod(v, &seconds) && std::isfinite(seconds) && seconds >= 0 && seconds <= 1e9) {
    return absl::Seconds(seconds);
  }
  if (!v.empty() && absl::ascii_isdigit(static_cast<unsigned char>(v[0])) && absl::ParseDuration(v, &d) &&
      d != absl::InfiniteDuration()) {
    return d;
  }
  return absl::InvalidArgumentError(absl::StrCat(what, ": \"", v.substr(0, 64),
                                                 "\" is not a timeout: seconds (30, 2.5) or a number with a unit "
                                                 "(500ms, 2s, 1m)"));
}

absl::StatusOr<absl::Time> RequestDeadline(absl::Time start, absl::Duration timeout,
                                           std::optional<std::string_view> header) {
  absl::Duration limit = timeout > absl::ZeroDuration() ? timeout : absl::InfiniteDuration();
  if (header.has_value()) {
    auto asked = ParseTimeout(*header, kRequestTimeoutHeader);
    if (!asked.ok()) return WithHttpStatus(asked.status(), 400);
    if (*asked <= absl::ZeroDuration()) {
      return WithHttpStatus(
          absl::InvalidArgumentError(absl::StrCat(kRequestTimeoutHeader, " must be more than 0")), 400);
    }
    limit = std::min(limit, *asked);
  }
  return limit == absl::InfiniteDuration() ? absl::InfiniteFuture() : start + limit;
}

}  // namespace relserve
