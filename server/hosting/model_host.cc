#include "server/hosting/model_host.h"

#include <cstdint>
#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "server/batching/warm_up.h"
#include "server/hub/model_resolver.h"
#include "server/metrics/server_metrics.h"
#include "server/model/kernels/amx_gemm.h"
#include "server/util/cpu_count.h"
#include "server/util/log.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

absl::Status StartUpInterrupted() { return absl::CancelledError("start-up interrupted by a shutdown signal"); }

// `status` with "model NAME: " (and " on DEVICE") before its message.
absl::Status NamingModel(const absl::Status& status, const std::string& name, const std::string& device = "") {
  return absl::Status(status.code(),
                      absl::StrCat("model ", name, device.empty() ? "" : " on " + device, ": ", status.message()));
}

// Whether the dtype's projections run in relserve's own kernels on the CPU (then its batches run side
// by side; worker_count.h): bfloat16's GEMM (AMX tiles or AVX512-BF16), which every projection of the model's layers and
// heads is packed for (packed_linear.h, EncoderModel::HeadLinears), or int8's GEMM in AMX tiles,
// AVX-512 VNNI or AVX2 registers (int8_linear.h, ChooseInt8Gemm).
bool OwnProjections(const EngineOptions& engine) {
  switch (engine.dtype) {
    case DType::kBFloat16:
      return engine.kernels.packed_bfloat16_gemm && PackedBFloat16Weights::Supported();
    case DType::kInt8:
      return engine.kernels.packed_int8_gemm && PackedInt8Weights::AnySupported();
    default:
      return false;
  }
}

std::string Elapsed(absl::Duration d) { return absl::FormatDuration(absl::Trunc(d, absl::Milliseconds(1))); }

// The directory the engine loads for a model's source: the source itself, or the snapshot of a
// Hub model in the Hugging Face cache, fetched where files are missing unless offline.
// Downloads stop when a shutdown signal arrives (CANCELLED, resumable).
absl::StatusOr<std::string> ModelDirectory(const ModelSpec& spec, const HostOptions& options,
                                           const std::function<bool()>& stop_requested) {
  if (!NamesHubModel(spec.source)) return spec.source;
  // The HF_ variables are read only when a Hub model needs them.
  absl::StatusOr<HubSettings> settings = HubSettingsFromEnvironment(options.environment);
  if (!settings.ok()) return settings.status();
  if (options.offline) {
    settings->offline = true;
    settings->offline_source = "--offline";
  }
  settings->cancelled = stop_requested;
  DownloadProgress progress = DownloadProgress::ForStandardError();
  ASSIGN_OR_RETURN(std::string dir, ResolveModelDir(spec.source, *settings, &progress));
  if (options.log) LogInfo(absl::StrCat("model ", spec.name, ": ", spec.source, " is ", dir));
  return dir;
}

std::string DescribeLoaded(const std::string& name, const std::string& dir, const ModelInfo& info, absl::Duration took) {
  return absl::StrCat(
      "model ", name, ": loaded ", info.architecture, " from ", dir, " (", info.num_layers, " layers, hidden ",
      info.hidden_size, ", ", DTypeName(info.dtype), ", max length ", info.max_length,
      info.max_length_source.empty() ? "" : " (" + info.max_length_source + ")",
      info.has_tokenizer ? ", tokenizer from " + info.tokenizer_file : ", no tokenizer",
      info.no_tokenizer_reason.empty() ? "" : ": " + info.no_tokenizer_reason,
      info.projections == "libtorch" ? "" : ", projections " + info.projections,
      info.int8_weight_bits == 0 ? "" : absl::StrCat(", ", info.int8_weight_bits, "-bit weights"),
      info.packed_float32_max_tokens == 0 || info.dtype != DType::kFloat32 ? ""
      : info.packed_float32_max_tokens == ModelInfo::kEveryBatch
          ? std::string(" for every batch")
          : absl::StrCat(" for batches of at most ", info.packed_float32_max_tokens, " tokens"),
      info.sparse_kind.empty() ? "" : ", sparse vectors (" + info.sparse_kind + ")",
      info.multi_vector_kind.empty() ? ""
                                     : absl::StrCat(", multi-vector (", info.multi_vector_kind, ", ",
                                                    info.multi_vector_dim, ")"),
      ") in ", Elapsed(took));
}

}  // namespace

