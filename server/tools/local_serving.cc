#include "server/tools/local_serving.h"

#include "server/util/status_macros.h"

namespace relserve {

constexpr char LocalServing::kModelName[];

absl::StatusOr<std::unique_ptr<LocalServing>> LocalServing::Create(LoadedModel model, int batch_size,
                                                                   int threads, ServingLimits limits) {
  std::unique_ptr<LocalServing> local(new LocalServing());
  local->tokenizer_ = std::move(model.tokenizer);
  local->engine_ = std::move(model.engine);
  BatcherConfig config;
  config.policy.max_batch_size = batch_size;
  config.policy.max_batch_tokens = static_cast<int64_t>(batch_size) * local->engine_->info().max_length;
  config.policy.max_queue_delay = absl::Milliseconds(1);
  config.num_workers = 1;
  config.max_queue_sequences = 1 << 20;
  config.on_worker_start = [threads] { SetComputeThreads(threads); };
  ASSIGN_OR_RETURN(local->batcher_, ModelBatcher::Create(local->engine_.get(), config, nullptr));
  ServedModel served;
  served.name = kModelName;
  served.backend = local->engine_.get();
  served.tokenizer = local->tokenizer_.get();
  served.batcher = local->batcher_.get();
  served.max_length = local->engine_->info().max_length;
  local->registry_.Add(served);
  local->serving_ = std::make_unique<EncoderServing>(&local->registry_, nullptr, limits);
  return local;
}

LocalServing::~LocalServing() {
  if (batcher_ != nullptr) batcher_->Stop(absl::Seconds(10));
}

}  // namespace relserve
