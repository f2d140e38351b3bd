#ifndef RELSERVE_SERVER_UTIL_STATUS_MACROS_H_
#define RELSERVE_SERVER_UTIL_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// Early-return helpers for absl::Status / absl::StatusOr (this Abseil release has none).
#define RELSERVE_CONCAT_INNER_(a, b) a##b
#define RELSERVE_CONCAT_(a, b) RELSERVE_CONCAT_INNER_(a, b)

#define RETURN_IF_ERROR(expr)                        \
  do {                                               \
    ::absl::Status relserve_status_ = (expr);        \
    if (!relserve_status_.ok()) return relserve_status_; \
  } while (0)

#define ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                           \
  if (!tmp.ok()) return tmp.status();          \
  lhs = std::move(tmp).value()

#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL_(RELSERVE_CONCAT_(relserve_statusor_, __LINE__), lhs, expr)

#endif  // RELSERVE_SERVER_UTIL_STATUS_MACROS_H_
