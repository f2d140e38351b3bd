#include "server/simulated/simulated_backend.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/backend/device_shapes.h"

namespace relserve {
SimulatedBackend::SimulatedBackend(SimulatedDeviceSpec spec, std::function<void(double)> on_busy)
    : spec_(std::move(spec)), on_busy_(std::move(on_busy)) {
  const SimulatedDeviceProfile& p = spec_.profile;
  info_.architecture = p.architecture;
  info_.model_type = "simulated";
  info_.hidden_size = p.hidden_size;
  info_.num_layers = p.num_layers;
  info_.vocab_size = p.vocab_size;
  info_.max_length = p.max_length;
  info_.max_length_source = absl::StrCat("simulated device ", p.name);
  info_.embedding_dim = p.hidden_size;
  info_.pooling.modes = {PoolingMode::kMean};
  info_.dtype = DType::kBFloat16;
  info_.device = spec_.Describe();
  info_.no_tokenizer_reason = "a simulated device takes token ids";
}

absl::Status SimulatedBackend::Validate(const SequenceInput& sequence) const {
  if (sequence.input_ids.empty()) return absl::InvalidArgumentError("input_ids is empty");
  if (static_cast<int>(sequence.input_ids.size()) > info_.max_length) {
    return absl::InvalidArgumentError(absl::StrCat("input_ids has ", sequence.input_ids.size(),
                                                   " tokens, more than max_length ", info_.max_length));
  }
  for (size_t i = 0; i < sequence.input_ids.size(); ++i) {
    const int32_t id = sequence.input_ids[i];
    if (id < 0 || id >= info_.vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("input_ids[", i, "] = ", id, " is outside [0, ", info_.vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

SimulatedBackend::Shape SimulatedBackend::ShapeOf(int64_t batch, int64_t length) const {
  Shape shape;
  shape.length = DeviceBatchLength(static_cast<int>(length), info_.max_length);
  shape.rows = DeviceBatchSize(static_cast<int>(batch), std::numeric_limits<int>::max());
  // The engine's graphs hold exactly the rounded batch sizes (captured_forwards.h).
  shape.graph = spec_.graphs && shape.rows * shape.length <= spec_.profile.graph_tokens;
  return shape;
}

std::vector<int> SimulatedBackend::WarmUpLengths(int max_length) const { return DeviceBatchLengths(max_length); }

std::vector<int> SimulatedBackend::WarmUpBatchSizes(int max_batch_size) const {
  std::vector<int> sizes = DeviceBatchSizes(max_batch_size);
  if (!sizes.empty()) sizes.back() = DeviceBatchSize(sizes.back(), std::numeric_limits<int>::max());
  return sizes;
}

int64_t SimulatedBackend::cold_batches() const {
  absl::MutexLock lock(&cold_mu_);
  return cold_batches_;
}

absl::StatusOr<std::vector<SequenceOutput>> SimulatedBackend::Run(const std::vector<SequenceInput>& batch,
                                                                  uint32_t outputs) {
  return RunTimed(batch, outputs, nullptr);
}

absl::StatusOr<std::vector<SequenceOutput>> SimulatedBackend::RunTimed(const std::vector<SequenceInput>& batch,
                                                                       uint32_t outputs, RunTimings* timings) {
  const absl::Time started = absl::Now();
  if (timings != nullptr) *timings = RunTimings();
  if ((outputs & kOutputLogits) && info_.labels.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("model ", info_.architecture, " has no classification head"));
  }
  if (outputs & (kOutputSparse | kOutputMultiVector)) {
    return absl::FailedPreconditionError("a simulated device has no sparse or multi-vector head");
  }
  if (batch.empty()) return std::vector<SequenceOutput>();
  int64_t longest = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (absl::Status s = Validate(batch[i]); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", i, ": ", s.message()));
    }
    longest = std::max<int64_t>(longest, static_cast<int64_t>(batch[i].input_ids.size()));
  }
  const Shape shape = ShapeOf(static_cast<int64_t>(batch.size()), longest);
  const SimulatedDeviceProfile& p = spec_.profile;
  const double scale = spec_.scale;
  double launch = shape.graph ? p.graph_launch_seconds : p.eager_launch_seconds;
  if (spec_.cold_ms > 0) {
    absl::MutexLock lock(&cold_mu_);
    if (warm_shapes_.insert({std::this_thread::get_id(), shape.rows, shape.length}).second) {
      launch += spec_.cold_ms * 1e-3;
      ++cold_batches_;
    }
  }
  const absl::Time prepared = absl::Now();
  // The launch: the host queues the kernels (or the graph), which start on the device as they come.
  const absl::Time launch_end = prepared + absl::Seconds(launch * scale);
  absl::SleepFor(launch_end - absl::Now());
  const absl::Time launched = absl::Now();
  const absl::Duration work = absl::Seconds((p.DeviceSeconds(shape.rows, shape.length) + p.copy_seconds) * scale);
  device_.Enqueue(shape.graph ? launched : prepared, work, launch_end);
  if (on_busy_) on_busy_(absl::ToDoubleSeconds(work));

  std::vector<SequenceOutput> results(batch.size());
  for (size_t b = 0; b < batch.size(); ++b) {
    const SequenceInput& s = batch[b];
    SequenceOutput& r = results[b];
    r.num_tokens = static_cast<int32_t>(s.input_ids.size());
    double sum = 0;
    for (int32_t id : s.input_ids) sum += id;
    if (outputs & (kOutputPooled | kOutputPooledUnnormalized)) {
      std::vector<float> pooled(static_cast<size_t>(info_.embedding_dim), 0.0f);
      pooled[0] = static_cast<float>(sum);
      if (pooled.size() > 1) pooled[1] = static_cast<float>(s.input_ids.size());
      if (pooled.size() > 2) pooled[2] = 1;
      if (outputs & kOutputPooledUnnormalized) r.pooled_unnormalized = pooled;
      if (outputs & kOutputPooled) r.pooled = std::move(pooled);
    }
    if (outputs & kOutputTokenStates) r.token_states.assign(s.input_ids.size() * info_.hidden_size, 0.0f);
  }
  if (timings != nullptr) {
    timings->prepare = prepared - started;
    timings->forward = launched - prepared;
    timings->results = absl::Now() - launched;
  }
  return results;
}

}  // namespace relserve
