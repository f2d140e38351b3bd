#ifndef RELSERVE_SERVER_HTTP_API_REQUEST_DEADLINE_H_
#define RELSERVE_SERVER_HTTP_API_REQUEST_DEADLINE_H_

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace relserve {

// The header with which an HTTP client asks for a shorter deadline than the server's.
inline constexpr char kRequestTimeoutHeader[] = "X-Request-Timeout";

// A timeout as --http-request-timeout and X-Request-Timeout take it: a number of seconds
// ("30", "2.5") or a number with a unit ("500ms", "2s", "1.5m", "1h"; absl::ParseDuration's
// units). INVALID_ARGUMENT naming `what` when it is neither, negative or not finite.
absl::StatusOr<absl::Duration> ParseTimeout(std::string_view value, const std::string& what);

// When an HTTP call that started at `start` must be answered by: the server's `timeout`
// (zero: none) or the request's X-Request-Timeout `header`, whichever is shorter, so a client
// can ask for less time than the server gives but not for more. A header that is not a
// positive timeout is INVALID_ARGUMENT with HTTP status 400, naming the header.
absl::StatusOr<absl::Time> RequestDeadline(absl::Time start, absl::Duration timeout,
                                           std::optional<std::string_view> header);

}  // namespace relserve

#endif  // RELSERVE_SERVER_HTTP_API_REQUEST_DEADLINE_H_
