#ifndef RELSERVE_SERVER_HUB_HUB_CACHE_H_
#define RELSERVE_SERVER_HUB_HUB_CACHE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace relserve {

// The Hugging Face cache as huggingface_hub lays it out, so that both read and fill one cache:
//
//   ROOT/models--ORG--NAME/refs/REVISION          the commit a branch or tag named, no newline
//   ROOT/models--ORG--NAME/snapshots/COMMIT/FILE  a relative link to ../../blobs/ETAG (one more
//                                                 ../ per folder level of FILE)
//   ROOT/models--ORG--NAME/blobs/ETAG             the contents: ETAG is the sha256 of an LFS
//                                                 file, the git blob sha1 of any other
//   ROOT/models--ORG--NAME/blobs/ETAG.incomplete  a download under way or interrupted
//   ROOT/.locks/models--ORG--NAME/ETAG.lock       flock()ed while ETAG downloads (huggingface_hub's
//                                                 filelock takes the same lock)
//
// Whatever stands at a complete name is complete: blobs appear by rename once checked, links
// and refs by rename of a finished temporary. Repository ids, revisions, commits, etags and
// file names must have been validated (hub_model_id.h) before they reach these paths.
// Thread-compatible; every method is a file-system operation.
class HubCache {
 public:
  explicit HubCache(std::string root) : root_(std::move(root)) {}

  const std::string& root() const { return root_; }
  std::string RepoDir(const std::string& repo_id) const;
  std::string SnapshotDir(const std::string& repo_id, const std::string& commit) const;
  std::string SnapshotFile(const std::string& repo_id, const std::string& commit, const std::string& file) const;
  std::string BlobPath(const std::string& repo_id, const std::string& etag) const;
  std::string IncompletePath(const std::string& repo_id, const std::string& etag) const;
  std::string LockPath(const std::string& repo_id, const std::string& etag) const;
  std::string RefPath(const std::string& repo_id, const std::string& revision) const;

  // The commit that refs/REVISION holds: NOT_FOUND when there is none, DATA_LOSS when it holds
  // something other than a commit hash.
  absl::StatusOr<std::string> ReadRef(const std::string& repo_id, const std::string& revision) const;
  // Writes refs/REVISION (through a temporary file and a rename); nothing when it already
  // holds `commit`, so that a read-only cache that is up to date stays usable.
  absl::Status WriteRef(const std::string& repo_id, const std::string& revision, const std::string& commit) const;

  // Whether snapshots/COMMIT/FILE resolves to a regular file (a link whose blob is missing
  // does not).
  bool HasSnapshotFile(const std::string& repo_id, const std::string& commit, const std::string& file) const;
  // Points snapshots/COMMIT/FILE at blobs/ETAG with a relative link, replacing whatever was
  // there in one rename. The blob must exist.
  absl::Status LinkSnapshotFile(const std::string& repo_id, const std::string& commit, const std::string& file,
                                const std::string& etag) const;

 private:
  std::string root_;
};

// "models--ORG--NAME", huggingface_hub's repo_folder_name for a model.
std::string RepoFolderName(const std::string& repo_id);

// Creates `path` and its missing parents (mode 0777 less the umask); fine when it exists.
absl::Status MakeDirectories(const std::string& path);

// Every file under `dir` (regular files and links, followed or dangling), as paths relative to
// it with '/' between parts, sorted. Used for the files of a snapshot.
absl::StatusOr<std::vector<std::string>> ListFilesRecursively(const std::string& dir);

}  // namespace relserve

#endif  // RELSERVE_SERVER_HUB_HUB_CACHE_H_
