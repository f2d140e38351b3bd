#ifndef RELSERVE_SERVER_HUB_BLOB_DOWNLOAD_H_
#define RELSERVE_SERVER_HUB_BLOB_DOWNLOAD_H_

#include <string>

#include "absl/status/status.h"
#include "server/hub/download_progress.h"
#include "server/hub/hub_cache.h"
#include "server/hub/hub_client.h"

namespace relserve {

// Puts blobs/ETAG of `repo_id` in place for `file`, as `meta` (from HubClient::GetFileMetadata)
// describes it; nothing to do when it is there already.
//
// The contents go to blobs/ETAG.incomplete, appended to what an interrupted attempt left there
// (a Range request; a server that sends the whole file again restarts it). Once complete they
// are checked: the size against the Hub's, and the digest the ETag is: the sha256 of an LFS
// file (64 hexadecimal digits), the git blob sha1 of any other (40). Only then is the file
// synced and renamed to blobs/ETAG. Meanwhile .locks/.../ETAG.lock is flock()ed, so that
// processes sharing the cache (replicas, huggingface_hub) fetch each blob once.
//
// Before a byte is fetched, the size the Hub declares (or, without one, the Content-Length of
// the download) must fit in the free space of the cache's filesystem: RESOURCE_EXHAUSTED
// naming the file, the bytes needed and the bytes free otherwise.
//
// Errors name the file and the repository. A download cut short (UNAVAILABLE, CANCELLED)
// keeps its .incomplete file, and the next call resumes it; an .incomplete file that received
// nothing (a redirect loop, a refusal) is removed. Contents that fail a check (DATA_LOSS: more
// bytes than announced, a wrong digest) are deleted: resuming them could only give the same
// wrong file.
absl::Status DownloadBlob(const HubClient& client, const HubCache& cache, const std::string& repo_id,
                          const std::string& file, const HubFileMetadata& meta, DownloadProgress* progress);

// Lower-case hexadecimal digest of `data`: "sha256" or "git-sha1" (git's blob id:
// sha1("blob SIZE\0" + data)). For tests and for checks of small files.
std::string HexDigest(const std::string& kind, const std::string& data);

}  // namespace relserve

#endif  // RELSERVE_SERVER_HUB_BLOB_DOWNLOAD_H_
