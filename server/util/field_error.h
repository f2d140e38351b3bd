#ifndef RELSERVE_SERVER_UTIL_FIELD_ERROR_H_
#define RELSERVE_SERVER_UTIL_FIELD_ERROR_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace relserve {

// What is wrong with a request, said in a structured way beside the message: which field (its
// path in the serving layer's terms: "inputs[2].text", "documents", "dimensions") and what kind
// of problem. Transports map the kind to their own status and error shape and the field to their
// own names (HTTP's 400 "Empty" and OpenAI's `param`), never reading the message: rewording a
// message changes no HTTP status, error type or param.
enum class FieldErrorKind {
  kInvalid,          // a value the field cannot take (type, range, format)
  kEmpty,            // an empty text, list or value that must not be empty
  kMissing,          // a required field that is absent
  kTooMany,          // more entries than a limit
  kTooLong,          // a sequence longer than the model's maximum
  kOutOfVocabulary,  // a token id outside the model's vocabulary
  kUnsupported,      // a value the model was not made for (dimensions on a model not Matryoshka-trained)
};

struct FieldErrorDetail {
  FieldErrorKind kind = FieldErrorKind::kInvalid;
  std::string field;
};

// `status` (not OK) carrying the detail; a detail it had is replaced.
absl::Status WithFieldError(absl::Status status, FieldErrorKind kind, absl::string_view field);

// An INVALID_ARGUMENT status with `message` and the detail.
absl::Status FieldError(FieldErrorKind kind, absl::string_view field, absl::string_view message);

// The detail a status carries, if any.
std::optional<FieldErrorDetail> FieldErrorOf(const absl::Status& status);

// `status` about a part of `field`: its message becomes "field: message" and its detail's field
// "field" (joined with the inner field's path where it had one: "inputs[3]" and "input_ids[7]"
// give "inputs[3].input_ids[7]"); the kind is the inner one, else kInvalid.
absl::Status PrefixFieldError(absl::string_view field, const absl::Status& status);

// The first name of a field path: "inputs" of "inputs[2].text".
std::string FieldRoot(absl::string_view field);

}  // namespace relserve

#endif  // RELSERVE_SERVER_UTIL_FIELD_ERROR_H_
