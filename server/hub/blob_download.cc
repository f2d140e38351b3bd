#include "server/hub/blob_download.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <functional>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/hub/download_progress.h"
#include "server/util/file_util.h"
#include "server/util/log.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

bool IsHex(const std::string& s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// An incremental digest (OpenSSL EVP).
class Digest {
 public:
  explicit Digest(const EVP_MD* md) : md_(md), ctx_(EVP_MD_CTX_new(), EVP_MD_CTX_free) { Reset(); }
  void Reset() { EVP_DigestInit_ex(ctx_.get(), md_, nullptr); }
  void Update(const void* data, size_t size) { EVP_DigestUpdate(ctx_.get(), data, size); }
  std::string HexFinal() {
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_DigestFinal_ex(ctx_.get(), out, &n);
    static const char kHex[] = "0123456789abcdef";
    std::string hex;
    for (unsigned int i = 0; i < n; ++i) {
      hex += kHex[out[i] >> 4];
      hex += kHex[out[i] & 15];
    }
    return hex;
  }

 private:
  const EVP_MD* md_;
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx_;
};

// The digest an ETag stands for, fed from the first byte of the file on.
class ContentCheck {
 public:
  // None when the ETag is neither form (a mirror's own ETags): then only the size is checked.
  static std::optional<ContentCheck> ForEtag(const std::string& etag, std::optional<int64_t> size) {
    if (etag.size() == 64 && IsHex(etag)) return ContentCheck("sha256", EVP_sha256(), "");
    if (etag.size() == 40 && IsHex(etag) && size) {
      return ContentCheck("git blob sha1", EVP_sha1(), absl::StrCat("blob ", *size, std::string(1, '\0')));
    }
    return std::nullopt;
  }
  void Reset() {
    digest_->Reset();
    digest_->Update(prefix_.data(), prefix_.size());
  }
  void Update(const void* data, size_t size) { digest_->Update(data, size); }
  std::string HexFinal() { return digest_->HexFinal(); }
  const std::string& name() const { return name_; }

 private:
  ContentCheck(std::string name, const EVP_MD* md, std::string prefix)
      : name_(std::move(name)), prefix_(std::move(prefix)), digest_(std::make_shared<Digest>(md)) {
    Reset();
  }
  std::string name_;
  std::string prefix_;
  std::shared_ptr<Digest> digest_;
};

absl::Status Errno(const std::string& what, const std::string& path) {
  return absl::UnavailableError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

// RESOURCE_EXHAUSTED when the filesystem holding `dir` has less than `needed` bytes free (to an
// unprivileged writer, as statvfs counts them): refused before a byte is fetched, whatever size
// the Hub or the server declares. OK when statvfs cannot tell.
absl::Status CheckFreeSpace(const std::string& dir, int64_t needed, const std::string& what) {
  struct statvfs fs;
  if (needed <= 0 || statvfs(dir.c_str(), &fs) != 0) return absl::OkStatus();
  uint64_t free_bytes = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(fs.f_bavail), static_cast<uint64_t>(fs.f_frsize), &free_bytes)) {
    return absl::OkStatus();
  }
  if (static_cast<uint64_t>(needed) <= free_bytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "cannot download ", what, ": it needs ", needed, " bytes (", FormatBytes(needed), ") and the filesystem of ", dir,
      " has ", free_bytes, " bytes (", FormatBytes(static_cast<int64_t>(std::min<uint64_t>(free_bytes, INT64_MAX))),
      ") free"));
}

// Holds an exclusive flock() on a lock file until destroyed.
class FileLock {
 public:
  static absl::StatusOr<std::unique_ptr<FileLock>> Acquire(const std::string& path, const std::string& what,
                                                           const std::function<bool()>& cancelled) {
    RETURN_IF_ERROR(MakeDirectories(path.substr(0, path.find_last_of('/'))));
    const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) return Errno("cannot open the lock file", path);
    bool told = false;
    while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK && errno != EINTR) {
        absl::Status s = Errno("cannot lock", path);
        close(fd);
        return s;
      }
      if (!told) {
        LogInfo(absl::StrCat("waiting for another process that downloads ", what, " (", path, ")"));
        told = true;
      }
      if (cancelled && cancelled()) {
        close(fd);
        return absl::CancelledError(absl::StrCat("cancelled while waiting for ", path));
      }
      absl::SleepFor(absl::Milliseconds(200));
    }
    return std::unique_ptr<FileLock>(new FileLock(fd));
  }
  ~FileLock() { close(fd_); }  // releases the lock

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_;
};