absl::StatusOr<std::unique_ptr<ModelHost>> ModelHost::Create(HostOptions options, ServerMetrics* metrics) {
  if (!options.stop_requested) options.stop_requested = [] { return false; };
  const CpuCount cpu = DetectCpuCount();
  const int cpus = options.cpus > 0 ? options.cpus : cpu.cpus;
  // One copy of each model per device, its workers on each; the CPUs are shared among them all.
  ASSIGN_OR_RETURN(const CpuWorkers plan,
                   ResolveWorkersPerCopy(cpus, options.devices, options.workers_per_device,
                                         options.threads_per_worker, options.engine.dtype,
                                         OwnProjections(options.engine)));
  const int copies = static_cast<int>(options.devices.size());
  if (options.log) {
    LogInfo(absl::StrCat(options.cpus > 0 ? absl::StrCat(cpus, " CPUs") : cpu.Describe(), ": ", plan.workers,
                         plan.workers == 1 ? " worker" : " workers", " x ", plan.threads,
                         plan.threads == 1 ? " thread" : " threads", " per model",
                         copies > 1 ? absl::StrCat(" on each of ", absl::StrJoin(options.devices, ", ")) : ""));
    if (plan.threads * plan.workers * copies > cpus) {
      LogWarning(absl::StrCat(plan.workers * copies, " workers x ", plan.threads, " threads oversubscribe ", cpus,
                              " CPUs"));
    }
  }
  SetComputeThreads(plan.threads);
  return std::unique_ptr<ModelHost>(new ModelHost(std::move(options), metrics, plan));
}

ModelHost::ModelHost(HostOptions options, ServerMetrics* metrics, CpuWorkers workers)
    : options_(std::move(options)), metrics_(metrics), workers_(workers) {}

ModelHost::~ModelHost() { Stop(absl::ZeroDuration()); }

bool ModelHost::StopRequested() const { return options_.stop_requested(); }

void ModelHost::Stop(absl::Duration grace) {
  for (Hosted& m : models_) {
    if (m.batcher != nullptr) m.batcher->Stop(grace);
  }
}

std::vector<const InferenceBackend*> ModelHost::backends(const std::string& name) const {
  std::vector<const InferenceBackend*> out;
  for (const Hosted& m : models_) {
    if (m.name != name) continue;
    if (m.simulated != nullptr) out.push_back(m.simulated.get());
    if (m.loaded.engine != nullptr) out.push_back(m.loaded.engine.get());
    for (const auto& copy : m.loaded.copies) out.push_back(copy.get());
  }
  return out;
}

