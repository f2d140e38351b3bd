#ifndef RELSERVE_SERVER_HUB_HUB_CLIENT_H_
#define RELSERVE_SERVER_HUB_HUB_CLIENT_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/hub/hub_model_id.h"
#include "server/hub/hub_settings.h"

namespace relserve {

// A revision of a repository: the commit it names and the files at that commit.
struct HubRevision {
  std::string commit;              // 40 hexadecimal digits
  std::vector<std::string> files;  // paths inside the repository, each IsSafeRepoPath
};

// What the Hub says of one file at one commit (huggingface_hub's get_hf_file_metadata).
struct HubFileMetadata {
  std::string commit;  // X-Repo-Commit
  // X-Linked-Etag, else ETag, without W/ and quotes: the sha256 of an LFS file's contents, the
  // git blob sha1 of any other file. The file's name in blobs/.
  std::string etag;
  std::optional<int64_t> size;  // X-Linked-Size, else Content-Length
  // Where to GET the contents: a Location the resolve route redirected to (the CDN for LFS
  // files), else the resolve URL itself.
  std::string location;
};

// Receives a download. Begin is called once before the first byte, with the offset the
// server resumes from (the one asked for, or 0 when it sends the whole file again) and the
// length of what follows when the server declares it (Content-Length); false stops the
// download.
class DownloadSink {
 public:
  virtual ~DownloadSink() = default;
  virtual bool Begin(int64_t offset, std::optional<int64_t> length) = 0;
  virtual bool Write(const char* data, size_t size) = 0;
};

// The Hub's HTTP routes, as huggingface_hub uses them:
//   GET  {endpoint}/api/models/{repo}/revision/{revision}   commit ("sha") and files ("siblings")
//   HEAD {endpoint}/{repo}/resolve/{revision}/{file}        a file's metadata, without following
//                                                           a redirect to another host
//   GET  the Location of that HEAD (or the resolve URL)     the contents, resumable with Range
// The token goes to the endpoint's origin only, never to a host a redirect names. Redirects on
// the same origin (a renamed repository) are followed; at most 10 redirects in a row, then
// UNAVAILABLE "too many redirects (10) fetching URL" (a loop). Errors name the repository,
// revision and file and say what to do: NOT_FOUND (repository, revision or file),
// UNAUTHENTICATED (a token is needed, or the one given was refused), PERMISSION_DENIED (a gated
// repository whose conditions the token's account has not accepted), UNAVAILABLE (no
// connection, a timeout, the Hub's 5xx or 429, a body cut short: worth retrying), DATA_LOSS (an
// answer that makes no sense). Thread-compatible.
class HubClient {
 public:
  explicit HubClient(HubSettings settings) : settings_(std::move(settings)) {}

  absl::StatusOr<HubRevision> GetRevision(const HubModelId& id) const;
  absl::StatusOr<HubFileMetadata> GetFileMetadata(const std::string& repo_id, const std::string& revision,
                                                  const std::string& file) const;
  // GETs `url` from byte `offset` on into `sink`. UNAVAILABLE when the connection ends early
  // (what arrived went to the sink and can be resumed).
  absl::Status Download(const std::string& url, int64_t offset, DownloadSink* sink) const;

  const HubSettings& settings() const { return settings_; }

 private:
  std::vector<std::string> Headers(const std::string& url) const;
  std::string ResolveUrl(const std::string& repo_id, const std::string& revision, const std::string& file) const;

  HubSettings settings_;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_HUB_HUB_CLIENT_H_
