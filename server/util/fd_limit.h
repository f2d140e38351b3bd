#ifndef RELSERVE_SERVER_UTIL_FD_LIMIT_H_
#define RELSERVE_SERVER_UTIL_FD_LIMIT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace relserve {

// The open-files limit (RLIMIT_NOFILE) before and after RaiseOpenFilesLimit().
struct OpenFilesLimit {
  uint64_t soft_before = 0;
  uint64_t soft = 0;
  uint64_t hard = 0;

  // "open files limit raised from 1024 to 524288" or "open files limit 524288 (the hard limit)".
  std::string Describe() const;
};

// Raises the soft RLIMIT_NOFILE to the hard limit.
//
// Why: every gRPC connection, every metrics connection and every model file mapping takes a
// descriptor, and many systems start services with a soft limit of 1024 under a far higher
// hard one. Running out is worse than a refused connection: gRPC 1.51's listener gives up
// accepting for good after one accept() fails with EMFILE (see server/rpc/listener_check.h).
// Nothing in relserve uses select(), so descriptors above FD_SETSIZE are harmless.
// An unlimited hard limit (which the kernel does not allow as a soft NOFILE limit) is read as
// /proc/sys/fs/nr_open. INTERNAL with the errno text when getrlimit/setrlimit fail; the limit
// is then unchanged.
absl::StatusOr<OpenFilesLimit> RaiseOpenFilesLimit();

// RaiseOpenFilesLimit() and one log line saying what it did (a warning if it failed). Called
// by main() right after flag parsing.
void RaiseOpenFilesLimitAndLog();

}  // namespace relserve

#endif  // RELSERVE_SERVER_UTIL_FD_LIMIT_H_