absl::Status ModelHost::Add(const ModelSpec& spec) {
  if (StopRequested()) return StartUpInterrupted();
  if (IsSimulatedModel(spec.source)) return AddSimulated(spec);
  const absl::StatusOr<std::string> dir = ModelDirectory(spec, options_, options_.stop_requested);
  if (StopRequested()) return StartUpInterrupted();
  if (!dir.ok()) return NamingModel(dir.status(), spec.name);
  const absl::Time t0 = absl::Now();
  EngineOptions engine_options = options_.engine;
  engine_options.device = options_.devices.front();
  absl::StatusOr<LoadedModel> loaded = LoadModel(*dir, engine_options);
  if (!loaded.ok()) return NamingModel(loaded.status(), spec.name);
  const ModelInfo& info = loaded->engine->info();
  if (options_.log) LogInfo(DescribeLoaded(spec.name, *dir, info, absl::Now() - t0));
  // The other devices' copies: the same directory and options, the tokenizer shared.
  for (size_t d = 1; d < options_.devices.size(); ++d) {
    if (StopRequested()) return StartUpInterrupted();
    EngineOptions copy_options = engine_options;
    copy_options.device = options_.devices[d];
    copy_options.tokenizer = loaded->tokenizer.get();
    copy_options.no_tokenizer_reason = info.no_tokenizer_reason;
    absl::StatusOr<std::unique_ptr<Engine>> copy = Engine::Load(*dir, copy_options);
    if (!copy.ok()) return NamingModel(copy.status(), spec.name, options_.devices[d]);
    loaded->copies.push_back(std::move(*copy));
  }
  if (options_.devices.size() > 1 && options_.log) {
    LogInfo(absl::StrCat("model ", spec.name, ": a copy on each of ", absl::StrJoin(options_.devices, ", ")));
  }
  Hosted hosted;
  hosted.name = spec.name;
  hosted.loaded = std::move(*loaded);
  return Serve(std::move(hosted), spec.source, options_.devices);
}

absl::Status ModelHost::Add(const std::string& name, LoadedModel model, const std::string& model_id) {
  if (model.engine == nullptr) return absl::InvalidArgumentError(absl::StrCat("model ", name, ": no engine"));
  Hosted hosted;
  hosted.name = name;
  hosted.loaded = std::move(model);
  std::vector<std::string> devices = {options_.devices.front()};
  for (size_t d = 1; d < options_.devices.size() && d <= hosted.loaded.copies.size(); ++d) {
    devices.push_back(options_.devices[d]);
  }
  return Serve(std::move(hosted), model_id, devices);
}

absl::Status ModelHost::Serve(Hosted hosted, const std::string& model_id, const std::vector<std::string>& devices) {
  const std::string& name = hosted.name;
  Engine* engine = hosted.loaded.engine.get();
  const ModelInfo& info = engine->info();
  std::vector<InferenceBackend*> backends = {engine};
  for (const auto& copy : hosted.loaded.copies) backends.push_back(copy.get());
  const int copies = static_cast<int>(backends.size());
  if (options_.warmup) {
    for (InferenceBackend* backend : backends) {
      RETURN_IF_ERROR(WarmUp(*backend, name, info.max_length, options_.stop_requested));
    }
    int64_t graphs = engine->captured_graphs();
    for (const auto& copy : hosted.loaded.copies) graphs += copy->captured_graphs();
    if (graphs > 0 && options_.log) {
      LogInfo(absl::StrCat("model ", name, ": ", graphs, " CUDA graphs captured (batches of up to ",
                           options_.engine.cuda_graph_tokens, " tokens replay them)"));
    }
  }
  if (options_.policy.max_batch_tokens < info.max_length && options_.log) {
    LogWarning(absl::StrCat("model ", name, ": --max-batch-tokens ", options_.policy.max_batch_tokens,
                            " is below its max length ", info.max_length, "; such sequences run alone"));
  }
  if (metrics_ != nullptr) hosted.observer = std::make_unique<MetricsBatchObserver>(metrics_, name);
  BatcherConfig config = HostBatcherConfig(options_, name, info.max_length, workers_.workers);
  const int threads = workers_.threads;
  config.on_worker_start = [threads] { SetComputeThreads(threads); };
  ASSIGN_OR_RETURN(hosted.batcher, ModelBatcher::Create(backends, config, hosted.observer.get()));
  if (config.warm_up_workers && engine->WarmsUpPerThread() && options_.log) {
    const int workers = workers_.workers * copies;
    LogInfo(absl::StrCat("model ", name, ": ", workers, workers == 1 ? " worker" : " workers",
                         " warmed up on their own threads, ", hosted.batcher->warm_up_shapes_per_worker(),
                         " batch shapes each, in ", Elapsed(hosted.batcher->warm_up_time())));
  }
  const std::string device_list = absl::StrJoin(devices, ",");
  if (metrics_ != nullptr) {
    metrics_->SetModelInfo(name, {{"architecture", info.architecture},
                                  {"model_type", info.model_type},
                                  {"dtype", DTypeName(info.dtype)},
                                  {"device", device_list},
                                  {"max_length", std::to_string(info.max_length)},
                                  {"pooling", info.pooling.Describe()}});
  }
  ServedModel served;
  served.name = name;
  served.backend = engine;
  served.tokenizer = hosted.loaded.tokenizer.get();
  served.batcher = hosted.batcher.get();
  served.max_length = info.max_length;
  served.aliases = ModelNameAliases(name, model_id);
  served.model_id = model_id;
  served.devices = device_list;
  registry_.Add(served);
  models_.push_back(std::move(hosted));
  return absl::OkStatus();
}

