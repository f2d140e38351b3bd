#ifndef RELSERVE_SERVER_HTTP_API_HTTP_STATUS_H_
#define RELSERVE_SERVER_HTTP_API_HTTP_STATUS_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"

namespace relserve {

// The one place statuses become HTTP statuses, for every route:
//   INVALID_ARGUMENT, OUT_OF_RANGE -> 422 (a field's value is refused; TEI's "Validation")
//   NOT_FOUND -> 404 (unknown model), FAILED_PRECONDITION -> 424 (a model without the needed
//   head or tokenizer), RESOURCE_EXHAUSTED -> 429 (queue full), UNAVAILABLE -> 503 (draining),
//   DEADLINE_EXCEEDED -> 504, CANCELLED -> 499 (the client went away), UNIMPLEMENTED -> 501,
//   UNAUTHENTICATED -> 401 (a missing or wrong API key), PERMISSION_DENIED -> 403,
//   anything else -> 500.
// Errors of the HTTP layer itself that have a more precise status (a body that is not JSON:
// 400; an empty batch: 400; a body over the limit: 413) carry it with WithHttpStatus.
int HttpStatusOf(const absl::Status& status);

absl::Status WithHttpStatus(absl::Status status, int http_status);

// The status of a refusal on OpenAI's routes: HttpStatusOf, except that an input longer than the
// model's maximum with truncation off (FieldErrorKind::kTooLong) is 400 invalid_request_error,
// as OpenAI's API answers it (its SDKs raise BadRequestError), and so is `dimensions` on a
// model not Matryoshka-trained (FieldErrorKind::kUnsupported), as vLLM answers it.
int OpenAIHttpStatus(const absl::Status& status);
// The status of a refusal on TEI's routes: HttpStatusOf, except that an over-long input is 413,
// text-embeddings-inference's status for its Validation errors.
int TeiHttpStatus(const absl::Status& status);

// TEI's error_type for an error answered with `http_status`: "Empty" (an empty input or
// batch), "Validation", "Overloaded", "Unhealthy", "Backend" (text-embeddings-inference's
// ErrorType), and "Unauthorized" for a missing or wrong API key (401).
const char* TeiErrorType(const absl::Status& status, int http_status);
// OpenAI's error "type": "invalid_request_error", "not_found_error", "rate_limit_error",
// "server_error", ...
const char* OpenAIErrorType(int http_status);

// The error bodies (OpenAIErrorJson, TeiErrorJson) cut their message to this many bytes, with
// "..." and a note of how much was cut (CapMessage), as gRPC's statuses are cut
// (kMaxStatusMessageBytes): a message that quotes client input stays small however large the
// input.
inline constexpr size_t kMaxHttpErrorMessageBytes = 2048;

}  // namespace relserve

#endif  // RELSERVE_SERVER_HTTP_API_HTTP_STATUS_H_
