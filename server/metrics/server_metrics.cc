#include "server/metrics/server_metrics.h"

#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/labels.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"
#include "server/metrics/process_metrics.h"

namespace relserve {
namespace {

using prometheus::Counter;
using prometheus::Family;
using prometheus::Gauge;
using prometheus::Histogram;
using prometheus::Labels;

const Histogram::BucketBoundaries& LatencyBuckets() {
  static const Histogram::BucketBoundaries b = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                0.25,  0.5,    1,     2.5,  5,     10,   30};
  return b;
}

const Histogram::BucketBoundaries& TokenizeBuckets() {
  static const Histogram::BucketBoundaries b = {0.00005, 0.0001, 0.00025, 0.0005, 0.001,
                                                0.0025,  0.005,  0.01,    0.025,  0.05,
                                                0.1,     0.25,   0.5,     1};
  return b;
}

const Histogram::BucketBoundaries& QueueBuckets() {
  static const Histogram::BucketBoundaries b = [] {
    Histogram::BucketBoundaries q = {0.0001, 0.00025, 0.0005};
    q.insert(q.end(), LatencyBuckets().begin(), LatencyBuckets().end());
    return q;
  }();
  return b;
}

Histogram::BucketBoundaries MakePowersOfTwo(double from, double to) {
  Histogram::BucketBoundaries b;
  for (double v = from; v <= to; v *= 2) b.push_back(v);
  return b;
}

const Histogram::BucketBoundaries& BatchSizeBuckets() {
  static const Histogram::BucketBoundaries b = MakePowersOfTwo(1, 256);
  return b;
}

const Histogram::BucketBoundaries& BatchTokenBuckets() {
  static const Histogram::BucketBoundaries b = MakePowersOfTwo(64, 65536);
  return b;
}

const Histogram::BucketBoundaries& PaddingRatioBuckets() {
  static const Histogram::BucketBoundaries b = {1.0, 1.05, 1.1, 1.2, 1.3, 1.5, 2, 3, 5};
  return b;
}

// Family::Add looks the labels up under the family's mutex after building the metric object
// (for a histogram: its bucket vector), so the series are cached here by their label values.
template <typename T>
class SeriesCache {
 public:
  explicit SeriesCache(Family<T>& family) : family_(family) {}

  // key identifies the label values; make_labels builds them when the series is new.
  template <typename MakeLabels, typename... Args>
  T& Get(const std::string& key, MakeLabels&& make_labels, const Args&... args) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = series_.find(key);
    if (it != series_.end()) return *it->second;
    T& series = family_.Add(make_labels(), args...);
    series_.emplace(key, &series);
    return series;
  }

 private:
  Family<T>& family_;
  std::mutex mu_;
  std::unordered_map<std::string, T*> series_;
};

// Joins label values into a cache key; '\x1f' (unit separator) does not occur in names.
std::string Key(const std::string& a, const std::string& b) {
  std::string key;
  key.reserve(a.size() + b.size() + 1);
  key += a;
  key += '\x1f';
  key += b;
  return key;
}

std::string Key(const std::string& a, const std::string& b, const std::string& c) {
  return Key(Key(a, b), c);
}

std::string SanitizeLabelName(const std::string& name) {
  std::string out;
  out.reserve(name.size() + 1);
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    (c >= '0' && c <= '9') || c == '_';
    out += ok ? c : '_';
  }
  if (!out.empty() && out[0] >= '0' && out[0] <= '9') out.insert(out.begin(), '_');
  // Names starting with "__" are reserved for Prometheus' internal use.
  while (out.size() >= 2 && out[0] == '_' && out[1] == '_') out.erase(0, 1);
  return out;
}

}  // namespace

