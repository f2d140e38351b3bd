#include "server/util/log.h"

#include <cstdio>
#include <mutex>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace relserve {
namespace {

void Log(const char* level, const std::string& message) {
  static std::mutex mu;
  const std::string now = absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone());
  std::lock_guard<std::mutex> lock(mu);
  std::fprintf(stderr, "%s %s %s\n", now.c_str(), level, message.c_str());
  std::fflush(stderr);
}

}  // namespace

void LogInfo(const std::string& message) { Log("INFO", message); }
void LogWarning(const std::string& message) { Log("WARN", message); }
void LogError(const std::string& message) { Log("ERROR", message); }

}  // namespace relserve
