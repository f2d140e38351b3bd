#include "server/simulated/simulated_device.h"

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/backend/device_shapes.h"

namespace relserve {
namespace {

constexpr std::string_view kPrefix = "simulated:";

}  // namespace

double SimulatedDeviceProfile::DeviceSeconds(int64_t batch, int64_t length) const {
  const double b = static_cast<double>(batch), l = static_cast<double>(length);
  return fixed_seconds + per_token_seconds * b * l + per_attention_seconds * b * l * l;
}

double SimulatedDeviceProfile::SaturatedTokensPerSecond(int max_batch_size, int64_t max_batch_tokens) const {
  // Seconds per token integrated over L in [8, 512] (every length's tokens weigh the same).
  double seconds = 0;
  int lengths = 0;
  for (int64_t length = 8; length <= 512; ++length, ++lengths) {
    const int64_t full = std::max<int64_t>(1, std::min<int64_t>(max_batch_size, max_batch_tokens / length));
    seconds += DeviceSeconds(full, length) / static_cast<double>(full * length);
  }
  return static_cast<double>(lengths) / seconds;
}

absl::StatusOr<SimulatedDeviceProfile> FindSimulatedProfile(std::string_view name) {
  if (name == "h100-deberta-v3-base") {
    SimulatedDeviceProfile p;
    p.name = std::string(name);
    p.architecture = "DebertaV2Model";
    p.hidden_size = 768;
    p.num_layers = 12;
    p.vocab_size = 128100;
    p.max_length = 512;
    p.fixed_seconds = 0.1e-3;
    p.per_token_seconds = 1.1e-6;
    p.per_attention_seconds = 1.4e-9;
    p.eager_launch_seconds = 4.4e-3;
    p.graph_launch_seconds = 0.05e-3;
    p.graph_tokens = 4096;
    p.copy_seconds = 0.02e-3;
    return p;
  }
  return absl::NotFoundError(
      absl::StrCat("no simulated device \"", std::string(name), "\": the profiles are h100-deberta-v3-base"));
}

std::string SimulatedDeviceSpec::Describe() const {
  return absl::StrCat(std::string(kPrefix), profile.name, ",scale=", scale, ",cold-ms=", cold_ms, ",graphs=", graphs ? 1 : 0);
}

bool IsSimulatedModel(std::string_view model) { return model.substr(0, kPrefix.size()) == kPrefix; }

absl::StatusOr<SimulatedDeviceSpec> ParseSimulatedDeviceSpec(std::string_view model) {
  if (!IsSimulatedModel(model)) {
    return absl::InvalidArgumentError(absl::StrCat("\"", std::string(model), "\" does not start with simulated:"));
  }
  const std::vector<std::string> parts = absl::StrSplit(std::string(model.substr(kPrefix.size())), ',');
  SimulatedDeviceSpec spec;
  absl::StatusOr<SimulatedDeviceProfile> profile = FindSimulatedProfile(parts[0]);
  if (!profile.ok()) return profile.status();
  spec.profile = *profile;
  for (size_t i = 1; i < parts.size(); ++i) {
    const std::vector<std::string> kv = absl::StrSplit(parts[i], absl::MaxSplits('=', 1));
    double value = 0;
    if (kv.size() != 2 || !absl::SimpleAtod(kv[1], &value)) {
      return absl::InvalidArgumentError(absl::StrCat("simulated device: \"", parts[i],
                                                     "\" is not NAME=NUMBER (scale, cold-ms or graphs)"));
    }
    if (kv[0] == "scale") {
      if (!(value >= 1 && value <= 1000)) {
        return absl::InvalidArgumentError(absl::StrCat("simulated device: scale ", kv[1], " is outside [1, 1000]"));
      }
      spec.scale = value;
    } else if (kv[0] == "cold-ms") {
      if (!(value >= 0 && value <= 10000)) {
        return absl::InvalidArgumentError(absl::StrCat("simulated device: cold-ms ", kv[1], " is outside [0, 10000]"));
      }
      spec.cold_ms = value;
    } else if (kv[0] == "graphs") {
      if (value != 0 && value != 1) {
        return absl::InvalidArgumentError(absl::StrCat("simulated device: graphs ", kv[1], " is not 0 or 1"));
      }
      spec.graphs = value == 1;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("simulated device: unknown setting \"", kv[0], "\" (known: scale, cold-ms, graphs)"));
    }
  }
  return spec;
}

absl::Time SimulatedDevice::Enqueue(absl::Time ready, absl::Duration work, absl::Time not_before) {
  absl::Time end;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time start = std::max(ready, free_at_);
    // Two workers' streams interleave: the device is free again once this work is done, even
    // where the batch's launch (not_before) ends later.
    free_at_ = start + work;
    end = std::max(free_at_, not_before);
    busy_ += work;
  }
  absl::SleepFor(end - absl::Now());
  return end;
}

absl::Duration SimulatedDevice::busy() const {
  absl::MutexLock lock(&mu_);
  return busy_;
}

}  // namespace relserve
