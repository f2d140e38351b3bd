#include "server/main/relserve_server.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/auth/api_keys.h"
#include "server/hosting/model_host.h"
#include "server/http_api/http_server.h"
#include "server/main/server_options.h"
#include "server/metrics/http_endpoint.h"
#include "server/metrics/server_metrics.h"
#include "server/rpc/grpc_server.h"
#include "server/serving/encoder_serving.h"
#include "server/util/log.h"
#include "server/util/status_macros.h"

namespace relserve {

struct RelserveServer::State {
  ServerConfig config;
  ServerMetrics metrics;
  std::unique_ptr<ApiKeys> api_keys;  // null: no key needed
  std::unique_ptr<ModelHost> host;    // the models, their batchers and the registry
  std::unique_ptr<EncoderServing> encoder_serving;
  std::atomic<bool> serving{false};
  std::unique_ptr<GrpcServer> grpc;  // its listener check reads `serving`
  std::unique_ptr<MetricsHttpEndpoint> endpoint;
  std::unique_ptr<HttpServer> http;
  // Set once each server runs: the metrics render reads them from the servers' threads.
  std::atomic<const HttpServer*> http_started{nullptr};
  std::atomic<const MetricsHttpEndpoint*> endpoint_started{nullptr};
  std::mutex shutdown_mu;
  bool shut_down = false;

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
    if (grpc == nullptr) return;
    std::vector<std::string> names;
    for (const ServedModel* m : host->registry().All()) {
      names.push_back(m->name);
      metrics.SetServing(m->name, serving_now);
    }
    grpc->SetHealth(serving_now, names);
  }

  absl::Status StartMetricsEndpoint();
  absl::Status StartHttp();
  void LogStarted() const;
};

namespace {

absl::Status StartUpInterrupted() { return absl::CancelledError("start-up interrupted by a shutdown signal"); }

}  // namespace

absl::Status RelserveServer::State::StartMetricsEndpoint() {
  HttpEndpointConfig ec;
  ec.address = config.metrics_address;
  ec.port = config.metrics_port;
  if (config.metrics_api_key_required && api_keys != nullptr) {
    ec.authorize_metrics = [this](std::optional<std::string_view> authorization) {
      absl::Status s = api_keys->Check(authorization);
      if (!s.ok()) metrics.RecordUnauthenticated("metrics");
      return s;
    };
  }
  ASSIGN_OR_RETURN(endpoint, MetricsHttpEndpoint::Start(
                                 ec, [this] { return RenderMetrics(); },
                                 [this] { return serving.load() ? grpc->listener_status() : absl::UnavailableError("not ready"); }));
  endpoint_started = endpoint.get();
  return absl::OkStatus();
}

absl::Status RelserveServer::State::StartHttp() {
  ASSIGN_OR_RETURN(HttpServerConfig hc, HttpOptionsFromFlags(config));
  hc.api_keys = api_keys.get();
  RouteContext routes;
  routes.serving = encoder_serving.get();
  routes.healthy = [this] { return serving.load(); };
  routes.limits = HttpLimitsFromFlags(config);
  routes.started_unix_seconds = absl::ToUnixSeconds(absl::Now());
  // GET /metrics on the API port too (TEI serves it there): the metrics port's text.
  routes.metrics_text = [this] { return RenderMetrics(); };
  routes.metrics_need_key = config.metrics_api_key_required;
  ASSIGN_OR_RETURN(http, HttpServer::Start(hc, std::move(routes), &host->registry(), &metrics));
  http_started = http.get();
  return absl::OkStatus();
}

