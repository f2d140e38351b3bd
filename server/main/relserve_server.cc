#include "server/main/relserve_server.h"

#include <algorithm>
#include <functional>
#include <mutex>
#include <thread>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "server/auth/api_keys.h"
#include "server/batching/model_batcher.h"
#include "server/main/connection_closer.h"
#include "server/main/listener_check.h"
#include "server/main/server_credentials.h"
#include "server/batching/length_buckets.h"
#include "server/batching/warm_up.h"
#include "server/http/http_server.h"
#include "server/hub/model_resolver.h"
#include "server/metrics/http_endpoint.h"
#include "server/metrics/server_metrics.h"
#include "server/model/engine.h"
#include "server/model/runtime/device_list.h"
#include "server/rpc/encoder_service.h"
#include "server/serving/metrics_batch_observer.h"
#include "server/serving/model_registry.h"
#include "server/simulated/simulated_backend.h"
#include "server/util/cpu_count.h"
#include "server/util/log.h"
#include "server/util/status_macros.h"
#include "server/web/web_server.h"

namespace relserve {

struct RelserveServer::State {
  ServerConfig config;
  ServerMetrics metrics;
  std::unique_ptr<ApiKeys> api_keys;  // null: no key needed
  std::vector<LoadedModel> models;  // each engine and the tokenizer loaded beside it
  std::vector<std::unique_ptr<SimulatedBackend>> simulated;  // --model NAME=simulated:...
  std::vector<std::unique_ptr<MetricsBatchObserver>> observers;
  std::vector<std::unique_ptr<ModelBatcher>> batchers;
  ModelRegistry registry;
  std::unique_ptr<EncoderServing> encoder_serving;
  std::unique_ptr<EncoderService> service;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<MetricsHttpEndpoint> endpoint;
  std::unique_ptr<HttpServer> http;
  // Set once each server runs: the metrics render reads them from the servers' threads.
  std::atomic<const HttpServer*> http_started{nullptr};
  std::atomic<const MetricsHttpEndpoint*> endpoint_started{nullptr};
  int grpc_port = 0;
  std::atomic<bool> serving{false};
  std::mutex shutdown_mu;
  bool shut_down = false;
  std::unique_ptr<GrpcListenerCheck> listener_check;  // last: its thread stops first

  // The metrics text, with the HTTP ports' connection counts brought up to date first.
  std::string RenderMetrics() {
    if (const HttpServer* h = http_started.load(); h != nullptr) metrics.SetHttpConnections("api", h->connection_stats());
    if (const MetricsHttpEndpoint* e = endpoint_started.load(); e != nullptr) {
      metrics.SetHttpConnections("metrics", e->stats());
    }
    return metrics.Render();
  }