struct ServerMetrics::Impl {
  Impl()
      : registry(std::make_shared<prometheus::Registry>()),
        requests_family(prometheus::BuildCounter()
                            .Name("relserve_requests_total")
                            .Help("Finished RPCs by model, RPC and gRPC status code.")
                            .Register(*registry)),
        request_duration_family(
            prometheus::BuildHistogram()
                .Name("relserve_request_duration_seconds")
                .Help("RPC latency from arrival to reply, in seconds.")
                .Register(*registry)),
        tokenize_duration_family(prometheus::BuildHistogram()
                                     .Name("relserve_tokenize_duration_seconds")
                                     .Help("Time to tokenize one request, in seconds.")
                                     .Register(*registry)),
        queue_duration_family(
            prometheus::BuildHistogram()
                .Name("relserve_queue_duration_seconds")
                .Help("Per sequence: time from enqueue to the start of its batch, in seconds.")
                .Register(*registry)),
        batch_max_queue_duration_family(
            prometheus::BuildHistogram()
                .Name("relserve_batch_max_queue_duration_seconds")
                .Help("Per batch: queue time of its longest-waiting sequence, in seconds.")
                .Register(*registry)),
        inference_duration_family(
            prometheus::BuildHistogram()
                .Name("relserve_inference_duration_seconds")
                .Help("Per successful batch: forward pass time, in seconds.")
                .Register(*registry)),
        batch_stage_duration_family(
            prometheus::BuildHistogram()
                .Name("relserve_batch_stage_duration_seconds")
                .Help("Per successful batch: the backend call's time by stage (prepare: padding and input "
                      "copies; forward: queuing the encoder's forward, which on a GPU is its kernel launches; "
                      "results: heads, waiting for the device, copying outputs out), in seconds.")
                .Register(*registry)),
        batch_size_family(prometheus::BuildHistogram()
                              .Name("relserve_batch_size")
                              .Help("Sequences per successful batch.")
                              .Register(*registry)),
        batch_tokens_family(
            prometheus::BuildHistogram()
                .Name("relserve_batch_tokens")
                .Help("Tokens per successful batch including padding (batch size times padded "
                      "length).")
                .Register(*registry)),
        padding_ratio_family(
            prometheus::BuildHistogram()
                .Name("relserve_padding_ratio")
                .Help("Per successful batch: padded tokens divided by real tokens.")
                .Register(*registry)),
        tokens_family(prometheus::BuildCounter()
                          .Name("relserve_tokens_total")
                          .Help("Real (non-padding) tokens computed.")
                          .Register(*registry)),
        padded_tokens_family(prometheus::BuildCounter()
                                 .Name("relserve_padded_tokens_total")
                                 .Help("Tokens computed including padding.")
                                 .Register(*registry)),
        batches_family(prometheus::BuildCounter()
                           .Name("relserve_batches_total")
                           .Help("Batches run, by status (ok or error).")
                           .Register(*registry)),
        queue_depth_family(prometheus::BuildGauge()
                               .Name("relserve_queue_depth")
                               .Help("Sequences waiting in the batching queue.")
                               .Register(*registry)),
        in_flight_family(prometheus::BuildGauge()
                             .Name("relserve_in_flight_sequences")
                             .Help("Sequences accepted and not yet answered.")
                             .Register(*registry)),
        rejections_family(prometheus::BuildCounter()
                              .Name("relserve_rejections_total")
                              .Help("Requests or sequences refused, by reason.")
                              .Register(*registry)),
        nonfinite_family(prometheus::BuildCounter()
                             .Name("relserve_nonfinite_outputs_total")
                             .Help("Sequences whose outputs held NaN or infinity (answered INTERNAL).")
                             .Register(*registry)),
        unauthenticated_family(prometheus::BuildCounter()
                                   .Name("relserve_unauthenticated_requests_total")
                                   .Help("Calls refused for a missing or wrong API key, by transport (grpc, http, "
                                         "metrics).")
                                   .Register(*registry)),
        model_info_family(
            prometheus::BuildGauge()
                .Name("relserve_model_info")
                .Help("Always 1; the labels describe the served model.")
                .Register(*registry)),
        serving_family(prometheus::BuildGauge()
                           .Name("relserve_model_serving")
                           .Help("1 while the model accepts requests, 0 otherwise.")
                           .Register(*registry)),
        requests(requests_family),
        request_duration(request_duration_family),
        tokenize_duration(tokenize_duration_family),
        queue_duration(queue_duration_family),
        batch_max_queue_duration(batch_max_queue_duration_family),
        inference_duration(inference_duration_family),
        batch_stage_duration(batch_stage_duration_family),
        batch_size(batch_size_family),
        batch_tokens(batch_tokens_family),
        padding_ratio(padding_ratio_family),
        tokens(tokens_family),
        padded_tokens(padded_tokens_family),
        batches(batches_family),
        queue_depth(queue_depth_family),
        in_flight(in_flight_family),
        rejections(rejections_family),
        nonfinite(nonfinite_family),
        unauthenticated(unauthenticated_family),
        serving(serving_family) {}

