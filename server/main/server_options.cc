#include "server/main/server_options.h"

#include "server/model/cpu_gemm_choice.h"
#include "server/model/runtime/device_list.h"
#include "server/util/status_macros.h"

namespace relserve {

absl::StatusOr<HostOptions> HostOptionsFromFlags(const ServerConfig& config) {
  HostOptions options;
  ASSIGN_OR_RETURN(options.devices, ExpandDeviceList(config.device));
  options.engine.dtype = config.dtype;
  options.engine.max_length = config.max_input_length;
  options.engine.cuda_graph_tokens = config.cuda_graph_tokens;
  options.engine.gpu_attention = config.gpu_attention;
  options.engine.int8_attention = config.int8_attention;
  options.engine.int8_weight_bits = config.int8_weight_bits;
  for (const CpuGemmChoice& choice : CpuGemmChoices()) options.engine.kernels.*choice.own = config.kernels.*choice.own;
  options.engine.log_shape_times = config.log_shape_times;
  options.engine.batch_rounding =
      config.gpu_batch_sizes == "exact" ? BatchRounding::kExact : BatchRounding::kOnDevice;
  options.engine.pooling = config.pooling;
  options.engine.sentencepiece.path = config.sentencepiece_module;
  options.engine.allocator = config.allocator;
  options.workers_per_device = config.workers_per_device;
  options.threads_per_worker = config.threads_per_worker;
  options.policy.max_batch_tokens = config.max_batch_tokens;
  options.policy.max_batch_size = config.max_batch_size;
  options.policy.max_queue_delay = absl::Microseconds(config.max_queue_delay_us);
  options.policy.length_bucketing = config.batching == "bucketed";
  options.policy.bucket_bounds = config.length_buckets;
  options.max_queue_sequences = static_cast<size_t>(config.max_queue_sequences);
  options.warmup = config.warmup;
  options.warmup_workers = config.warmup_workers;
  options.offline = config.offline;
  return options;
}

ServingLimits ServingLimitsFromFlags(const ServerConfig& config) {
  ServingLimits limits;
  limits.max_inputs_per_request = config.max_inputs_per_request;
  limits.max_response_bytes = static_cast<size_t>(config.max_response_bytes);
  limits.auto_truncate = config.auto_truncate;
  limits.whole_input = config.whole_input;
  limits.window_overlap = config.window_overlap;
  limits.max_windows_per_request = config.max_windows_per_request;
  limits.rerank_chunking = config.rerank_chunking;
  limits.max_chunks_per_doc = config.max_chunks_per_doc;
  limits.rerank_chunk_overlap = config.rerank_chunk_overlap;
  return limits;
}

GrpcServerOptions GrpcOptionsFromFlags(const ServerConfig& config) {
  GrpcServerOptions options;
  options.address = config.grpc_address;
  options.tls = {config.tls_cert, config.tls_key, config.tls_client_ca};
  options.max_receive_message_bytes = config.max_message_bytes;
  options.max_send_message_bytes = config.max_response_bytes;
  options.max_connection_age_seconds = config.max_connection_age_seconds;
  // Calls under way on a closing connection get as long as a shutdown drain to finish.
  options.connection_age_grace_seconds = config.shutdown_grace_seconds;
  return options;
}

absl::StatusOr<HttpServerConfig> HttpOptionsFromFlags(const ServerConfig& config) {
  HttpServerConfig hc;
  RETURN_IF_ERROR(ParseHttpAddress(config.http_address, &hc));
  hc.threads = config.http_threads;
  hc.max_connections = config.http_max_connections;
  hc.max_connections_per_client = config.http_max_connections_per_client;
  hc.header_timeout = config.http_header_timeout;
  hc.max_body_bytes = static_cast<size_t>(config.max_message_bytes);
  hc.max_response_bytes = static_cast<size_t>(config.max_response_bytes);
  hc.request_timeout = config.http_request_timeout;
  return hc;
}

ServerLimitsInfo HttpLimitsFromFlags(const ServerConfig& config) {
  ServerLimitsInfo limits;
  limits.max_batch_tokens = config.max_batch_tokens;
  limits.max_batch_requests = config.max_batch_size;
  limits.max_client_batch_size = config.max_inputs_per_request;
  limits.max_concurrent_requests = config.http_threads;
  limits.auto_truncate = config.auto_truncate;
  limits.version = RELSERVE_VERSION;
  return limits;
}

}  // namespace relserve
