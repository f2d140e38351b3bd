#include "server/hub/hub_cache.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "server/hub/hub_model_id.h"
#include "server/util/file_util.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

absl::Status Errno(const std::string& what, const std::string& path) {
  return absl::UnavailableError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

// A name beside `path` that no other writer uses.
std::string TemporaryName(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  return absl::StrCat(path, ".tmp.", getpid(), ".", counter.fetch_add(1));
}

absl::Status ListInto(const std::string& dir, const std::string& prefix, std::vector<std::string>* out) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return Errno("cannot list", dir);
  absl::Status status;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    const std::string path = JoinPath(dir, name);
    struct stat st;
    if (lstat(path.c_str(), &st) != 0) continue;  // gone meanwhile
    const std::string relative = prefix.empty() ? name : absl::StrCat(prefix, "/", name);
    if (S_ISDIR(st.st_mode)) {
      status = ListInto(path, relative, out);
      if (!status.ok()) break;
    } else {
      out->push_back(relative);
    }
  }
  closedir(d);
  return status;
}

}  // namespace

std::string RepoFolderName(const std::string& repo_id) {
  return absl::StrCat("models--", absl::StrReplaceAll(repo_id, {{"/", "--"}}));
}

absl::Status MakeDirectories(const std::string& path) {
  if (path.empty() || IsDirectory(path)) return absl::OkStatus();
  const size_t slash = path.find_last_of('/');
  if (slash != std::string::npos && slash > 0) RETURN_IF_ERROR(MakeDirectories(path.substr(0, slash)));
  if (mkdir(path.c_str(), 0777) != 0 && errno != EEXIST) return Errno("cannot create the folder", path);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> ListFilesRecursively(const std::string& dir) {
  std::vector<std::string> files;
  RETURN_IF_ERROR(ListInto(dir, "", &files));
  std::sort(files.begin(), files.end());
  return files;
}

std::string HubCache::RepoDir(const std::string& repo_id) const { return JoinPath(root_, RepoFolderName(repo_id)); }

std::string HubCache::SnapshotDir(const std::string& repo_id, const std::string& commit) const {
  return absl::StrCat(RepoDir(repo_id), "/snapshots/", commit);
}

std::string HubCache::SnapshotFile(const std::string& repo_id, const std::string& commit,
                                   const std::string& file) const {
  return absl::StrCat(SnapshotDir(repo_id, commit), "/", file);
}

std::string HubCache::BlobPath(const std::string& repo_id, const std::string& etag) const {
  return absl::StrCat(RepoDir(repo_id), "/blobs/", etag);
}

std::string HubCache::IncompletePath(const std::string& repo_id, const std::string& etag) const {
  return absl::StrCat(BlobPath(repo_id, etag), ".incomplete");
}

std::string HubCache::LockPath(const std::string& repo_id, const std::string& etag) const {
  return absl::StrCat(JoinPath(root_, ".locks"), "/", RepoFolderName(repo_id), "/", etag, ".lock");
}

std::string HubCache::RefPath(const std::string& repo_id, const std::string& revision) const {
  return absl::StrCat(RepoDir(repo_id), "/refs/", revision);
}

absl::StatusOr<std::string> HubCache::ReadRef(const std::string& repo_id, const std::string& revision) const {
  const std::string path = RefPath(repo_id, revision);
  if (!FileExists(path)) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  const std::string commit(absl::StripAsciiWhitespace(text));
  if (!IsCommitHash(commit)) {
    return absl::DataLossError(absl::StrCat(path, ": holds \"", commit.substr(0, 64), "\", not a 40-digit commit hash"));
  }
  return commit;
}

absl::Status HubCache::WriteRef(const std::string& repo_id, const std::string& revision,
                                const std::string& commit) const {
  if (auto current = ReadRef(repo_id, revision); current.ok() && *current == commit) return absl::OkStatus();
  const std::string path = RefPath(repo_id, revision);
  RETURN_IF_ERROR(MakeDirectories(path.substr(0, path.find_last_of('/'))));
  const std::string temporary = TemporaryName(path);
  RETURN_IF_ERROR(WriteStringToFile(temporary, commit));
  if (rename(temporary.c_str(), path.c_str()) != 0) {
    absl::Status s = Errno("cannot rename a temporary file to", path);
    unlink(temporary.c_str());
    return s;
  }
  return absl::OkStatus();
}

bool HubCache::HasSnapshotFile(const std::string& repo_id, const std::string& commit, const std::string& file) const {
  return FileExists(SnapshotFile(repo_id, commit, file));
}

absl::Status HubCache::LinkSnapshotFile(const std::string& repo_id, const std::string& commit, const std::string& file,
                                        const std::string& etag) const {
  const std::string link = SnapshotFile(repo_id, commit, file);
  // snapshots/COMMIT/a/b/FILE -> ../../../../blobs/ETAG: up out of the file's folders, COMMIT
  // and snapshots.
  std::string target;
  const size_t depth = static_cast<size_t>(std::count(file.begin(), file.end(), '/'));
  for (size_t i = 0; i < depth + 2; ++i) target += "../";
  absl::StrAppend(&target, "blobs/", etag);
  char existing[4096];
  const ssize_t n = readlink(link.c_str(), existing, sizeof(existing));
  if (n > 0 && std::string(existing, static_cast<size_t>(n)) == target && FileExists(link)) return absl::OkStatus();
  RETURN_IF_ERROR(MakeDirectories(link.substr(0, link.find_last_of('/'))));
  const std::string temporary = TemporaryName(link);
  if (symlink(target.c_str(), temporary.c_str()) != 0) return Errno("cannot create the link", temporary);
  if (rename(temporary.c_str(), link.c_str()) != 0) {
    absl::Status s = Errno("cannot rename a link to", link);
    unlink(temporary.c_str());
    return s;
  }
  return absl::OkStatus();
}

}  // namespace relserve
