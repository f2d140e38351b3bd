#ifndef RELSERVE_SERVER_HOSTING_HOST_OPTIONS_H_
#define RELSERVE_SERVER_HOSTING_HOST_OPTIONS_H_

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "server/batching/batch_policy.h"
#include "server/batching/model_batcher.h"
#include "server/model/engine.h"
#include "server/util/environment_reader.h"

namespace relserve {

// One model to host: the name it is served under and where it comes from.
struct ModelSpec {
  std::string name;
  // A model directory, a Hugging Face Hub id (org/repo[@revision], resolved to a snapshot of the
  // cache; server/hub) or a simulated device (simulated:PROFILE; server/simulated).
  std::string source;
};

// How a ModelHost loads, runs and batches every model it hosts: relserve fills it from its flags
// (main/), relserve-model from its command's (tools/local_serving.cc).
struct HostOptions {
  // Where the copies of each model run: --device's items (ExpandDeviceList), one copy per item,
  // all on the CPU or all on GPUs; a simulated model runs one copy on its simulated device.
  std::vector<std::string> devices = {"cpu"};
  // How each copy is loaded (dtype, max length, pooling, CUDA graphs, attention, batch rounding).
  // The host sets `device` per copy, and the tokenizer of the other copies to the first one's.
  EngineOptions engine;
  // Workers per copy and compute threads per worker (worker_count.h; 0: automatic).
  int workers_per_device = 0;
  int threads_per_worker = 0;
  // The CPUs the copies share (ResolveWorkersPerCopy); 0: DetectCpuCount's.
  int cpus = 0;
  // Every model's batch policy; empty bucket_bounds: DefaultLengthBuckets(the model's max
  // length), the one default of batching/length_buckets.h.
  BatchPolicyConfig policy;
  size_t max_queue_sequences = 10000;
  // Warm each copy up over its length buckets before it serves (warm_up.h), and with it every
  // worker of a backend that WarmsUpPerThread (a GPU) on its own thread (warm_up_workers).
  bool warmup = true;
  bool warmup_workers = true;
  // Hub models from the Hugging Face cache only (--offline, as HF_HUB_OFFLINE=1).
  bool offline = false;
  // The process's environment as main() reads it, for the variables a Hub model's fetch reads
  // (HF_ENDPOINT, HF_TOKEN, HF_HUB_CACHE, HOME, ...; hub/hub_settings.h), and only then. Empty:
  // none is set.
  GetEnv environment;
  // Start-up lines on standard error (what is loaded, from where, in how long; the workers; warm-up).
  // relserve-model's commands keep standard error to their own messages.
  bool log = true;
  // Polled between loading steps (each model, copy and warm-up length); once true, loading stops
  // with CANCELLED. Empty: never.
  std::function<bool()> stop_requested;
};

// The BatcherConfig of a model with `max_length` (its longest sequence) run by `workers` workers
// per copy: `options`' policy, with DefaultLengthBuckets(max_length) where it gives no bounds,
// its queue limit, and warm_up_workers when both warmup and warmup_workers are on. Leaves
// on_worker_start empty (the host sets it for engines).
BatcherConfig HostBatcherConfig(const HostOptions& options, const std::string& name, int max_length, int workers);

}  // namespace relserve

#endif  // RELSERVE_SERVER_HOSTING_HOST_OPTIONS_H_
