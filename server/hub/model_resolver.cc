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
  if (NamesHubModel(spec)) return ParseHubModelId(spec)->repo_id;
  return spec.substr(spec.find_last_of('/') + 1);
}

std::vector<std::string> ModelNameAliases(const std::string& name, const std::string& spec) {
  std::vector<std::string> aliases;
  if (!NamesHubModel(spec)) return aliases;
  const std::string repo_id = ParseHubModelId(spec)->repo_id;
  for (const std::string& alias : {repo_id, repo_id.substr(repo_id.find('/') + 1)}) {
    if (alias != name) aliases.push_back(alias);
  }
  return aliases;
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