// Appends the body to the .incomplete file and feeds the check.
class IncompleteFile : public DownloadSink {
 public:
  IncompleteFile(int fd, int64_t size, std::optional<int64_t> expected, std::optional<ContentCheck>* check,
                 DownloadProgress* progress, std::string dir, std::string what)
      : fd_(fd),
        size_(size),
        expected_(expected),
        check_(check),
        progress_(progress),
        dir_(std::move(dir)),
        what_(std::move(what)) {}

  bool Begin(int64_t offset, std::optional<int64_t> length) override {
    if (offset != size_) {
      // The server sends the file from its start: what was there goes.
      if (offset != 0 || ftruncate(fd_, 0) != 0 || lseek(fd_, 0, SEEK_SET) != 0) {
        problem_ = absl::StrCat("cannot restart at byte ", offset, ": ", std::strerror(errno));
        return false;
      }
      size_ = 0;
      if (*check_) (*check_)->Reset();
    }
    // The size the Hub gave was checked before the request; without one, the server's.
    if (!expected_ && length) {
      no_space_ = CheckFreeSpace(dir_, *length, what_);
      if (!no_space_.ok()) return false;
    }
    return true;
  }

  bool Write(const char* data, size_t n) override {
    if (expected_ && size_ + static_cast<int64_t>(n) > *expected_) {
      too_long_ = true;
      return false;
    }
    for (size_t done = 0; done < n;) {
      const ssize_t w = write(fd_, data + done, n - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        problem_ = absl::StrCat("write failed: ", std::strerror(errno));
        return false;
      }
      done += static_cast<size_t>(w);
    }
    if (*check_) (*check_)->Update(data, n);
    size_ += static_cast<int64_t>(n);
    progress_->Advance(static_cast<int64_t>(n));
    return true;
  }

  int64_t size() const { return size_; }
  bool too_long() const { return too_long_; }
  const std::string& problem() const { return problem_; }
  // RESOURCE_EXHAUSTED when the declared length did not fit.
  const absl::Status& no_space() const { return no_space_; }

 private:
  int fd_;
  int64_t size_;
  std::optional<int64_t> expected_;
  std::optional<ContentCheck>* check_;
  DownloadProgress* progress_;
  std::string dir_;
  std::string what_;
  bool too_long_ = false;
  std::string problem_;
  absl::Status no_space_;
};

// Feeds the first `size` bytes of `fd` to `check` (the part an earlier attempt left).
absl::Status HashExisting(int fd, int64_t size, ContentCheck* check, const std::string& path) {
  std::string buffer(1 << 20, '\0');
  int64_t offset = 0;
  while (offset < size) {
    const ssize_t n = pread(fd, buffer.data(), std::min<int64_t>(buffer.size(), size - offset), offset);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Errno("cannot read", path);
    check->Update(buffer.data(), static_cast<size_t>(n));
    offset += n;
  }
  return absl::OkStatus();
}

}  // namespace

std::string HexDigest(const std::string& kind, const std::string& data) {
  Digest d(kind == "sha256" ? EVP_sha256() : EVP_sha1());
  if (kind == "git-sha1") {
    const std::string prefix = absl::StrCat("blob ", data.size(), std::string(1, '\0'));
    d.Update(prefix.data(), prefix.size());
  }
  d.Update(data.data(), data.size());
  return d.HexFinal();
}

