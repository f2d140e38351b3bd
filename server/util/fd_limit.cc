#include "server/util/fd_limit.h"

#include <errno.h>
#include <sys/resource.h>

#include <fstream>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/util/log.h"

namespace relserve {
namespace {

std::string ErrnoText(int err) { return std::error_code(err, std::generic_category()).message(); }

// The kernel's ceiling for RLIMIT_NOFILE (fs.nr_open); 1048576 when it cannot be read.
rlim_t NrOpen() {
  std::ifstream in("/proc/sys/fs/nr_open");
  unsigned long long value = 0;
  if (in >> value && value > 0) return static_cast<rlim_t>(value);
  return 1048576;
}

}  // namespace

std::string OpenFilesLimit::Describe() const {
  if (soft == soft_before) return absl::StrCat("open files limit ", soft, " (the hard limit)");
  return absl::StrCat("open files limit raised from ", soft_before, " to ", soft);
}

absl::StatusOr<OpenFilesLimit> RaiseOpenFilesLimit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return absl::InternalError(absl::StrCat("getrlimit(RLIMIT_NOFILE): ", ErrnoText(errno)));
  }
  OpenFilesLimit result;
  result.soft_before = limit.rlim_cur;
  const rlim_t target = limit.rlim_max == RLIM_INFINITY ? NrOpen() : limit.rlim_max;
  result.hard = target;
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < target) {
    limit.rlim_cur = target;
    if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) {
      return absl::InternalError(absl::StrCat("setrlimit(RLIMIT_NOFILE, ", target,
                                              "): ", ErrnoText(errno)));
    }
  }
  result.soft = limit.rlim_cur;
  return result;
}

void RaiseOpenFilesLimitAndLog() {
  const absl::StatusOr<OpenFilesLimit> limit = RaiseOpenFilesLimit();
  if (limit.ok()) {
    LogInfo(limit->Describe());
  } else {
    LogWarning(absl::StrCat("cannot raise the open files limit: ", limit.status().message()));
  }
}

}  // namespace relserve
