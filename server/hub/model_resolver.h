#ifndef RELSERVE_SERVER_HUB_MODEL_RESOLVER_H_
#define RELSERVE_SERVER_HUB_MODEL_RESOLVER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/hub/download_progress.h"
#include "server/hub/hub_settings.h"

namespace relserve {

// What every program that takes a model (relserve --model, relserve-model --model) does with
// the value before the engine loads it.
//
// A path that exists is taken as it is, even when it also reads as a Hub id ("org/repo" in
// the working directory). Otherwise a value of the form org/repo[@revision] (hub_model_id.h)
// names a model on the Hugging Face Hub: its snapshot in the cache is returned, fetched first
// where files are missing (snapshot_download.h), or, with settings.offline, taken from the
// cache only (NOT_FOUND naming what is missing and the setting that forbids the network).
// Anything else is returned as it is, for the engine to report as a missing directory.
absl::StatusOr<std::string> ResolveModelDir(const std::string& spec, const HubSettings& settings,
                                            DownloadProgress* progress);

// Whether `spec` will be fetched from the Hub: no path of that name exists and it reads as
// org/repo[@revision].
bool NamesHubModel(const std::string& spec);

// The name a model is served under when --model gives none: the folder's name for a path,
// the full repository id "org/repo" (without the revision) for a Hub id, as TEI, Infinity and
// vLLM report it and clients send it.
std::string DefaultModelName(const std::string& spec);

// The other names requests may use for a model served as `name` from `spec`: for a Hub id, the
// repository id "org/repo" and the repository's name "repo" (those that are not `name`); none
// for a path.
std::vector<std::string> ModelNameAliases(const std::string& name, const std::string& spec);

}  // namespace relserve

#endif  // RELSERVE_SERVER_HUB_MODEL_RESOLVER_H_
