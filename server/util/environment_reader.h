#ifndef RELSERVE_SERVER_UTIL_ENVIRONMENT_READER_H_
#define RELSERVE_SERVER_UTIL_ENVIRONMENT_READER_H_

#include <functional>
#include <map>
#include <string>

namespace relserve {

// How a library reads the environment variables it is handed: a variable's value, or nullptr
// when it is unset. The programs' main() functions give the process's own (std::getenv); tests
// and the flag tables give theirs, so that no library reads the process's environment itself.
using GetEnv = std::function<const char*(const char*)>;

// A reader over `variables` (a flag table's environment, a test's), which must outlive it.
inline GetEnv MapEnvironmentReader(const std::map<std::string, std::string>& variables) {
  return [&variables](const char* name) -> const char* {
    auto it = variables.find(name);
    return it == variables.end() ? nullptr : it->second.c_str();
  };
}

}  // namespace relserve

#endif  // RELSERVE_SERVER_UTIL_ENVIRONMENT_READER_H_