  void SetHealth(bool serving_now) {
    serving = serving_now;
    if (server == nullptr) return;
    auto* health = server->GetHealthCheckService();
    health->SetServingStatus(serving_now);  // every service name, the overall "" included
    for (const ServedModel* m : registry.All()) {
      health->SetServingStatus(m->name, serving_now);
      metrics.SetServing(m->name, serving_now);
    }
  }
};

namespace {

int MaxSendMessageBytes(const ServerConfig& config) { return config.max_response_bytes; }

absl::Status StartUpInterrupted() { return absl::CancelledError("start-up interrupted by a shutdown signal"); }

// The directory the engine loads for --model's value: the value itself, or the snapshot of a
// Hub model in the Hugging Face cache, fetched where files are missing unless offline.
// Downloads stop when a shutdown signal arrives (CANCELLED, resumable).
absl::StatusOr<std::string> ModelDirectory(const std::string& name, const std::string& spec, const ServerConfig& config,
                                           const std::function<bool()>& stop_requested) {
  if (!NamesHubModel(spec)) return spec;
  // The HF_ variables are read only when a Hub model needs them.
  absl::StatusOr<HubSettings> settings = HubSettingsFromEnvironment();
  if (!settings.ok()) return settings.status();
  if (config.offline) {
    settings->offline = true;
    settings->offline_source = "--offline";
  }
  settings->cancelled = stop_requested;
  DownloadProgress progress = DownloadProgress::ForStandardError();
  ASSIGN_OR_RETURN(std::string dir, ResolveModelDir(spec, *settings, &progress));
  LogInfo(absl::StrCat("model ", name, ": ", spec, " is ", dir));
  return dir;
}

}  // namespace

RelserveServer::RelserveServer(std::unique_ptr<State> state) : state_(std::move(state)) {}

RelserveServer::~RelserveServer() { Shutdown(absl::ZeroDuration()); }

int RelserveServer::grpc_port() const { return state_->grpc_port; }
int RelserveServer::metrics_port() const { return state_->endpoint ? state_->endpoint->port() : -1; }
int RelserveServer::http_port() const { return state_->http ? state_->http->port() : -1; }

absl::StatusOr<std::unique_ptr<RelserveServer>> RelserveServer::Start(const ServerConfig& config,
                                                                       std::function<bool()> stop_requested) {
  if (!stop_requested) stop_requested = [] { return false; };
  // Certificates are checked before the (slow) model loading, so that a bad file fails fast.
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials, MakeServerCredentials(config));
  auto state = std::make_unique<State>();
  state->config = config;
  ASSIGN_OR_RETURN(state->api_keys, ApiKeys::FromFlags(config.api_key, config.api_key_file));
  const CpuCount cpu = DetectCpuCount();
  // One copy of each model per device, its workers on each; the CPUs are shared among them all.
  ASSIGN_OR_RETURN(const std::vector<std::string> devices, ExpandDeviceList(config.device));
  const int copies = static_cast<int>(devices.size());
  ASSIGN_OR_RETURN(const CpuWorkers plan,
                   ResolveWorkers(std::max(1, cpu.cpus / copies), devices.front(), config.workers_per_device,
                                  config.threads_per_worker, config.dtype));
  const int threads = plan.threads;
  LogInfo(absl::StrCat(cpu.Describe(), ": ", plan.workers, plan.workers == 1 ? " worker" : " workers", " x ",
                       threads, threads == 1 ? " thread" : " threads", " per model",
                       copies > 1 ? absl::StrCat(" on each of ", absl::StrJoin(devices, ", ")) : ""));
  if (threads * plan.workers * copies > cpu.cpus) {
    LogWarning(absl::StrCat(plan.workers * copies, " workers x ", threads, " threads oversubscribe ", cpu.cpus,
                            " CPUs"));
  }
  SetComputeThreads(threads);

