#include "server/hub/snapshot_download.h"

#include <unistd.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/hub/blob_download.h"
#include "server/hub/file_selection.h"
#include "server/hub/hub_client.h"
#include "server/util/file_util.h"
#include "server/util/log.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

absl::Status WithContext(const absl::Status& s, const std::string& context) {
  return absl::Status(s.code(), absl::StrCat(context, ": ", s.message()));
}

// Where a link of the snapshot points (for a message about a missing blob).
std::string LinkTarget(const std::string& path) {
  char target[4096];
  const ssize_t n = readlink(path.c_str(), target, sizeof(target));
  return n > 0 ? std::string(target, static_cast<size_t>(n)) : "";
}

}  // namespace

absl::StatusOr<std::string> FindCachedSnapshot(const HubModelId& id, const HubCache& cache) {
  const std::string model = id.ToString();
  std::string commit = id.revision;
  if (!IsCommitHash(id.revision)) {
    absl::StatusOr<std::string> ref = cache.ReadRef(id.repo_id, id.revision);
    if (!ref.ok()) {
      if (ref.status().code() != absl::StatusCode::kNotFound) return ref.status();
      if (!IsDirectory(cache.RepoDir(id.repo_id))) {
        return absl::NotFoundError(absl::StrCat(model, " is not in the cache ", cache.root(), " (no ",
                                                RepoFolderName(id.repo_id), " there)"));
      }
      return absl::NotFoundError(absl::StrCat(model, ": the cache has no ", cache.RefPath(id.repo_id, id.revision),
                                              " naming the commit of revision \"", id.revision, "\""));
    }
    commit = *ref;
  }
  const std::string dir = cache.SnapshotDir(id.repo_id, commit);
  if (!IsDirectory(dir)) return absl::NotFoundError(absl::StrCat(model, ": the cache has no snapshot ", dir));
  ASSIGN_OR_RETURN(std::vector<std::string> present, ListFilesRecursively(dir));
  const auto read = [&dir](const std::string& file) { return ReadFileToString(JoinPath(dir, file)); };
  absl::StatusOr<std::vector<std::string>> needed = SelectModelFiles(present, read);
  if (!needed.ok()) return WithContext(needed.status(), absl::StrCat(model, ": the cached snapshot ", dir, " is incomplete"));
  std::vector<std::string> dangling;
  for (const std::string& file : *needed) {
    const std::string path = JoinPath(dir, file);
    if (!FileExists(path)) dangling.push_back(absl::StrCat(file, " -> ", LinkTarget(path)));
  }
  if (!dangling.empty()) {
    return absl::NotFoundError(absl::StrCat(model, ": the cached snapshot ", dir,
                                            " links to blobs that are missing: ", absl::StrJoin(dangling, ", ")));
  }
  return dir;
}

absl::StatusOr<std::string> DownloadSnapshot(const HubModelId& id, const HubSettings& settings,
                                             DownloadProgress* progress) {
  const HubCache cache(settings.cache_dir);
  const std::string model = id.ToString();
  if (IsCommitHash(id.revision)) {
    if (absl::StatusOr<std::string> dir = FindCachedSnapshot(id, cache); dir.ok()) return dir;
  }
  const HubClient client(settings);
  absl::StatusOr<HubRevision> revision = client.GetRevision(id);
  if (!revision.ok()) {
    if (revision.status().code() != absl::StatusCode::kUnavailable) return revision.status();
    absl::StatusOr<std::string> cached = FindCachedSnapshot(id, cache);
    if (!cached.ok()) {
      return absl::UnavailableError(absl::StrCat(revision.status().message(), "; the cache cannot stand in: ",
                                                 cached.status().message()));
    }
    LogWarning(absl::StrCat(revision.status().message(), "; serving ", model, " from the cached snapshot ", *cached));
    return cached;
  }
  const std::string commit = revision->commit;
  const std::string context = absl::StrCat(model, " (commit ", commit, ")");
  RETURN_IF_ERROR(MakeDirectories(cache.SnapshotDir(id.repo_id, commit)));

  int fetched = 0;
  int64_t fetched_bytes = 0;
  const absl::Time start = absl::Now();
  const auto ensure = [&](const std::string& file) -> absl::Status {
    if (settings.cancelled && settings.cancelled()) return absl::CancelledError(absl::StrCat("cancelled while fetching ", model));
    if (cache.HasSnapshotFile(id.repo_id, commit, file)) return absl::OkStatus();
    ASSIGN_OR_RETURN(const HubFileMetadata meta, client.GetFileMetadata(id.repo_id, commit, file));
    const bool had_blob = FileExists(cache.BlobPath(id.repo_id, meta.etag));
    RETURN_IF_ERROR(DownloadBlob(client, cache, id.repo_id, file, meta, progress));
    if (!had_blob) {
      ++fetched;
      fetched_bytes += meta.size.value_or(0);
    }
    return cache.LinkSnapshotFile(id.repo_id, commit, file, meta.etag);
  };
  const auto read = [&](const std::string& file) -> absl::StatusOr<std::string> {
    RETURN_IF_ERROR(ensure(file));
    return ReadFileToString(cache.SnapshotFile(id.repo_id, commit, file));
  };
  absl::StatusOr<std::vector<std::string>> files = SelectModelFiles(revision->files, read);
  if (!files.ok()) return WithContext(files.status(), context);
  for (const std::string& file : *files) {
    if (absl::Status s = ensure(file); !s.ok()) return WithContext(s, context);
  }
  if (id.revision != commit) RETURN_IF_ERROR(cache.WriteRef(id.repo_id, id.revision, commit));
  if (fetched > 0) {
    LogInfo(absl::StrCat(context, ": fetched ", fetched, fetched == 1 ? " file" : " files", " (",
                         FormatBytes(fetched_bytes), ") in ",
                         absl::FormatDuration(absl::Trunc(absl::Now() - start, absl::Milliseconds(1))), " into ",
                         cache.SnapshotDir(id.repo_id, commit)));
  }
  return cache.SnapshotDir(id.repo_id, commit);
}

}  // namespace relserve
