#include "server/http_api/http_status.h"
#include "server/util/field_error.h"

#include "gtest/gtest.h"

namespace relserve {
namespace {

TEST(HttpStatusTest, EveryStatusCodeHasItsHttpStatus) {
  struct Case {
    absl::StatusCode code;
    int http;
  };
  for (const Case& c : {Case{absl::StatusCode::kOk, 200}, Case{absl::StatusCode::kInvalidArgument, 422},
                        Case{absl::StatusCode::kOutOfRange, 422}, Case{absl::StatusCode::kNotFound, 404},
                        Case{absl::StatusCode::kFailedPrecondition, 424},
                        Case{absl::StatusCode::kResourceExhausted, 429}, Case{absl::StatusCode::kUnavailable, 503},
                        Case{absl::StatusCode::kDeadlineExceeded, 504}, Case{absl::StatusCode::kCancelled, 499},
                        Case{absl::StatusCode::kUnimplemented, 501}, Case{absl::StatusCode::kUnauthenticated, 401},
                        Case{absl::StatusCode::kPermissionDenied, 403}, Case{absl::StatusCode::kInternal, 500},
                        Case{absl::StatusCode::kDataLoss, 500}, Case{absl::StatusCode::kUnknown, 500}}) {
    EXPECT_EQ(HttpStatusOf(absl::Status(c.code, "x")), c.http) << absl::StatusCodeToString(c.code);
  }
}

TEST(HttpStatusTest, AnExplicitHttpStatusWinsAndKeepsTheCode) {
  const absl::Status s = WithHttpStatus(absl::InvalidArgumentError("inputs is empty"), 400);
  EXPECT_EQ(HttpStatusOf(s), 400);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "inputs is empty");
  EXPECT_EQ(HttpStatusOf(WithHttpStatus(absl::InvalidArgumentError("big"), 413)), 413);
}

// An over-long input is answered as each API answers it: OpenAI 400, TEI 413; other field
// errors keep HttpStatusOf's status, and an explicit HTTP status still wins.
TEST(HttpStatusTest, OverLongInputsPerApi) {
  const absl::Status too_long = FieldError(FieldErrorKind::kTooLong, "inputs[0].text", "too many tokens");
  EXPECT_EQ(HttpStatusOf(too_long), 422);
  EXPECT_EQ(OpenAIHttpStatus(too_long), 400);
  EXPECT_EQ(TeiHttpStatus(too_long), 413);
  EXPECT_STREQ(OpenAIErrorType(OpenAIHttpStatus(too_long)), "invalid_request_error");
  EXPECT_STREQ(TeiErrorType(too_long, TeiHttpStatus(too_long)), "Validation");
  const absl::Status unsupported = FieldError(FieldErrorKind::kUnsupported, "dimensions", "not Matryoshka");
  EXPECT_EQ(OpenAIHttpStatus(unsupported), 400);
  EXPECT_EQ(TeiHttpStatus(unsupported), 422);
  const absl::Status invalid = FieldError(FieldErrorKind::kInvalid, "dimensions", "outside");
  EXPECT_EQ(OpenAIHttpStatus(invalid), 422);
  EXPECT_EQ(TeiHttpStatus(invalid), 422);
  EXPECT_EQ(OpenAIHttpStatus(absl::NotFoundError("model")), 404);
  EXPECT_EQ(TeiHttpStatus(WithHttpStatus(too_long, 400)), 400);
}

TEST(HttpStatusTest, TeiAndOpenAIErrorTypes) {
  EXPECT_STREQ(TeiErrorType(FieldError(FieldErrorKind::kEmpty, "inputs", "inputs is empty"), 400), "Empty");
  EXPECT_STREQ(TeiErrorType(FieldError(FieldErrorKind::kEmpty, "inputs", "no text in inputs"), 400), "Empty");
  // The kind decides, not the wording.
  EXPECT_STREQ(TeiErrorType(absl::InvalidArgumentError("inputs is empty"), 400), "Validation");
  EXPECT_STREQ(TeiErrorType(absl::InvalidArgumentError("not JSON"), 400), "Validation");
  EXPECT_STREQ(TeiErrorType(absl::InvalidArgumentError("too long"), 422), "Validation");
  EXPECT_STREQ(TeiErrorType(absl::InvalidArgumentError("too big"), 413), "Validation");
  EXPECT_STREQ(TeiErrorType(absl::FailedPreconditionError("no head"), 424), "Backend");
  EXPECT_STREQ(TeiErrorType(absl::ResourceExhaustedError("full"), 429), "Overloaded");
  EXPECT_STREQ(TeiErrorType(absl::UnavailableError("draining"), 503), "Unhealthy");
  EXPECT_STREQ(TeiErrorType(absl::InternalError("nan"), 500), "Backend");
  EXPECT_STREQ(TeiErrorType(absl::UnauthenticatedError("invalid API key"), 401), "Unauthorized");
  EXPECT_STREQ(OpenAIErrorType(401), "authentication_error");
  EXPECT_STREQ(OpenAIErrorType(422), "invalid_request_error");
  EXPECT_STREQ(OpenAIErrorType(404), "not_found_error");
  EXPECT_STREQ(OpenAIErrorType(429), "rate_limit_error");
  EXPECT_STREQ(OpenAIErrorType(500), "server_error");
}

}  // namespace
}  // namespace relserve