  for (const auto& [name, spec] : config.models) {
    if (stop_requested()) return StartUpInterrupted();
    if (IsSimulatedModel(spec)) {
      // A simulated GPU (server/simulated/): no directory, two workers per device as on a GPU.
      absl::StatusOr<SimulatedDeviceSpec> sim = ParseSimulatedDeviceSpec(spec);
      if (!sim.ok()) return absl::Status(sim.status().code(), absl::StrCat("model ", name, ": ", sim.status().message()));
      ServerMetrics* metrics = &state->metrics;
      auto backend = std::make_unique<SimulatedBackend>(
          *sim, [metrics, name = name](double seconds) { metrics->AddSimulatedDeviceBusy(name, seconds); });
      const ModelInfo& info = backend->info();
      const int workers = config.workers_per_device > 0 ? config.workers_per_device : 2;
      const double saturated =
          sim->profile.SaturatedTokensPerSecond(config.max_batch_size, config.max_batch_tokens) / sim->scale;
      metrics->SetSimulatedDeviceSaturatedRate(name, saturated);
      LogInfo(absl::StrCat("model ", name, ": ", sim->Describe(), ", a simulated device: every simulated time is slept ",
                           sim->scale, " times longer (scale ", sim->scale, "); ", workers,
                           " workers; saturated at ", static_cast<int64_t>(saturated), " tokens/s of wall time"));
      if (config.warmup) RETURN_IF_ERROR(WarmUp(*backend, name, info.max_length, stop_requested));
      auto observer = std::make_unique<MetricsBatchObserver>(&state->metrics, name);
      BatcherConfig bc;
      bc.policy.max_batch_tokens = config.max_batch_tokens;
      bc.policy.max_batch_size = config.max_batch_size;
      bc.policy.max_queue_delay = absl::Microseconds(config.max_queue_delay_us);
      bc.policy.length_bucketing = config.batching == "bucketed";
      bc.policy.bucket_bounds =
          config.length_buckets.empty() ? DefaultLengthBuckets(info.max_length) : config.length_buckets;
      bc.num_workers = workers;
      bc.max_queue_sequences = static_cast<size_t>(config.max_queue_sequences);
      bc.warm_up_workers = config.warmup && config.warmup_workers;
      bc.model_name = name;
      bc.stop = stop_requested;
      ASSIGN_OR_RETURN(auto batcher, ModelBatcher::Create(backend.get(), bc, observer.get()));
      if (bc.warm_up_workers) {
        LogInfo(absl::StrCat("model ", name, ": ", workers, " workers warmed up on their own threads, ",
                             batcher->warm_up_shapes_per_worker(), " batch shapes each, in ",
                             absl::FormatDuration(absl::Trunc(batcher->warm_up_time(), absl::Milliseconds(1)))));
      }
      state->metrics.SetModelInfo(name, {{"architecture", info.architecture},
                                         {"model_type", info.model_type},
                                         {"dtype", DTypeName(info.dtype)},
                                         {"device", "simulated"},
                                         {"max_length", std::to_string(info.max_length)},
                                         {"pooling", info.pooling.Describe()}});
      ServedModel served;
      served.name = name;
      served.backend = backend.get();
      served.batcher = batcher.get();
      served.max_length = info.max_length;
      served.aliases = ModelNameAliases(name, spec);
      served.model_id = sim->Describe();
      served.devices = "simulated";
      state->registry.Add(served);
      state->simulated.push_back(std::move(backend));
      state->observers.push_back(std::move(observer));
      state->batchers.push_back(std::move(batcher));
      continue;
    }
    const absl::StatusOr<std::string> dir = ModelDirectory(name, spec, config, stop_requested);
    if (stop_requested()) return StartUpInterrupted();
    if (!dir.ok()) return absl::Status(dir.status().code(), absl::StrCat("model ", name, ": ", dir.status().message()));
    const absl::Time t0 = absl::Now();
    EngineOptions options;
    options.dtype = config.dtype;
    options.device = devices.front();
    options.max_length = config.max_input_length;
    options.cuda_graph_tokens = config.cuda_graph_tokens;
    options.gpu_attention = config.gpu_attention;
    options.int8_attention = config.int8_attention;
    options.log_shape_times = config.log_shape_times;
    options.batch_rounding = config.gpu_batch_sizes == "exact" ? BatchRounding::kExact : BatchRounding::kOnDevice;
    options.pooling = config.pooling;
    auto loaded = LoadModel(*dir, options);
    if (!loaded.ok()) {
      return absl::Status(loaded.status().code(), absl::StrCat("model ", name, ": ", loaded.status().message()));
    }
    Engine* engine = loaded->engine.get();
    const ModelInfo& info = engine->info();
    LogInfo(absl::StrCat("model ", name, ": loaded ", info.architecture, " from ", *dir, " (", info.num_layers,
                         " layers, hidden ", info.hidden_size, ", ", DTypeName(info.dtype), ", max length ", info.max_length,
                         info.max_length_source.empty() ? "" : " (" + info.max_length_source + ")",
                         info.has_tokenizer ? ", tokenizer from " + info.tokenizer_file : ", no tokenizer",
                         info.no_tokenizer_reason.empty() ? "" : ": " + info.no_tokenizer_reason,
                         info.sparse_kind.empty() ? "" : ", sparse vectors (" + info.sparse_kind + ")",
                         info.multi_vector_kind.empty()
                             ? ""
                             : absl::StrCat(", multi-vector (", info.multi_vector_kind, ", ", info.multi_vector_dim, ")"),
                         ") in ",
                         absl::FormatDuration(absl::Trunc(absl::Now() - t0, absl::Milliseconds(1)))));
    // The other devices' copies: the same directory and options, the tokenizer shared.
    std::vector<InferenceBackend*> backends = {engine};
    for (size_t d = 1; d < devices.size(); ++d) {
      EngineOptions copy_options = options;
      copy_options.device = devices[d];
      copy_options.tokenizer = loaded->tokenizer.get();
      copy_options.no_tokenizer_reason = info.no_tokenizer_reason;
      auto copy = Engine::Load(*dir, copy_options);
      if (!copy.ok()) {
        return absl::Status(copy.status().code(),
                            absl::StrCat("model ", name, " on ", devices[d], ": ", copy.status().message()));
      }
      backends.push_back(copy->get());
      loaded->copies.push_back(std::move(*copy));
    }
    if (copies > 1) LogInfo(absl::StrCat("model ", name, ": a copy on each of ", absl::StrJoin(devices, ", ")));
    if (config.warmup) {
      for (InferenceBackend* backend : backends) {
        RETURN_IF_ERROR(WarmUp(*backend, name, info.max_length, stop_requested));
      }
      int64_t graphs = engine->captured_graphs();
      for (const auto& copy : loaded->copies) graphs += copy->captured_graphs();
      if (graphs > 0) {
        LogInfo(absl::StrCat("model ", name, ": ", graphs, " CUDA graphs captured (batches of up to ",
                             config.cuda_graph_tokens, " tokens replay them)"));
      }
    }
    if (config.max_batch_tokens < info.max_length) {
      LogWarning(absl::StrCat("model ", name, ": --max-batch-tokens ", config.max_batch_tokens,
                              " is below its max length ", info.max_length, "; such sequences run alone"));
    }

    auto observer = std::make_unique<MetricsBatchObserver>(&state->metrics, name);
    BatcherConfig bc;
    bc.policy.max_batch_tokens = config.max_batch_tokens;
    bc.policy.max_batch_size = config.max_batch_size;
    bc.policy.max_queue_delay = absl::Microseconds(config.max_queue_delay_us);
    bc.policy.length_bucketing = config.batching == "bucketed";
    bc.policy.bucket_bounds =
        config.length_buckets.empty() ? DefaultLengthBuckets(info.max_length) : config.length_buckets;
    bc.num_workers = plan.workers;
    bc.max_queue_sequences = static_cast<size_t>(config.max_queue_sequences);
    bc.on_worker_start = [threads] { SetComputeThreads(threads); };
    bc.warm_up_workers = config.warmup && config.warmup_workers;
    bc.model_name = name;
    bc.stop = stop_requested;
    ASSIGN_OR_RETURN(auto batcher, ModelBatcher::Create(backends, bc, observer.get()));
    if (bc.warm_up_workers && backends.front()->WarmsUpPerThread()) {
      LogInfo(absl::StrCat("model ", name, ": ", plan.workers * copies, plan.workers * copies == 1 ? " worker" : " workers",
                           " warmed up on their own threads, ", batcher->warm_up_shapes_per_worker(),
                           " batch shapes each, in ",
                           absl::FormatDuration(absl::Trunc(batcher->warm_up_time(), absl::Milliseconds(1)))));
    }

    state->metrics.SetModelInfo(name, {{"architecture", info.architecture},
                                       {"model_type", info.model_type},
                                       {"dtype", DTypeName(info.dtype)},
                                       {"device", absl::StrJoin(devices, ",")},
                                       {"max_length", std::to_string(info.max_length)},
                                       {"pooling", info.pooling.Describe()}});
    ServedModel served;
    served.name = name;
    served.backend = engine;
    served.tokenizer = loaded->tokenizer.get();
    served.batcher = batcher.get();
    served.max_length = info.max_length;
    served.aliases = ModelNameAliases(name, spec);
    served.model_id = spec;
    served.devices = absl::StrJoin(devices, ",");
    state->registry.Add(served);
    state->models.push_back(std::move(*loaded));
    state->observers.push_back(std::move(observer));
    state->batchers.push_back(std::move(batcher));
  }

