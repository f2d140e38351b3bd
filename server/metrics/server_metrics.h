#ifndef RELSERVE_SERVER_METRICS_SERVER_METRICS_H_
#define RELSERVE_SERVER_METRICS_SERVER_METRICS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "server/http_transport/web_server.h"

namespace relserve {

// Every Prometheus series relserve exports. The names and labels are part of the product:
// dashboards and alerts query them, so rename nothing without updating those.
//
// | Series                                        | Type      | Labels            | Meaning
// |-----------------------------------------------|-----------|-------------------|------------------------------------------------
// | relserve_requests_total                       | counter   | model, rpc, code  | finished RPCs; code = gRPC status name ("OK", "INVALID_ARGUMENT", ...)
// | relserve_request_duration_seconds             | histogram | model, rpc        | RPC latency, arrival to reply (kLatencyBuckets)
// | relserve_tokenize_duration_seconds            | histogram | model             | tokenizing one request (kTokenizeBuckets)
// | relserve_queue_duration_seconds               | histogram | model             | per sequence: enqueue to start of its batch (kQueueBuckets)
// | relserve_batch_max_queue_duration_seconds     | histogram | model             | per batch: wait of its longest-waiting sequence (kQueueBuckets)
// | relserve_inference_duration_seconds           | histogram | model             | per successful batch: forward pass time (kLatencyBuckets)
// | relserve_batch_size                           | histogram | model             | sequences per successful batch (1, 2, 4, ..., 256)
// | relserve_batch_tokens                         | histogram | model             | padded tokens per successful batch (64, 128, ..., 65536)
// | relserve_padding_ratio                        | histogram | model             | padded / real tokens per successful batch (1.0 ... 5)
// | relserve_tokens_total                         | counter   | model             | real (non-padding) tokens computed
// | relserve_padded_tokens_total                  | counter   | model             | tokens computed including padding
// | relserve_batches_total                        | counter   | model, status     | batches run; status = "ok" | "error"
// | relserve_queue_depth                          | gauge     | model             | sequences waiting in the batching queue
// | relserve_in_flight_sequences                  | gauge     | model             | sequences accepted and not yet answered
// | relserve_rejections_total                     | counter   | model, reason     | sequences/requests refused; reason = "queue_full", "deadline_exceeded",
// |                                               |           |                   | "cancelled", "shutdown", "invalid_argument", "too_long", ...
// | relserve_nonfinite_outputs_total              | counter   | model             | sequences whose outputs held NaN or infinity (the request got INTERNAL)
// | relserve_unauthenticated_requests_total       | counter   | transport         | calls refused for a missing or wrong API key; transport = "grpc", "http"
// |                                               |           |                   | (the JSON API) or "metrics" (/metrics with --metrics-api-key-required)
// | relserve_model_info                           | gauge     | model, + any      | always 1; labels describe the model (architecture, dtype, device, max_length, ...)
// | relserve_model_serving                        | gauge     | model             | 1 while the model accepts requests, 0 otherwise
// | relserve_grpc_listener_ok                     | gauge     |                   | 1 while the gRPC port accepts new connections (server/rpc/listener_check.h)
// | relserve_simulated_device_busy_seconds_total  | counter   | model             | a simulated device's busy wall seconds (server/simulated/); / wall time = utilisation
// | relserve_simulated_device_saturated_tokens_per_second | gauge | model       | its tokens/s busy all the time with full batches of the benchmark's lengths
// | process_resident_memory_bytes, process_*      |           |                   | the process's memory, descriptors, start and CPU time (process_metrics.h)
//
// Bucket upper bounds (seconds unless noted; +Inf is implicit):
//   kLatencyBuckets  0.001 0.0025 0.005 0.01 0.025 0.05 0.1 0.25 0.5 1 2.5 5 10 30
//   kTokenizeBuckets 0.00005 0.0001 0.00025 0.0005 0.001 0.0025 0.005 0.01 0.025 0.05 0.1 0.25 0.5 1
//   kQueueBuckets    0.0001 0.00025 0.0005 then kLatencyBuckets
//   batch size       1 2 4 8 16 32 64 128 256
//   batch tokens     64 128 256 512 1024 2048 4096 8192 16384 32768 65536
//   padding ratio    1 1.05 1.1 1.2 1.3 1.5 2 3 5
//
// Families are registered once in the constructor; a label combination appears on first use.
// All methods are thread-safe. An instance is passed down to the components that record into it
// (there is no global registry); Render() produces the text exposition format served on /metrics.
class ServerMetrics {
 public:
  ServerMetrics();  // owns its own prometheus::Registry
  ~ServerMetrics();
  ServerMetrics(const ServerMetrics&) = delete;
  ServerMetrics& operator=(const ServerMetrics&) = delete;

  // Prometheus text exposition (version 0.0.4) of every series, the process series included.
  std::string Render() const;

  // RPC level.
  void RecordRequest(const std::string& model, const std::string& rpc, const std::string& code,
                     double latency_seconds);
  void RecordTokenize(const std::string& model, double seconds);
  void RecordRejection(const std::string& model, const std::string& reason);
  void RecordNonFiniteOutput(const std::string& model);  // per sequence
  // A text embedded whole in `windows` (> 1) windows (relserve_windowed_inputs_total,
  // relserve_input_windows_total).
  void RecordWindowedInput(const std::string& model, int windows);
  // A call refused for a missing or wrong API key: "grpc", "http" or "metrics".
  void RecordUnauthenticated(const std::string& transport);
  void AddInFlightSequences(const std::string& model, int64_t delta);
  void SetQueueDepth(const std::string& model, int64_t sequences);

  // Batch level. A failed batch (ok = false) only counts in relserve_batches_total{status=
  // "error"}; the size, token, padding and inference series describe work actually done.
  // padded_tokens = batch_size * padded sequence length; real_tokens excludes padding.
  void RecordBatch(const std::string& model, int batch_size, int64_t real_tokens,
                   int64_t padded_tokens, double queue_seconds_max, double inference_seconds,
                   bool ok);
  void RecordQueueTime(const std::string& model, double seconds);  // per sequence
  // relserve_batch_stage_duration_seconds{model, stage}: where a successful batch's backend
  // call spent its time (RunTimings): "prepare", "forward" (queuing the encoder's forward: all
  // of it on a CPU, the kernel launches on a GPU) and "results" (heads, the wait for the device,
  // the copies out).
  void RecordBatchStages(const std::string& model, double prepare_seconds, double forward_seconds,
                         double results_seconds);

  // relserve_model_info{model=..., <labels>} = 1. Label names are sanitized to Prometheus'
  // [a-zA-Z_][a-zA-Z0-9_]* (invalid characters become '_'); a "model" key is ignored. Calling
  // it again for the same model replaces the previous label set.
  void SetModelInfo(const std::string& model, const std::map<std::string, std::string>& labels);
  void SetServing(const std::string& model, bool serving);
  // A simulated device's (server/simulated/): busy seconds added, and its saturated tokens/s.
  void AddSimulatedDeviceBusy(const std::string& model, double seconds);
  void SetSimulatedDeviceSaturatedRate(const std::string& model, double tokens_per_second);
  // relserve_grpc_listener_ok (no labels); the series exists from the first call on.
  void SetGrpcListenerOk(bool ok);
  // relserve_http_connections{port} and the counters of accepted and closed connections
  // (relserve_http_connections_accepted_total, relserve_http_connections_closed_total{reason});
  // `port` is "api" or "metrics". server/http_transport's counts are totals: the counters advance by the difference.
  void SetHttpConnections(const std::string& port, const WebServerStats& counts);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_METRICS_SERVER_METRICS_H_
