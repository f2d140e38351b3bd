#include "server/http_api/http_status.h"

#include <cstdlib>
#include <optional>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "server/serving/status_labels.h"
#include "server/util/field_error.h"

namespace relserve {

static_assert(kMaxHttpErrorMessageBytes == kMaxStatusMessageBytes,
              "an error message is cut to the same size over HTTP as over gRPC");

namespace {

// Where WithHttpStatus keeps its status in an absl::Status (a payload, so it travels with the
// status through StatusOr and the serving layer's callbacks unchanged).
constexpr char kHttpStatusPayload[] = "relserve.http_status";

}  // namespace

absl::Status WithHttpStatus(absl::Status status, int http_status) {
  status.SetPayload(kHttpStatusPayload, absl::Cord(std::to_string(http_status)));
  return status;
}

int HttpStatusOf(const absl::Status& status) {
  if (auto payload = status.GetPayload(kHttpStatusPayload); payload.has_value()) {
    int s = 0;
    if (absl::SimpleAtoi(std::string(*payload), &s) && s >= 100 && s <= 599) return s;
  }
  switch (status.code()) {
    case absl::StatusCode::kOk: return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange: return 422;
    case absl::StatusCode::kNotFound: return 404;
    case absl::StatusCode::kFailedPrecondition: return 424;
    case absl::StatusCode::kResourceExhausted: return 429;
    case absl::StatusCode::kUnavailable: return 503;
    case absl::StatusCode::kDeadlineExceeded: return 504;
    case absl::StatusCode::kCancelled: return 499;
    case absl::StatusCode::kUnimplemented: return 501;
    case absl::StatusCode::kUnauthenticated: return 401;
    case absl::StatusCode::kPermissionDenied: return 403;
    default: return 500;
  }
}

namespace {

// The kind of field error a status carries, when it carries no HTTP status of its own.
std::optional<FieldErrorKind> PlainFieldErrorKind(const absl::Status& status) {
  if (status.GetPayload(kHttpStatusPayload).has_value()) return std::nullopt;
  const std::optional<FieldErrorDetail> detail = FieldErrorOf(status);
  if (!detail.has_value()) return std::nullopt;
  return detail->kind;
}

}  // namespace

int OpenAIHttpStatus(const absl::Status& status) {
  const std::optional<FieldErrorKind> kind = PlainFieldErrorKind(status);
  if (status.code() == absl::StatusCode::kInvalidArgument &&
      (kind == FieldErrorKind::kTooLong || kind == FieldErrorKind::kUnsupported)) {
    return 400;
  }
  return HttpStatusOf(status);
}

int TeiHttpStatus(const absl::Status& status) {
  if (status.code() == absl::StatusCode::kInvalidArgument && PlainFieldErrorKind(status) == FieldErrorKind::kTooLong) {
    return 413;
  }
  return HttpStatusOf(status);
}

const char* TeiErrorType(const absl::Status& status, int http_status) {
  switch (http_status) {
    case 400: {
      const std::optional<FieldErrorDetail> detail = FieldErrorOf(status);
      return detail.has_value() && detail->kind == FieldErrorKind::kEmpty ? "Empty" : "Validation";
    }
    case 401: return "Unauthorized";
    case 413:
    case 422: return "Validation";
    case 424: return "Backend";
    case 429: return "Overloaded";
    case 503: return "Unhealthy";
    default: return http_status < 500 ? "Validation" : "Backend";
  }
}

const char* OpenAIErrorType(int http_status) {
  switch (http_status) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    case 503: return "service_unavailable";
    default: return http_status < 500 ? "invalid_request_error" : "server_error";
  }
}

}  // namespace relserve
