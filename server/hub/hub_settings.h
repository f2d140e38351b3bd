#ifndef RELSERVE_SERVER_HUB_HUB_SETTINGS_H_
#define RELSERVE_SERVER_HUB_HUB_SETTINGS_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/util/environment_reader.h"

namespace relserve {

// How models are fetched from the Hugging Face Hub, from the variables huggingface_hub reads,
// so that both share one cache and one configuration.
struct HubSettings {
  std::string endpoint = "https://huggingface.co";  // HF_ENDPOINT, without a trailing '/'
  // HF_TOKEN, else HUGGING_FACE_HUB_TOKEN, else the file HF_TOKEN_PATH (default HF_HOME/token)
  // that `huggingface-cli login` writes. Sent as "Authorization: Bearer" to the endpoint only.
  // Never logged nor quoted in errors.
  std::string token;
  std::string token_source;  // where the token came from, for messages ("HF_TOKEN"); "" without one
  // HF_HUB_CACHE, else HUGGINGFACE_HUB_CACHE, else HF_HOME/hub, else
  // XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub.
  std::string cache_dir;
  // No network at all: models come from the cache only. --offline or HF_HUB_OFFLINE=1.
  bool offline = false;
  std::string offline_source;  // "--offline" or "HF_HUB_OFFLINE", for messages
  // Metadata requests (the revision's file list, each file's HEAD) must finish within this
  // (HF_HUB_ETAG_TIMEOUT, seconds).
  absl::Duration metadata_timeout = absl::Seconds(10);
  // A download that receives nothing for this long fails, resumably (HF_HUB_DOWNLOAD_TIMEOUT,
  // seconds).
  absl::Duration download_stall_timeout = absl::Seconds(10);
  // Polled during network waits; once it returns true the download stops with CANCELLED (the
  // partial file stays, to be resumed). May be empty.
  std::function<bool()> cancelled;
};

// Reads the settings through `getenv`: the process's environment as main() reads it, handed down
// (HostOptions::environment, CliArgs::process_environment), or a test's own; empty: no variable
// is set. A value that cannot be read (HF_HUB_OFFLINE=maybe, HF_HUB_ETAG_TIMEOUT=-1, an
// HF_ENDPOINT that is not http(s)://) is INVALID_ARGUMENT naming the variable.
absl::StatusOr<HubSettings> HubSettingsFromEnvironment(const GetEnv& getenv);

}  // namespace relserve

#endif  // RELSERVE_SERVER_HUB_HUB_SETTINGS_H_
