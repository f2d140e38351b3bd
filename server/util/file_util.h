#ifndef RELSERVE_SERVER_UTIL_FILE_UTIL_H_
#define RELSERVE_SERVER_UTIL_FILE_UTIL_H_

#include <string>

#include "absl/status/statusor.h"

namespace relserve {

// Reads a whole (small) file: configs, JSON inputs. NOT_FOUND if it does not exist.
absl::StatusOr<std::string> ReadFileToString(const std::string& path);
absl::Status WriteStringToFile(const std::string& path, const std::string& contents);
// A regular file (or a link to one).
bool FileExists(const std::string& path);
bool IsDirectory(const std::string& path);
// For optional files of a model directory: false when nothing is at `path`, true for a regular
// file (or a link to one). Anything else there (a directory, a dangling link, a device) is
// INVALID_ARGUMENT naming the path: it must not pass silently for an absent file.
absl::StatusOr<bool> OptionalFileExists(const std::string& path);
// Joins two path components with exactly one '/'.
std::string JoinPath(const std::string& a, const std::string& b);

// Removes `path` and everything under it, without following symbolic links; errors are
// ignored (for temporary directories). Not std::filesystem::remove_all: PyTorch's LibTorch
// exports its own copy of std::filesystem, which calls through a null pointer when a program
// built with a newer GCC binds to it.
void RemoveTree(const std::string& path);
// Directory of the running executable ("" when unknown).
std::string ExecutableDir();

}  // namespace relserve

#endif  // RELSERVE_SERVER_UTIL_FILE_UTIL_H_
