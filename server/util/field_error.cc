#include "server/util/field_error.h"

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace relserve {
namespace {

// The payload: the kind's number, a space, the field.
constexpr char kFieldErrorPayload[] = "relserve.field_error";

}  // namespace

absl::Status WithFieldError(absl::Status status, FieldErrorKind kind, absl::string_view field) {
  if (status.ok()) return status;
  status.SetPayload(kFieldErrorPayload, absl::Cord(absl::StrCat(static_cast<int>(kind), " ", field)));
  return status;
}

absl::Status FieldError(FieldErrorKind kind, absl::string_view field, absl::string_view message) {
  return WithFieldError(absl::InvalidArgumentError(message), kind, field);
}

std::optional<FieldErrorDetail> FieldErrorOf(const absl::Status& status) {
  const auto payload = status.GetPayload(kFieldErrorPayload);  // absl::optional in this Abseil
  if (!payload.has_value()) return std::nullopt;
  const std::string text(*payload);
  const size_t space = text.find(' ');
  int kind = 0;
  if (space == std::string::npos || !absl::SimpleAtoi(text.substr(0, space), &kind) || kind < 0 ||
      kind > static_cast<int>(FieldErrorKind::kUnsupported)) {
    return std::nullopt;
  }
  return FieldErrorDetail{static_cast<FieldErrorKind>(kind), text.substr(space + 1)};
}

absl::Status PrefixFieldError(absl::string_view field, const absl::Status& status) {
  absl::Status out(status.code(), absl::StrCat(field, ": ", status.message()));
  status.ForEachPayload([&](absl::string_view url, const absl::Cord& payload) { out.SetPayload(url, payload); });
  const std::optional<FieldErrorDetail> inner = FieldErrorOf(status);
  const FieldErrorKind kind = inner.has_value() ? inner->kind : FieldErrorKind::kInvalid;
  const std::string path = inner.has_value() && !inner->field.empty() ? absl::StrCat(field, ".", inner->field)
                                                                       : std::string(field);
  return WithFieldError(std::move(out), kind, path);
}

std::string FieldRoot(absl::string_view field) {
  const size_t end = field.find_first_of("[.");
  return std::string(field.substr(0, end));
}

}  // namespace relserve
