#include "server/hub/model_resolver.h"

#include <sys/stat.h>

#include "absl/strings/str_cat.h"
#include "server/hub/hub_cache.h"
#include "server/hub/hub_model_id.h"
#include "server/hub/snapshot_download.h"

namespace relserve {
namespace {

bool PathExists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

}  // namespace

bool NamesHubModel(const std::string& spec) { return !PathExists(spec) && ParseHubModelId(spec).ok(); }

std::string DefaultModelName(const std::string& spec) {
  if (NamesHubModel(spec)) {
    const HubModelId id = *ParseHubModelId(spec);
    return id.repo_id.substr(id.repo_id.find('/') + 1);
  }
  return spec.substr(spec.find_last_of('/') + 1);
}

absl::StatusOr<std::string> ResolveModelDir(const std::string& spec, const HubSettings& settings,
                                            DownloadProgress* progress) {
  if (PathExists(spec)) return spec;
  absl::StatusOr<HubModelId> id = ParseHubModelId(spec);
  if (!id.ok()) return spec;
  absl::StatusOr<std::string> dir;
  if (settings.offline) {
    dir = FindCachedSnapshot(*id, HubCache(settings.cache_dir));
    if (!dir.ok()) {
      return absl::NotFoundError(absl::StrCat(
          dir.status().message(), "; offline (", settings.offline_source,
          ") it cannot be fetched: run `relserve-model download --model ", spec,
          "` where the Hub is reachable, with the same HF_HUB_CACHE (no directory named ", spec, " exists either)"));
    }
    return dir;
  }
  dir = DownloadSnapshot(*id, settings, progress);
  if (!dir.ok() && dir.status().code() == absl::StatusCode::kNotFound) {
    return absl::NotFoundError(absl::StrCat(dir.status().message(), " (no directory named ", spec, " exists either)"));
  }
  return dir;
}

}  // namespace relserve
