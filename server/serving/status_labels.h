#ifndef RELSERVE_SERVER_SERVING_STATUS_LABELS_H_
#define RELSERVE_SERVER_SERVING_STATUS_LABELS_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"

namespace relserve {

// What every transport says of a serving status, the same way: the name of its code (the `code`
// label of relserve_requests_total, for gRPC calls and HTTP routes alike) and the longest message
// a caller is sent. Messages are cut to kMaxStatusMessageBytes: over gRPC the message travels
// percent-encoded in a trailer, and one over the client's metadata limit (8 KB by default) would
// reach it as RESOURCE_EXHAUSTED; HTTP cuts its error bodies' messages to the same size.
inline constexpr size_t kMaxStatusMessageBytes = 2048;

// "OK", "INVALID_ARGUMENT", ...
std::string CodeName(absl::StatusCode code);

}  // namespace relserve

#endif  // RELSERVE_SERVER_SERVING_STATUS_LABELS_H_
