#include "server/safetensors/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace relserve {
namespace {

absl::Status ErrnoError(int err, const std::string& path, const char* action) {
  if (err == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
  return absl::ErrnoToStatus(err, absl::StrCat(path, ": ", action, " failed"));
}

// Closes the descriptor on every path out of Open; the mapping outlives it.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() { close(fd_); }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;

 private:
  int fd_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
  int fd;
  do {
    fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return ErrnoError(errno, path, "open");
  FdCloser closer(fd);

  struct stat st;
  if (fstat(fd, &st) != 0) return ErrnoError(errno, path, "fstat");
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (size == 0) return std::unique_ptr<MappedFile>(new MappedFile(path, nullptr, 0));

  void* addr = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (addr == MAP_FAILED) return ErrnoError(errno, path, "mmap");
  return std::unique_ptr<MappedFile>(new MappedFile(path, static_cast<const uint8_t*>(addr), size));
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace relserve