absl::Status ModelHost::AddSimulated(const ModelSpec& spec) {
  // A simulated GPU (server/simulated/): no directory, two workers per device as on a GPU.
  const std::string& name = spec.name;
  absl::StatusOr<SimulatedDeviceSpec> sim = ParseSimulatedDeviceSpec(spec.source);
  if (!sim.ok()) return NamingModel(sim.status(), name);
  ServerMetrics* metrics = metrics_;
  Hosted hosted;
  hosted.name = name;
  hosted.simulated = std::make_unique<SimulatedBackend>(*sim, [metrics, name](double seconds) {
    if (metrics != nullptr) metrics->AddSimulatedDeviceBusy(name, seconds);
  });
  SimulatedBackend* backend = hosted.simulated.get();
  const ModelInfo& info = backend->info();
  const int workers = options_.workers_per_device > 0 ? options_.workers_per_device : kAutoGpuWorkers;
  const double saturated =
      sim->profile.SaturatedTokensPerSecond(options_.policy.max_batch_size, options_.policy.max_batch_tokens) /
      sim->scale;
  if (metrics_ != nullptr) metrics_->SetSimulatedDeviceSaturatedRate(name, saturated);
  if (options_.log) {
    LogInfo(absl::StrCat("model ", name, ": ", sim->Describe(), ", a simulated device: every simulated time is slept ",
                         sim->scale, " times longer (scale ", sim->scale, "); ", workers,
                         " workers; saturated at ", static_cast<int64_t>(saturated), " tokens/s of wall time"));
  }
  if (options_.warmup) RETURN_IF_ERROR(WarmUp(*backend, name, info.max_length, options_.stop_requested));
  if (metrics_ != nullptr) hosted.observer = std::make_unique<MetricsBatchObserver>(metrics_, name);
  const BatcherConfig config = HostBatcherConfig(options_, name, info.max_length, workers);
  ASSIGN_OR_RETURN(hosted.batcher, ModelBatcher::Create(backend, config, hosted.observer.get()));
  if (config.warm_up_workers && options_.log) {
    LogInfo(absl::StrCat("model ", name, ": ", workers, " workers warmed up on their own threads, ",
                         hosted.batcher->warm_up_shapes_per_worker(), " batch shapes each, in ",
                         Elapsed(hosted.batcher->warm_up_time())));
  }
  if (metrics_ != nullptr) {
    metrics_->SetModelInfo(name, {{"architecture", info.architecture},
                                  {"model_type", info.model_type},
                                  {"dtype", DTypeName(info.dtype)},
                                  {"device", "simulated"},
                                  {"max_length", std::to_string(info.max_length)},
                                  {"pooling", info.pooling.Describe()}});
  }
  ServedModel served;
  served.name = name;
  served.backend = backend;
  served.batcher = hosted.batcher.get();
  served.max_length = info.max_length;
  served.aliases = ModelNameAliases(name, spec.source);
  served.model_id = sim->Describe();
  served.devices = "simulated";
  registry_.Add(served);
  models_.push_back(std::move(hosted));
  return absl::OkStatus();
}

}  // namespace relserve
