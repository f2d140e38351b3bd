#ifndef RELSERVE_SERVER_MAIN_SERVER_CONFIG_H_
#define RELSERVE_SERVER_MAIN_SERVER_CONFIG_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "server/backend/model_types.h"
#include "server/batching/worker_count.h"
#include "server/model/engine.h"
#include "server/model/layers/attention_options.h"
#include "server/util/process_tuning.h"
#include "absl/time/time.h"

namespace relserve {

// Everything `relserve` takes on its command line, with the defaults documented in README.
struct ServerConfig {
  // name, and a directory or a Hugging Face Hub id (org/repo[@revision]; server/hub resolves it
  // to a snapshot of the cache before the engine loads).
  std::vector<std::pair<std::string, std::string>> models;
  // --served-model-name: the first model's name, whatever `models` says (applied by
  // ParseServerFlags); empty: none.
  std::string served_model_name;
  std::string grpc_address = "0.0.0.0:50051";
  std::string metrics_address = "0.0.0.0";
  int metrics_port = 9090;  // 0: a free port; -1: no metrics endpoint
  std::string http_address = "0.0.0.0:8080";  // the HTTP/JSON API; "" or "-1": none; port 0: a free port
  int http_threads = 64;                       // HTTP requests served at once
  int http_max_connections = 4096;             // the HTTP connection table
  int http_max_connections_per_client = 256;   // HTTP connections one client address may hold
  absl::Duration http_header_timeout = absl::Seconds(10);  // a request head must arrive whole within this
  // How long an HTTP call may take before it is answered 504 (zero: no limit); a request's
  // X-Request-Timeout header may ask for less.
  absl::Duration http_request_timeout = absl::Seconds(60);
  std::string device = "cpu";
  DType dtype = DType::kFloat32;  // parsed here, carried typed (backend/model_types.h)
  int workers_per_device = 0;  // 0: auto (ResolveCpuWorkers)
  int threads_per_worker = 0;  // 0: auto (ResolveCpuWorkers)
  int64_t max_batch_tokens = 16384;
  int max_batch_size = 64;
  int max_queue_delay_us = 2000;
  std::string batching = "bucketed";  // bucketed, fifo
  std::vector<int32_t> length_buckets;  // upper bounds; empty: DefaultLengthBuckets(max length), batching/length_buckets.h
  int max_queue_sequences = 10000;
  int max_inputs_per_request = 256;
  int max_input_length = 0;  // 0: each model's own maximum
  // On a GPU, batches of at most this many tokens replay CUDA graphs (EngineOptions); 0: never.
  int cuda_graph_tokens = 4096;
  // On a GPU, the attention path and SDPA backend (EngineOptions::gpu_attention); --gpu-attention.
  AttentionOptions gpu_attention;
  // Under --dtype int8, the precision of attention's products (EngineOptions::int8_attention).
  Int8Attention int8_attention = Int8Attention::kAuto;
  // Under --dtype int8, the bits of the weights (EngineOptions::int8_weight_bits).
  Int8WeightBits int8_weight_bits = Int8WeightBits::kAuto;
  // --float32-gemm, --bfloat16-gemm, --int8-gemm (model/cpu_gemm_choice.h): the fields of
  // CpuGemmChoices() only, which HostOptionsFromFlags hands to the engine; the other fields are not
  // read.
  EngineKernels kernels;
  // Log forwards' host times per (thread, batch, length) (EngineOptions::log_shape_times).
  bool log_shape_times = false;
  // On a GPU, batch sizes rounded up to a few sizes (EngineOptions::batch_rounding) or run exact.
  std::string gpu_batch_sizes = "rounded";
  // With warmup: models whose backend asks for it (a GPU) are also warmed up on every worker's
  // own thread, at every batch shape, before SERVING (BatcherConfig::warm_up_workers).
  bool warmup_workers = true;
  // Cut over-long inputs to the maximum instead of refusing them, in requests that do not say
  // (gRPC's `truncate` unset, TEI's `truncate` absent, OpenAI's and Cohere's routes). On by
  // default, as TEI's --auto-truncate since TEI 1.9.
  bool auto_truncate = true;
  // Embed texts longer than the maximum whole, in windows (EmbedRequest.whole_input unset), with
  // this many tokens repeated between consecutive windows, at most this many windows a request.
  bool whole_input = false;
  int window_overlap = 0;
  int max_windows_per_request = 4096;
  // Chunked rerank in requests that do not say, the most windows of one document and the tokens
  // consecutive windows share (ServingLimits::rerank_chunking, max_chunks_per_doc, rerank_chunk_overlap).
  bool rerank_chunking = false;
  int max_chunks_per_doc = 10;
  int rerank_chunk_overlap = 0;
  int max_message_bytes = 2000000;  // text-embeddings-inference's --payload-limit default
  int max_response_bytes = 64 << 20;
  double shutdown_grace_seconds = 30;
  // > 0: close each client connection after about this long (gRPC's max connection age, with
  // GOAWAY), so clients balancing over a headless Service's addresses resolve it again and
  // find pods added since. 0: connections live as long as the clients keep them.
  double max_connection_age_seconds = 0;
  bool warmup = true;
  std::string pooling;  // "": the model directory's
  // The SentencePiece module the tokenizers load (--sentencepiece-module; "": found beside the
  // binary, else the build tree's: tokenizer/sentencepiece/sentencepiece_module.h).
  std::string sentencepiece_module;
  // Not a flag: RELSERVE_ALLOCATOR (and RELSERVE_MALLOC_DEFAULTS), read from the environment
  // ParseServerFlags is given, for the engines (util/process_tuning.h; the program's start read
  // the same variables for glibc's side).
  AllocatorMode allocator = AllocatorMode::kCache;
  // TLS: with a certificate and its key the gRPC port speaks TLS only; with a client CA it
  // also requires client certificates signed by that CA (mutual TLS). PEM file paths.
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  // API keys (server/auth/api_keys.h): with one, every Encoder RPC and every HTTP route but
  // GET /health needs "authorization: Bearer KEY". At most one of the two is set.
  std::string api_key;       // never logged
  std::string api_key_file;  // one key per line
  bool metrics_api_key_required = false;  // /metrics needs the key too (/healthz never does)
  // Hub models come from the cache only, never over the network (as HF_HUB_OFFLINE=1 does).
  bool offline = false;
};

// Parses argv (after the program name), then `environment`: each flag not on the command line
// is taken from its variable (FlagEnvironmentVariable) when that is set, even to "". A
// repeatable flag (--model) takes a comma-separated list from its variable, and a command line
// that gives it at all overrides the variable. Errors name the flag, and the variable for a
// value from the environment. RELSERVE_ALLOCATOR and RELSERVE_MALLOC_DEFAULTS, no flags, set
// `allocator` (a bad value: INVALID_ARGUMENT naming the variable); other variables that name no
// flag are ignored here (see UnknownRelserveVariables).
absl::StatusOr<ServerConfig> ParseServerFlags(const std::vector<std::string>& args,
                                              const std::map<std::string, std::string>& environment = {});
std::string ServerUsage();

// RELSERVE_ and the flag's name in upper case with dashes as underscores: "max-batch-size" ->
// "RELSERVE_MAX_BATCH_SIZE".
std::string FlagEnvironmentVariable(const std::string& flag);
// The process's environment variables whose names start with RELSERVE_.
std::map<std::string, std::string> RelserveEnvironment();
// The names in `environment` that start with RELSERVE_ but are neither a flag's variable nor
// one of the process settings (RELSERVE_NO_REEXEC, RELSERVE_ALLOCATOR,
// RELSERVE_MALLOC_DEFAULTS): likely misspelt, worth a warning.
std::vector<std::string> UnknownRelserveVariables(const std::map<std::string, std::string>& environment);

}  // namespace relserve

#endif  // RELSERVE_SERVER_MAIN_SERVER_CONFIG_H_