  static Labels ModelLabel(const std::string& model) { return {{"model", model}}; }

  Histogram& ModelHistogram(SeriesCache<Histogram>& cache, const std::string& model,
                            const Histogram::BucketBoundaries& buckets) {
    return cache.Get(model, [&] { return ModelLabel(model); }, buckets);
  }
  Counter& ModelCounter(SeriesCache<Counter>& cache, const std::string& model) {
    return cache.Get(model, [&] { return ModelLabel(model); });
  }
  Gauge& ModelGauge(SeriesCache<Gauge>& cache, const std::string& model) {
    return cache.Get(model, [&] { return ModelLabel(model); });
  }

  std::shared_ptr<prometheus::Registry> registry;

  Family<Counter>& requests_family;
  Family<Histogram>& request_duration_family;
  Family<Histogram>& tokenize_duration_family;
  Family<Histogram>& queue_duration_family;
  Family<Histogram>& batch_max_queue_duration_family;
  Family<Histogram>& inference_duration_family;
  Family<Histogram>& batch_stage_duration_family;
  Family<Histogram>& batch_size_family;
  Family<Histogram>& batch_tokens_family;
  Family<Histogram>& padding_ratio_family;
  Family<Counter>& tokens_family;
  Family<Counter>& padded_tokens_family;
  Family<Counter>& batches_family;
  Family<Gauge>& queue_depth_family;
  Family<Gauge>& in_flight_family;
  Family<Counter>& rejections_family;
  Family<Counter>& nonfinite_family;
  Family<Counter>& unauthenticated_family;
  Family<Gauge>& model_info_family;
  Family<Gauge>& serving_family;

  SeriesCache<Counter> requests;
  SeriesCache<Histogram> request_duration;
  SeriesCache<Histogram> tokenize_duration;
  SeriesCache<Histogram> queue_duration;
  SeriesCache<Histogram> batch_max_queue_duration;
  SeriesCache<Histogram> inference_duration;
  SeriesCache<Histogram> batch_stage_duration;
  SeriesCache<Histogram> batch_size;
  SeriesCache<Histogram> batch_tokens;
  SeriesCache<Histogram> padding_ratio;
  SeriesCache<Counter> tokens;
  SeriesCache<Counter> padded_tokens;
  SeriesCache<Counter> batches;
  SeriesCache<Gauge> queue_depth;
  SeriesCache<Gauge> in_flight;
  SeriesCache<Counter> rejections;
  SeriesCache<Counter> nonfinite;
  SeriesCache<Counter> unauthenticated;
  SeriesCache<Gauge> serving;

  // relserve_model_info: the current series of each model (replaced when its labels change).
  std::mutex model_info_mu;
  std::unordered_map<std::string, std::pair<Labels, Gauge*>> model_info;

  // relserve_grpc_listener_ok: appears with the first SetGrpcListenerOk().
  Family<Gauge>& grpc_listener_family =
      prometheus::BuildGauge()
          .Name("relserve_grpc_listener_ok")
          .Help("1 while the gRPC port accepts and answers new connections (self-check), 0 "
                "otherwise.")
          .Register(*registry);

  // The HTTP ports' connections: appear with the first SetHttpConnections().
  Family<Gauge>& http_connections_family =
      prometheus::BuildGauge()
          .Name("relserve_http_connections")
          .Help("Open connections of an HTTP port (api, metrics).")
          .Register(*registry);
  Family<Counter>& http_accepted_family =
      prometheus::BuildCounter()
          .Name("relserve_http_connections_accepted_total")
          .Help("Connections an HTTP port (api, metrics) accepted.")
          .Register(*registry);
  Family<Counter>& http_closed_family =
      prometheus::BuildCounter()
          .Name("relserve_http_connections_closed_total")
          .Help("Connections an HTTP port closed to protect itself, by reason: evicted (made room for a newer "
                "one), refused (a newcomer, every slot busy), head_timeout (no whole request head in time, or "
                "idle past the keep-alive time), body_timeout, write_timeout (a client not reading its answer).")
          .Register(*registry);
  std::mutex http_mu;
  std::unordered_map<std::string, WebServerStats> http_seen;

