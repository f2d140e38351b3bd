#ifndef RELSERVE_SERVER_UTIL_LOG_H_
#define RELSERVE_SERVER_UTIL_LOG_H_

#include <string>

namespace relserve {

// One line to stderr: "2026-01-02T03:04:05.678Z INFO message". Thread-safe.
void LogInfo(const std::string& message);
void LogWarning(const std::string& message);
void LogError(const std::string& message);

}  // namespace relserve

#endif  // RELSERVE_SERVER_UTIL_LOG_H_