absl::Status DownloadBlob(const HubClient& client, const HubCache& cache, const std::string& repo_id,
                          const std::string& file, const HubFileMetadata& meta, DownloadProgress* progress) {
  const std::string blob = cache.BlobPath(repo_id, meta.etag);
  if (FileExists(blob)) return absl::OkStatus();
  const std::string what = absl::StrCat(file, " of ", repo_id);
  ASSIGN_OR_RETURN(auto lock, FileLock::Acquire(cache.LockPath(repo_id, meta.etag), what, client.settings().cancelled));
  if (FileExists(blob)) return absl::OkStatus();  // another process fetched it meanwhile
  const std::string blobs_dir = blob.substr(0, blob.find_last_of('/'));
  RETURN_IF_ERROR(MakeDirectories(blobs_dir));

  const std::string incomplete = cache.IncompletePath(repo_id, meta.etag);
  const int fd = open(incomplete.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) return Errno("cannot open", incomplete);
  struct stat st;
  if (fstat(fd, &st) != 0) {
    absl::Status s = Errno("cannot stat", incomplete);
    close(fd);
    return s;
  }
  int64_t existing = st.st_size;
  if (meta.size && existing > *meta.size) {
    existing = 0;  // not a prefix of this file
    if (ftruncate(fd, 0) != 0) {
      close(fd);
      return Errno("cannot truncate", incomplete);
    }
  }
  lseek(fd, existing, SEEK_SET);
  auto discard = [&](absl::Status status) {
    close(fd);
    unlink(incomplete.c_str());
    return status;
  };
  // Stops with the .incomplete file kept for the next attempt to resume from, unless it is
  // empty (nothing to resume: no 0-byte leftover stays behind).
  auto stop = [&](absl::Status status) {
    struct stat now;
    if (fstat(fd, &now) == 0 && now.st_size == 0) return discard(std::move(status));
    close(fd);
    return status;
  };
  if (meta.size) {
    if (absl::Status s = CheckFreeSpace(blobs_dir, *meta.size - existing, what); !s.ok()) return stop(s);
  }
  std::optional<ContentCheck> check = ContentCheck::ForEtag(meta.etag, meta.size);
  if (check && existing > 0) {
    if (absl::Status s = HashExisting(fd, existing, &*check, incomplete); !s.ok()) {
      close(fd);
      return s;
    }
  }

  IncompleteFile sink(fd, existing, meta.size, &check, progress, blobs_dir, what);
  if (!meta.size || existing < *meta.size) {
    progress->Start(absl::StrCat(repo_id, ": ", file), existing, meta.size);
    const absl::Status s = client.Download(meta.location, existing, &sink);
    progress->Finish(s.ok());
    if (!sink.no_space().ok()) return stop(sink.no_space());
    if (sink.too_long()) {
      return discard(absl::DataLossError(absl::StrCat(what, ": the server sent more than the ", *meta.size,
                                                      " bytes the Hub announced; the partial file was deleted")));
    }
    if (s.code() == absl::StatusCode::kDataLoss) {
      // A server that cannot resume where asked: start afresh next time.
      return discard(absl::DataLossError(absl::StrCat("downloading ", what, ": ", s.message(),
                                                      "; the partial file was deleted")));
    }
    if (!s.ok()) {
      const std::string problem = sink.problem().empty() ? std::string(s.message()) : sink.problem();
      if (sink.size() == 0) {
        return stop(absl::Status(s.code(), absl::StrCat("downloading ", what, ": ", problem, "; nothing was received")));
      }
      return stop(absl::Status(s.code(), absl::StrCat("downloading ", what, ": ", problem, "; ", sink.size(),
                                                      meta.size ? absl::StrCat(" of ", *meta.size) : "",
                                                      " bytes are kept in ", incomplete,
                                                      " and the next attempt resumes from there")));
    }
  }
  if (meta.size && sink.size() != *meta.size) {
    return stop(absl::UnavailableError(absl::StrCat(
        "downloading ", what, ": the server sent ", sink.size(), " of ", *meta.size, " bytes",
        sink.size() == 0 ? "" : absl::StrCat("; they are kept in ", incomplete, " and the next attempt resumes from there"))));
  }
  if (check) {
    const std::string actual = check->HexFinal();
    if (actual != meta.etag) {
      return discard(absl::DataLossError(absl::StrCat(what, ": the contents' ", check->name(), " is ", actual,
                                                      ", the Hub says ", meta.etag,
                                                      "; the download was deleted (the next attempt fetches it anew)")));
    }
  }
  if (fsync(fd) != 0) {
    absl::Status s = Errno("cannot sync", incomplete);
    close(fd);
    return s;
  }
  close(fd);
  if (rename(incomplete.c_str(), blob.c_str()) != 0) return Errno("cannot rename to", blob);
  return absl::OkStatus();
}

}  // namespace relserve