  // The simulated device (server/simulated/): appear with the first call for a model.
  Family<Counter>& simulated_busy_family =
      prometheus::BuildCounter()
          .Name("relserve_simulated_device_busy_seconds_total")
          .Help("Wall seconds the simulated device of a model (--model NAME=simulated:PROFILE) spent running "
                "batches; over wall time, its utilisation.")
          .Register(*registry);
  Family<Gauge>& simulated_saturated_family =
      prometheus::BuildGauge()
          .Name("relserve_simulated_device_saturated_tokens_per_second")
          .Help("Tokens per wall second the simulated device would deliver busy all the time with full batches "
                "of lengths spread evenly over 8 to 512 tokens (the serving benchmark's workload).")
          .Register(*registry);

  // Long inputs embedded whole: appear with the first RecordWindowedInput().
  Family<Counter>& windowed_inputs_family =
      prometheus::BuildCounter()
          .Name("relserve_windowed_inputs_total")
          .Help("Texts longer than the model's maximum embedded whole, in several windows (whole_input).")
          .Register(*registry);
  Family<Counter>& windows_family =
      prometheus::BuildCounter()
          .Name("relserve_input_windows_total")
          .Help("Windows those texts were split into, each one sequence through the batcher.")
          .Register(*registry);
  SeriesCache<Counter> windowed_inputs{windowed_inputs_family};
  SeriesCache<Counter> windows{windows_family};
};

ServerMetrics::ServerMetrics() : impl_(std::make_unique<Impl>()) {}
ServerMetrics::~ServerMetrics() = default;

std::string ServerMetrics::Render() const {
  std::string text = prometheus::TextSerializer().Serialize(impl_->registry->Collect());
  // The process series are read at scrape time; without /proc there are none.
  if (auto process = ReadProcessStats(); process.ok()) text += RenderProcessMetrics(*process);
  return text;
}

void ServerMetrics::RecordRequest(const std::string& model, const std::string& rpc,
                                  const std::string& code, double latency_seconds) {
  impl_->requests
      .Get(Key(model, rpc, code), [&] { return Labels{{"model", model}, {"rpc", rpc},
                                                      {"code", code}}; })
      .Increment();
  impl_->request_duration
      .Get(Key(model, rpc), [&] { return Labels{{"model", model}, {"rpc", rpc}}; },
           LatencyBuckets())
      .Observe(latency_seconds);
}

void ServerMetrics::RecordTokenize(const std::string& model, double seconds) {
  impl_->ModelHistogram(impl_->tokenize_duration, model, TokenizeBuckets()).Observe(seconds);
}

void ServerMetrics::RecordNonFiniteOutput(const std::string& model) {
  impl_->ModelCounter(impl_->nonfinite, model).Increment();
}

void ServerMetrics::RecordUnauthenticated(const std::string& transport) {
  impl_->unauthenticated.Get(transport, [&] { return Labels{{"transport", transport}}; }).Increment();
}

void ServerMetrics::RecordRejection(const std::string& model, const std::string& reason) {
  impl_->rejections
      .Get(Key(model, reason), [&] { return Labels{{"model", model}, {"reason", reason}}; })
      .Increment();
}

void ServerMetrics::AddInFlightSequences(const std::string& model, int64_t delta) {
  impl_->ModelGauge(impl_->in_flight, model).Increment(static_cast<double>(delta));
}

void ServerMetrics::SetQueueDepth(const std::string& model, int64_t sequences) {
  impl_->ModelGauge(impl_->queue_depth, model).Set(static_cast<double>(sequences));
}

void ServerMetrics::RecordBatch(const std::string& model, int batch_size, int64_t real_tokens,
                                int64_t padded_tokens, double queue_seconds_max,
                                double inference_seconds, bool ok) {
  const std::string status = ok ? "ok" : "error";
  impl_->batches
      .Get(Key(model, status), [&] { return Labels{{"model", model}, {"status", status}}; })
      .Increment();
  impl_->ModelHistogram(impl_->batch_max_queue_duration, model, QueueBuckets())
      .Observe(queue_seconds_max);
  if (!ok) return;
  impl_->ModelHistogram(impl_->inference_duration, model, LatencyBuckets())
      .Observe(inference_seconds);
  impl_->ModelHistogram(impl_->batch_size, model, BatchSizeBuckets())
      .Observe(static_cast<double>(batch_size));
  impl_->ModelHistogram(impl_->batch_tokens, model, BatchTokenBuckets())
      .Observe(static_cast<double>(padded_tokens));
  if (real_tokens > 0) {
    impl_->ModelHistogram(impl_->padding_ratio, model, PaddingRatioBuckets())
        .Observe(static_cast<double>(padded_tokens) / static_cast<double>(real_tokens));
  }
  impl_->ModelCounter(impl_->tokens, model).Increment(static_cast<double>(real_tokens));
  impl_->ModelCounter(impl_->padded_tokens, model).Increment(static_cast<double>(padded_tokens));
}