  ServingLimits limits;
  limits.max_inputs_per_request = config.max_inputs_per_request;
  limits.max_response_bytes = static_cast<size_t>(MaxSendMessageBytes(config));
  limits.auto_truncate = config.auto_truncate;
  limits.whole_input = config.whole_input;
  limits.window_overlap = config.window_overlap;
  limits.max_windows_per_request = config.max_windows_per_request;
  limits.rerank_chunking = config.rerank_chunking;
  limits.max_chunks_per_doc = config.max_chunks_per_doc;
  limits.rerank_chunk_overlap = config.rerank_chunk_overlap;
  state->encoder_serving = std::make_unique<EncoderServing>(&state->registry, &state->metrics, limits);
  state->service = std::make_unique<EncoderService>(state->encoder_serving.get(), &state->registry, &state->metrics,
                                                    state->api_keys.get());
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(config.grpc_address, credentials, &state->grpc_port);
  builder.RegisterService(state->service.get());
  builder.SetMaxReceiveMessageSize(config.max_message_bytes);
  builder.SetMaxSendMessageSize(MaxSendMessageBytes(config));
  if (config.max_connection_age_seconds > 0) {
    // gRPC spreads the age by +-10% itself, so that clients do not all reconnect at once. Calls
    // under way on a closing connection get as long as a shutdown drain to finish.
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS,
                               static_cast<int>(std::max(1.0, config.max_connection_age_seconds * 1000)));
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS,
                               static_cast<int>(std::clamp(config.shutdown_grace_seconds * 1000, 1.0, 2e9)));
  }
  if (stop_requested()) return StartUpInterrupted();
  state->server = builder.BuildAndStart();
  if (state->server == nullptr || state->grpc_port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", config.grpc_address));
  }
  State* raw = state.get();
  ASSIGN_OR_RETURN(state->listener_check,
                   GrpcListenerCheck::Start(config.grpc_address, state->grpc_port, {}, &state->metrics,
                                            [raw] { return raw->serving.load(); }));
  if (config.metrics_port >= 0) {
    HttpEndpointConfig ec;
    ec.address = config.metrics_address;
    ec.port = config.metrics_port;
    if (config.metrics_api_key_required && state->api_keys != nullptr) {
      ec.authorize_metrics = [raw](std::optional<std::string_view> authorization) {
        absl::Status s = raw->api_keys->Check(authorization);
        if (!s.ok()) raw->metrics.RecordUnauthenticated("metrics");
        return s;
      };
    }
    ASSIGN_OR_RETURN(state->endpoint, MetricsHttpEndpoint::Start(
                                          ec, [raw] { return raw->RenderMetrics(); },
                                          [raw] {
                                            return raw->serving.load() ? raw->listener_check->status()
                                                                       : absl::UnavailableError("not ready");
                                          }));
    state->endpoint_started = state->endpoint.get();
  }
  if (!config.http_address.empty()) {
    HttpServerConfig hc;
    RETURN_IF_ERROR(ParseHttpAddress(config.http_address, &hc));
    hc.threads = config.http_threads;
    hc.max_connections = config.http_max_connections;
    hc.max_connections_per_client = config.http_max_connections_per_client;
    hc.header_timeout = config.http_header_timeout;
    hc.max_body_bytes = static_cast<size_t>(config.max_message_bytes);
    hc.max_response_bytes = static_cast<size_t>(config.max_response_bytes);
    hc.api_keys = state->api_keys.get();
    hc.request_timeout = config.http_request_timeout;
    RouteContext routes;
    routes.serving = state->encoder_serving.get();
    routes.healthy = [raw] { return raw->serving.load(); };
    routes.limits.max_batch_tokens = config.max_batch_tokens;
    routes.limits.max_batch_requests = config.max_batch_size;
    routes.limits.max_client_batch_size = config.max_inputs_per_request;
    routes.limits.max_concurrent_requests = config.http_threads;
    routes.limits.auto_truncate = config.auto_truncate;
    routes.limits.version = RELSERVE_VERSION;
    routes.started_unix_seconds = absl::ToUnixSeconds(absl::Now());
    // GET /metrics on the API port too (TEI serves it there): the metrics port's text.
    routes.metrics_text = [raw] { return raw->RenderMetrics(); };
    routes.metrics_need_key = config.metrics_api_key_required;
    ASSIGN_OR_RETURN(state->http, HttpServer::Start(hc, std::move(routes), &state->registry, &state->metrics));
    state->http_started = state->http.get();
  }
  state->SetHealth(true);
  if (!config.tls_cert.empty()) {
    LogInfo(config.tls_client_ca.empty() ? "gRPC over TLS" : "gRPC over mutual TLS (client certificates required)");
  }
  if (state->api_keys != nullptr) {  // where the keys came from, never the keys
    const size_t n = state->api_keys->size();
    LogInfo(absl::StrCat("API key", n == 1 ? "" : "s", " required (", n, n == 1 ? " key" : " keys",
                         config.api_key_file.empty() ? "" : " from " + config.api_key_file,
                         "): gRPC Encoder calls and HTTP routes; open: health checks",
                         config.metrics_api_key_required ? "" : ", /metrics"));
  }
  LogInfo(absl::StrCat("serving ", config.models.size(), " model(s) on port ", state->grpc_port,
                       state->endpoint ? absl::StrCat(", metrics on port ", state->endpoint->port()) : "",
                       state->http ? absl::StrCat(", HTTP on port ", state->http->port()) : ""));
  return std::unique_ptr<RelserveServer>(new RelserveServer(std::move(state)));
}

