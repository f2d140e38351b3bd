#include "server/tools/local_serving.h"

#include "server/util/status_macros.h"

namespace relserve {

constexpr char LocalServing::kModelName[];

HostOptions LocalHostOptions(const std::string& device, int batch_size, int threads, int max_length) {
  HostOptions options;
  options.devices = {device};
  options.workers_per_device = 1;
  options.threads_per_worker = threads;
  options.policy.max_batch_size = batch_size;
  options.policy.max_batch_tokens = static_cast<int64_t>(batch_size) * max_length;
  options.policy.max_queue_delay = absl::Milliseconds(1);
  options.max_queue_sequences = 1 << 20;
  options.warmup = false;
  options.log = false;
  return options;
}

absl::StatusOr<std::unique_ptr<LocalServing>> LocalServing::Create(LoadedModel model, const std::string& device,
                                                                   int batch_size, int threads, ServingLimits limits) {
  if (model.engine == nullptr) return absl::InvalidArgumentError("no engine");
  std::unique_ptr<LocalServing> local(new LocalServing());
  HostOptions options = LocalHostOptions(device, batch_size, threads, model.engine->info().max_length);
  ASSIGN_OR_RETURN(local->host_, ModelHost::Create(std::move(options), nullptr));
  RETURN_IF_ERROR(local->host_->Add(kModelName, std::move(model), ""));
  local->serving_ = std::make_unique<EncoderServing>(&local->host_->registry(), nullptr, limits);
  return local;
}

LocalServing::~LocalServing() {
  if (host_ != nullptr) host_->Stop(absl::Seconds(10));
  serving_.reset();  // before the host, which owns what its registry points at
}

}  // namespace relserve