void RelserveServer::State::LogStarted() const {
  if (!config.tls_cert.empty()) {
    LogInfo(config.tls_client_ca.empty() ? "gRPC over TLS" : "gRPC over mutual TLS (client certificates required)");
  }
  if (api_keys != nullptr) {  // where the keys came from, never the keys
    const size_t n = api_keys->size();
    LogInfo(absl::StrCat("API key", n == 1 ? "" : "s", " required (", n, n == 1 ? " key" : " keys",
                         config.api_key_file.empty() ? "" : " from " + config.api_key_file,
                         "): gRPC Encoder calls and HTTP routes; open: health checks",
                         config.metrics_api_key_required ? "" : ", /metrics"));
  }
  LogInfo(absl::StrCat("serving ", config.models.size(), " model(s) on port ", grpc->port(),
                       endpoint ? absl::StrCat(", metrics on port ", endpoint->port()) : "",
                       http ? absl::StrCat(", HTTP on port ", http->port()) : ""));
}

RelserveServer::RelserveServer(std::unique_ptr<State> state) : state_(std::move(state)) {}

RelserveServer::~RelserveServer() { Shutdown(absl::ZeroDuration()); }

int RelserveServer::grpc_port() const { return state_->grpc->port(); }
int RelserveServer::metrics_port() const { return state_->endpoint ? state_->endpoint->port() : -1; }
int RelserveServer::http_port() const { return state_->http ? state_->http->port() : -1; }

absl::StatusOr<std::unique_ptr<RelserveServer>> RelserveServer::Start(const ServerConfig& config,
                                                                       std::function<bool()> stop_requested,
                                                                       GetEnv environment) {
  if (!stop_requested) stop_requested = [] { return false; };
  auto state = std::make_unique<State>();
  state->config = config;
  // Certificates and keys are checked before the (slow) model loading, so that a bad file fails fast.
  ASSIGN_OR_RETURN(state->grpc, GrpcServer::Prepare(GrpcOptionsFromFlags(config)));
  ASSIGN_OR_RETURN(state->api_keys, ApiKeys::FromFlags(config.api_key, config.api_key_file));

  // The models: a copy of each per device, warmed up, behind its batcher.
  ASSIGN_OR_RETURN(HostOptions host_options, HostOptionsFromFlags(config));
  host_options.stop_requested = stop_requested;
  host_options.environment = std::move(environment);
  ASSIGN_OR_RETURN(state->host, ModelHost::Create(std::move(host_options), &state->metrics));
  for (const auto& [name, source] : config.models) RETURN_IF_ERROR(state->host->Add({name, source}));

  // The transports over one serving layer: gRPC, then the metrics port and the HTTP API.
  state->encoder_serving =
      std::make_unique<EncoderServing>(&state->host->registry(), &state->metrics, ServingLimitsFromFlags(config));
  if (stop_requested()) return StartUpInterrupted();
  State* raw = state.get();
  RETURN_IF_ERROR(state->grpc->Start(state->encoder_serving.get(), &state->host->registry(), &state->metrics,
                                     state->api_keys.get(), [raw] { return raw->serving.load(); }));
  if (config.metrics_port >= 0) RETURN_IF_ERROR(state->StartMetricsEndpoint());
  if (!config.http_address.empty()) RETURN_IF_ERROR(state->StartHttp());
  state->SetHealth(true);
  state->LogStarted();
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
  GrpcServer& grpc = *state_->grpc;
  grpc.StartDraining();
  if (state_->http) state_->http->StartDraining();
  const auto in_flight = [&] { return grpc.in_flight() + (state_->http ? state_->http->in_flight() : 0); };
  for (;;) {
    const absl::Time now = absl::Now();
    const bool ended = now >= deadline || (end_grace && end_grace());
    const absl::Time step = std::min(deadline, now + absl::Milliseconds(50));
    if (ended || (grpc.WaitForIdle(step) && (!state_->http || state_->http->WaitForIdle(step)))) {
      if (in_flight() > 0) {
        LogWarning(absl::StrCat(in_flight(), " call(s) still running at the end of the grace period",
                                "; answering them UNAVAILABLE"));
      }
      break;
    }
  }
  state_->host->Stop(absl::ZeroDuration());  // fails what is left
  grpc.Shutdown();  // the doors closed first (connection_closer.h), then gRPC's own shutdown
  if (state_->http) state_->http->Stop();
  if (state_->endpoint) state_->endpoint->Stop();
  LogInfo("stopped");
}

}  // namespace relserve