void RelserveServer::Shutdown(absl::Duration grace, std::function<bool()> end_grace) {
  std::lock_guard<std::mutex> lock(state_->shutdown_mu);
  if (state_->shut_down) return;
  state_->shut_down = true;
  LogInfo(absl::StrCat("shutting down: NOT_SERVING, draining for up to ", absl::FormatDuration(grace)));
  state_->SetHealth(false);
  const absl::Time deadline = absl::Now() + grace;
  // New calls are refused (UNAVAILABLE) while the ones running finish, up to the deadline.
  // Waiting on our own count of calls, not on gRPC's shutdown, keeps idle client connections
  // (which clients hold open) from stretching every drain to the full grace period.
  state_->service->StartDraining();
  if (state_->http) state_->http->StartDraining();
  const auto in_flight = [this] {
    return state_->service->in_flight() + (state_->http ? state_->http->in_flight() : 0);
  };
  for (;;) {
    const absl::Time now = absl::Now();
    const bool ended = now >= deadline || (end_grace && end_grace());
    const absl::Time step = std::min(deadline, now + absl::Milliseconds(50));
    if (ended || (state_->service->WaitForIdle(step) && (!state_->http || state_->http->WaitForIdle(step)))) {
      if (in_flight() > 0) {
        LogWarning(absl::StrCat(in_flight(), " call(s) still running at the end of the grace period",
                                "; answering them UNAVAILABLE"));
      }
      break;
    }
  }
  for (auto& b : state_->batchers) b->Stop(absl::ZeroDuration());  // fails what is left
  // Every call has its answer: close the doors before gRPC's own shutdown, which would
  // cancel (CANCELLED) calls still arriving on open connections (connection_closer.h).
  const int ended = EndConnectionsOnPort(state_->grpc_port, absl::Milliseconds(500));
  if (ended > 0) LogInfo(absl::StrCat("closed ", ended, " client connection(s)"));
  state_->server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
  state_->server->Wait();
  if (state_->http) state_->http->Stop();
  if (state_->endpoint) state_->endpoint->Stop();
  LogInfo("stopped");
}

}  // namespace relserve
