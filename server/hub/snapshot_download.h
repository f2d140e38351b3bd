#ifndef RELSERVE_SERVER_HUB_SNAPSHOT_DOWNLOAD_H_
#define RELSERVE_SERVER_HUB_SNAPSHOT_DOWNLOAD_H_

#include <string>

#include "absl/status/statusor.h"
#include "server/hub/download_progress.h"
#include "server/hub/hub_cache.h"
#include "server/hub/hub_model_id.h"
#include "server/hub/hub_settings.h"

namespace relserve {

// The snapshot of `id` in `cache`, without the network: the commit is the revision itself
// when it is a commit hash, else the one refs/REVISION holds; the snapshot must hold every
// file SelectModelFiles asks for among its own files (config.json, the weights and every
// shard, the modules' files), each resolving to a blob. NOT_FOUND naming what is missing
// (the ref, the snapshot folder, a file, a blob a link points to).
absl::StatusOr<std::string> FindCachedSnapshot(const HubModelId& id, const HubCache& cache);

// The snapshot of `id` in settings.cache_dir with every file relserve needs, fetched from
// settings.endpoint where missing (huggingface_hub's snapshot_download, limited to the files
// of file_selection.h):
//   1. a commit hash whose snapshot is complete in the cache needs no network at all;
//   2. the revision's commit and files come from the Hub's API; if the Hub cannot be reached
//      (UNAVAILABLE), a complete snapshot of the revision in the cache is used, with a warning;
//   3. each needed file missing from the snapshot is fetched (DownloadBlob) and linked;
//   4. refs/REVISION is written last (for a branch or tag), once the snapshot is complete.
// Returns the snapshot's folder. `progress` reports each file downloaded. Errors as
// HubClient's and DownloadBlob's, naming the model.
absl::StatusOr<std::string> DownloadSnapshot(const HubModelId& id, const HubSettings& settings,
                                             DownloadProgress* progress);

}  // namespace relserve

#endif  // RELSERVE_SERVER_HUB_SNAPSHOT_DOWNLOAD_H_
