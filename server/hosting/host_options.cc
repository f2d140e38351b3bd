#include "server/hosting/host_options.h"

#include "server/batching/length_buckets.h"

namespace relserve {

BatcherConfig HostBatcherConfig(const HostOptions& options, const std::string& name, int max_length, int workers) {
  BatcherConfig config;
  config.policy = options.policy;
  if (config.policy.bucket_bounds.empty()) config.policy.bucket_bounds = DefaultLengthBuckets(max_length);
  config.num_workers = workers;
  config.max_queue_sequences = options.max_queue_sequences;
  config.warm_up_workers = options.warmup && options.warmup_workers;
  config.model_name = name;
  config.stop = options.stop_requested;
  return config;
}

}  // namespace relserve
