// relserve-model download: a Hub model into the Hugging Face cache, on its own (for images and
// init containers), printing the snapshot's folder.
#include <iostream>

#include "absl/strings/str_cat.h"
#include "server/hub/hub_model_id.h"
#include "server/hub/model_resolver.h"
#include "server/tools/commands.h"
#include "server/tools/engine_flags.h"
#include "server/util/file_util.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

absl::Status RunDownload(const CliArgs& args) {
  ASSIGN_OR_RETURN(std::string spec, args.Required("model"));
  if (!NamesHubModel(spec) && !IsDirectory(spec)) {
    const absl::StatusOr<HubModelId> id = ParseHubModelId(spec);
    return absl::InvalidArgumentError(absl::StrCat("--model: no directory named \"", spec, "\" exists, and ",
                                                   id.status().message()));
  }
  // A directory that exists is printed as it is: nothing to fetch.
  ASSIGN_OR_RETURN(std::string dir, ModelDirFromFlags(args));
  std::cout << dir << std::endl;
  return absl::OkStatus();
}

}  // namespace

ModelCommand DownloadCommand() {
  return {"download",
          "fetches what the Hub model needs into the Hugging Face cache (HF_HUB_CACHE, HF_HOME/hub or\n"
          "~/.cache/huggingface/hub; HF_ENDPOINT, HF_TOKEN) and prints its snapshot's folder; --offline\n"
          "checks the cache only",
          ModelFlags(), RunDownload};
}

}  // namespace relserve