void ServerMetrics::RecordBatchStages(const std::string& model, double prepare_seconds, double forward_seconds,
                                      double results_seconds) {
  const std::pair<const char*, double> stages[] = {
      {"prepare", prepare_seconds}, {"forward", forward_seconds}, {"results", results_seconds}};
  for (const auto& [stage, seconds] : stages) {
    impl_->batch_stage_duration
        .Get(Key(model, stage), [&] { return Labels{{"model", model}, {"stage", stage}}; }, LatencyBuckets())
        .Observe(seconds);
  }
}

void ServerMetrics::RecordQueueTime(const std::string& model, double seconds) {
  impl_->ModelHistogram(impl_->queue_duration, model, QueueBuckets()).Observe(seconds);
}

void ServerMetrics::SetModelInfo(const std::string& model,
                                 const std::map<std::string, std::string>& labels) {
  Labels series_labels = Impl::ModelLabel(model);
  for (const auto& [name, value] : labels) {
    const std::string clean = SanitizeLabelName(name);
    if (clean.empty() || clean == "model") continue;
    series_labels[clean] = value;
  }
  std::lock_guard<std::mutex> lock(impl_->model_info_mu);
  auto it = impl_->model_info.find(model);
  if (it != impl_->model_info.end()) {
    if (it->second.first == series_labels) {
      it->second.second->Set(1);
      return;
    }
    impl_->model_info_family.Remove(it->second.second);
    impl_->model_info.erase(it);
  }
  Gauge& gauge = impl_->model_info_family.Add(series_labels);
  gauge.Set(1);
  impl_->model_info.emplace(model, std::make_pair(std::move(series_labels), &gauge));
}

void ServerMetrics::SetServing(const std::string& model, bool serving) {
  impl_->ModelGauge(impl_->serving, model).Set(serving ? 1 : 0);
}

void ServerMetrics::RecordWindowedInput(const std::string& model, int windows) {
  impl_->ModelCounter(impl_->windowed_inputs, model).Increment();
  impl_->ModelCounter(impl_->windows, model).Increment(windows);
}

void ServerMetrics::AddSimulatedDeviceBusy(const std::string& model, double seconds) {
  impl_->simulated_busy_family.Add({{"model", model}}).Increment(seconds);  // Add returns the existing series
}

void ServerMetrics::SetSimulatedDeviceSaturatedRate(const std::string& model, double tokens_per_second) {
  impl_->simulated_saturated_family.Add({{"model", model}}).Set(tokens_per_second);
}

void ServerMetrics::SetGrpcListenerOk(bool ok) {
  impl_->grpc_listener_family.Add({}).Set(ok ? 1 : 0);  // Add returns the existing series
}

void ServerMetrics::SetHttpConnections(const std::string& port, const WebServerStats& counts) {
  std::lock_guard<std::mutex> lock(impl_->http_mu);
  WebServerStats& seen = impl_->http_seen[port];
  impl_->http_connections_family.Add({{"port", port}}).Set(static_cast<double>(counts.open_connections));
  const auto advance = [](Counter& counter, uint64_t now, uint64_t before) {
    if (now > before) counter.Increment(static_cast<double>(now - before));
  };
  advance(impl_->http_accepted_family.Add({{"port", port}}), counts.connections_accepted, seen.connections_accepted);
  const std::pair<const char*, uint64_t WebServerStats::*> reasons[] = {
      {"evicted", &WebServerStats::connections_evicted}, {"refused", &WebServerStats::connections_refused},
      {"head_timeout", &WebServerStats::head_timeouts},  {"body_timeout", &WebServerStats::body_timeouts},
      {"write_timeout", &WebServerStats::write_timeouts}};
  for (const auto& [reason, field] : reasons) {
    advance(impl_->http_closed_family.Add({{"port", port}, {"reason", reason}}), counts.*field, seen.*field);
  }
  seen = counts;
}

}  // namespace relserve
