#ifndef RELSERVE_SERVER_HOSTING_MODEL_HOST_H_
#define RELSERVE_SERVER_HOSTING_MODEL_HOST_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/batching/model_batcher.h"
#include "server/batching/worker_count.h"
#include "server/hosting/host_options.h"
#include "server/model/engine.h"
#include "server/serving/metrics_batch_observer.h"
#include "server/serving/model_registry.h"
#include "server/simulated/simulated_backend.h"

namespace relserve {

class ServerMetrics;

// The models a process serves, each ready for the serving layer: its loaded copies (one per
// device) or its simulated device, warmed up, its batcher and the ServedModel in registry().
// relserve's start (main/relserve_server.cc) and relserve-model's local serving
// (tools/local_serving.cc) both build their models here, so that a model is assembled one way.
//
// Start-up only: Create and Add run on one thread before any call is served; registry() is then
// read by any thread. The host owns what the registry points at, so it outlives the serving
// layer and the transports built over the registry.
class ModelHost {
 public:
  // Plans the workers each copy gets on the CPUs (ResolveWorkersPerCopy: INVALID_ARGUMENT for no
  // device) and sets the compute threads of this thread
  // (SetComputeThreads). `metrics` (may be null: no batch metrics, no model info) must outlive
  // the host.
  static absl::StatusOr<std::unique_ptr<ModelHost>> Create(HostOptions options, ServerMetrics* metrics);
  ~ModelHost();  // Stop(zero)
  ModelHost(const ModelHost&) = delete;
  ModelHost& operator=(const ModelHost&) = delete;

  // Loads `spec` (resolving a Hub id, or building a simulated device), a copy on each device,
  // warms it up, starts its batcher and adds it to registry() (the first model added is the
  // default one). Errors name the model ("model NAME: ..."), and the device of a copy; CANCELLED
  // when stop_requested says so.
  absl::Status Add(const ModelSpec& spec);
  // A model the caller has already loaded on the first device (relserve-model's flags load it):
  // copies for the other devices are not made, the rest as Add. `model_id` is what /info says
  // it is (ServedModel::model_id).
  absl::Status Add(const std::string& name, LoadedModel model, const std::string& model_id);

  const ModelRegistry& registry() const { return registry_; }
  ModelRegistry* mutable_registry() { return &registry_; }
  // What each copy runs with: workers and compute threads.
  const CpuWorkers& workers() const { return workers_; }
  const HostOptions& options() const { return options_; }
  // The backends of the model named `name`, one per copy (empty for a name not hosted).
  std::vector<const InferenceBackend*> backends(const std::string& name) const;

  // Stops every batcher: sequences still queued after `grace` fail (ModelBatcher::Stop). Safe to
  // call twice.
  void Stop(absl::Duration grace);

 private:
  struct Hosted {
    std::string name;
    LoadedModel loaded;                            // engines: the first device's and its copies
    std::unique_ptr<SimulatedBackend> simulated;   // or a simulated device
    std::unique_ptr<MetricsBatchObserver> observer;
    std::unique_ptr<ModelBatcher> batcher;
  };
  ModelHost(HostOptions options, ServerMetrics* metrics, CpuWorkers workers);
  bool StopRequested() const;
  absl::Status AddSimulated(const ModelSpec& spec);
  // Warm-up, batcher, metrics and registry for a loaded model whose copies are in `hosted.loaded`.
  absl::Status Serve(Hosted hosted, const std::string& model_id, const std::vector<std::string>& devices);

  HostOptions options_;
  ServerMetrics* metrics_;
  CpuWorkers workers_;
  std::vector<Hosted> models_;
  ModelRegistry registry_;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_HOSTING_MODEL_HOST_H_
