#include "server/main/server_config.h"

#include <limits>
#include <map>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/model/cpu_gemm_choice.h"
#include "server/util/environment_reader.h"
#include "server/util/flag_table.h"
#include "server/util/status_macros.h"
#include "server/auth/api_keys.h"
#include "server/http_api/http_server.h"
#include "server/hub/model_resolver.h"
#include "server/http_api/request_deadline.h"

namespace relserve {
namespace {

using C = ServerConfig;

// Every flag reads the environment: RELSERVE_ and its name (FlagEnvironmentVariable).
FlagTableOptions ServerFlagOptions() {
  FlagTableOptions options;
  options.environment_prefix = "RELSERVE_";
  options.every_flag_from_environment = true;
  return options;
}

// --float32-gemm, --bfloat16-gemm and --int8-gemm (CpuGemmChoices), set in ServerConfig::kernels.
std::vector<Flag<C>> CpuGemmFlags() {
  std::vector<Flag<C>> flags;
  for (const CpuGemmChoice& choice : CpuGemmChoices()) {
    flags.push_back(CustomFlag<C>(
        choice.flag, CpuGemmValueName(choice), choice.help,
        [choice](const std::string& v, ServerConfig* c) {
          if (v != "auto" && v != choice.fallback) {
            return absl::InvalidArgumentError(
                absl::StrCat("--", choice.flag, ": \"", v, "\" is not auto or ", choice.fallback));
          }
          c->kernels.*choice.own = v == "auto";
          return absl::OkStatus();
        },
        [choice](const ServerConfig& c) { return c.kernels.*choice.own ? std::string("auto") : choice.fallback; }));
  }
  return flags;
}

// `flags` with `more` after the flag named `after`.
std::vector<Flag<C>> InsertAfter(std::vector<Flag<C>> flags, const std::string& after, std::vector<Flag<C>> more) {
  auto at = flags.begin();
  while (at != flags.end() && at->name != after) ++at;
  if (at != flags.end()) ++at;
  flags.insert(at, std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
  return flags;
}

const FlagTable<ServerConfig>& Flags() {
  static const FlagTable<ServerConfig> kFlags(InsertAfter({
      CustomFlag<C>("model", "NAME=DIR",
       "a Hugging Face model directory, or a Hub model org/repo[@revision] (fetched into the Hugging Face cache), "
       "to serve under NAME (repeatable; the first is the default model; a bare DIR is served under its folder "
       "name, a bare Hub id under org/repo, with repo accepted too; a path that exists wins over a Hub id)",
       [](const std::string& v, ServerConfig* c) {
         const auto eq = v.find('=');
         std::string name = eq == std::string::npos ? "" : v.substr(0, eq);
         std::string dir = eq == std::string::npos ? v : v.substr(eq + 1);
         while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
         if (name.empty()) name = DefaultModelName(dir);
         if (dir.empty() || name.empty()) return absl::InvalidArgumentError("--model: expected NAME=DIR");
         for (const auto& m : c->models) {
           if (m.first == name) return absl::InvalidArgumentError(absl::StrCat("--model: name \"", name, "\" given twice"));
         }
         c->models.emplace_back(name, dir);
         return absl::OkStatus();
       },
       [](const ServerConfig&) { return std::string("(required)"); })
          .Repeatable(),
      StringFlag("served-model-name", "NAME",
                 "the name the first (default) model is served under, whatever --model names it (TEI's flag); a "
                 "Hub model's org/repo and repo are still accepted",
                 Field(&C::served_model_name)),
      StringFlag("grpc-address", "HOST:PORT", "where the gRPC API listens", Field(&C::grpc_address)),
      StringFlag("metrics-address", "HOST", "where /metrics and /healthz listen", Field(&C::metrics_address)),
      IntFlag("metrics-port", "port of the Prometheus endpoint (0: any free port, -1: none)",
              Field(&C::metrics_port), -1),
      CustomFlag<C>("http-address", "HOST:PORT", "where the HTTP/JSON API listens (OpenAI, TEI and Cohere routes; -1 or empty: none)",
       [](const std::string& v, ServerConfig* c) {
         if (v.empty() || v == "-1") {
           c->http_address.clear();
           return absl::OkStatus();
         }
         HttpServerConfig parsed;
         if (absl::Status s = ParseHttpAddress(v, &parsed); !s.ok()) return s;
         c->http_address = v;
         return absl::OkStatus();
       },
       [](const ServerConfig& c) { return c.http_address; }),
      IntFlag("http-threads", "threads of the HTTP server: HTTP requests served at once (each waits for its batch)",
              Field(&C::http_threads), 1),
      IntFlag("http-max-connections",
              "HTTP connections held at once (at most a quarter of the open-files limit); a new one replaces the "
              "oldest idle or slow one",
              Field(&C::http_max_connections), 1),
      IntFlag("http-max-connections-per-client",
              "HTTP connections one client address may hold; its next one replaces its own oldest idle or slow one",
              Field(&C::http_max_connections_per_client), 1),
      CustomFlag<C>("http-header-timeout", "DURATION",
       "how long a client may take to send a whole HTTP request head (bytes trickling in do not extend it)",
       [](const std::string& v, ServerConfig* c) {
         auto d = ParseTimeout(v, "--http-header-timeout");
         if (!d.ok()) return d.status();
         if (*d <= absl::ZeroDuration()) return absl::InvalidArgumentError("--http-header-timeout: must be positive");
         c->http_header_timeout = *d;
         return absl::OkStatus();
       },
       [](const ServerConfig& c) { return absl::StrCat(absl::ToDoubleSeconds(c.http_header_timeout), "s"); }),
      CustomFlag<C>("http-request-timeout", "DURATION",
       "how long an HTTP call may take before it is answered 504 and its queued work dropped: seconds or a number "
       "with a unit (500ms, 2m; 0: no limit); a request's X-Request-Timeout header may ask for less",
       [](const std::string& v, ServerConfig* c) {
         auto d = ParseTimeout(v, "--http-request-timeout");
         if (!d.ok()) return d.status();
         c->http_request_timeout = *d;
         return absl::OkStatus();
       },
       [](const ServerConfig& c) { return absl::StrCat(absl::ToDoubleSeconds(c.http_request_timeout), "s"); }),
      CustomFlag<C>("device", "cpu|cuda|cuda:N[,...]",
       "where models run: the CPU, or GPUs (a build against a CUDA LibTorch): cuda:N, a list such as "
       "cuda:0,cuda:1 (a copy of each model per item, its workers on each, one queue feeding them all; a GPU "
       "listed twice holds two copies), or cuda, every visible GPU",
       [](const std::string& v, ServerConfig* c) {
         bool cpu = false, gpu = false;
         for (absl::string_view part : absl::StrSplit(v, ',')) {
           const std::string item(absl::StripAsciiWhitespace(part));
           const bool cuda_n = item.size() > 5 && item.size() <= 8 && item.compare(0, 5, "cuda:") == 0 &&
                               item.find_first_not_of("0123456789", 5) == std::string::npos;
           if (item != "cpu" && item != "cuda" && !cuda_n) {
             return absl::InvalidArgumentError(
                 absl::StrCat("--device \"", v, "\": \"", item, "\" is not cpu, cuda or cuda:N"));
           }
           (item == "cpu" ? cpu : gpu) = true;
         }
         if (cpu && gpu) {
           return absl::InvalidArgumentError(absl::StrCat("--device \"", v, "\": the CPU and GPUs do not mix"));
         }
         c->device = v;
         return absl::OkStatus();
       },
       [](const ServerConfig& c) { return c.device; }),
      CustomFlag<C>("dtype", "TYPE", "weights and activations: float32, bfloat16, float16, or int8 (CPU)",
       [](const std::string& v, ServerConfig* c) {
         absl::StatusOr<DType> dtype = ParseDType(v);
         if (!dtype.ok()) return absl::InvalidArgumentError(absl::StrCat("--dtype: ", dtype.status().message()));
         c->dtype = *dtype;
         return absl::OkStatus();
       },
       [](const ServerConfig& c) { return std::string(DTypeName(c.dtype)); }),
      IntFlag("workers-per-device", "model workers per device, each running one batch at a time (0: on the CPU, "
              "float32 one per CPU, at most 4, bfloat16, float16 and int8 1; on a GPU, 2, each on a CUDA stream of its own)",
              Field(&C::workers_per_device), 0),
      IntFlag("threads-per-worker", "compute threads of each worker (0: the CPUs / workers)",
              Field(&C::threads_per_worker), 0),
      IntFlag("max-batch-tokens", "padded tokens per batch (batch size x longest sequence)",
              Field(&C::max_batch_tokens), 1),
      IntFlag("max-batch-size", "sequences per batch", Field(&C::max_batch_size), 1),
      IntFlag("max-queue-delay-us", "how long a sequence may wait for others to batch with",
              Field(&C::max_queue_delay_us), 0),
      StringFlag("batching", "MODE", "bucketed (by length) or fifo (arrival order)", Field(&C::batching),
                 {"bucketed", "fifo"}),
      CustomFlag<C>("length-buckets", "N,N,...",
       "upper bounds of the length buckets batches are formed from (default: 8 apart up to 64, then 16, 32, 64)",
       [](const std::string& v, ServerConfig* c) {
         c->length_buckets.clear();
         for (absl::string_view part : absl::StrSplit(v, ',')) {
           int x;
           if (!absl::SimpleAtoi(part, &x) || x < 1 || (!c->length_buckets.empty() && x <= c->length_buckets.back())) {
             return absl::InvalidArgumentError("--length-buckets: expected increasing positive integers, e.g. 16,32,64");
           }
           c->length_buckets.push_back(x);
         }
         return absl::OkStatus();
       },
       [](const ServerConfig&) { return std::string("8,16,...,64,80,...,128,160,...,256,320,..."); }),
      IntFlag("max-queue-sequences", "queued sequences per model before requests are refused (RESOURCE_EXHAUSTED)",
              Field(&C::max_queue_sequences), 1),
      IntFlag("max-inputs-per-request", "inputs (or Rerank documents) in one request",
              Field(&C::max_inputs_per_request), 1),
      IntFlag("max-input-length", "longest sequence in tokens (0: each model's maximum)",
              Field(&C::max_input_length), 0),
      IntFlag("cuda-graph-tokens",
              "on a GPU, batches of at most N tokens (batch size, rounded as --gpu-batch-sizes does, x length) replay the "
              "forward from a CUDA graph captured at warm-up (0: never)",
              Field(&C::cuda_graph_tokens), 0),
      CustomFlag<C>("gpu-attention", "PATH[:BACKEND]",
       "on a GPU, how relative attention runs: bias (every term one bias for LibTorch's fused kernel) or tables "
       "(DeBERTa's and relative_key's terms read through their tables by relserve's kernel), and the SDPA backend "
       "the bias path may use: default (LibTorch's choice without cuDNN's attention, whose per-shape plans cost "
       "tens of ms), auto (LibTorch's choice, cuDNN included), cudnn, efficient, flash or math (bias:math)",
       [](const std::string& v, ServerConfig* c) {
         absl::StatusOr<AttentionOptions> parsed = ParseAttentionOptions(v);
         if (!parsed.ok()) return absl::InvalidArgumentError(absl::StrCat("--gpu-attention: ", parsed.status().message()));
         c->gpu_attention = *parsed;
         return absl::OkStatus();
       },
       [](const ServerConfig& c) { return AttentionOptionsName(c.gpu_attention); }),
      CustomFlag<C>("int8-attention", "auto|float32|bfloat16",
       "under --dtype int8, the precision of attention's products (q.k, the relative terms, probabilities x v): "
       "auto is bfloat16 where the CPU has AVX512-BF16, except in the batches relserve's float32 tiles take (at most "
       "192 tokens on AVX-512 CPUs, with relserve's int8 GEMM), else float32; bfloat16 is refused on a CPU without it",
       [](const std::string& v, ServerConfig* c) {
         absl::StatusOr<Int8Attention> parsed = ParseInt8Attention(v);
         if (!parsed.ok()) return absl::InvalidArgumentError(absl::StrCat("--int8-attention: ", parsed.status().message()));
         c->int8_attention = *parsed;
         return absl::OkStatus();
       },
       [](const ServerConfig& c) { return std::string(Int8AttentionName(c.int8_attention)); }),
      CustomFlag<C>("int8-weight-bits", "auto|7|8", std::string(Int8WeightBitsHelp()),
       [](const std::string& v, ServerConfig* c) {
         absl::StatusOr<Int8WeightBits> parsed = ParseInt8WeightBits(v);
         if (!parsed.ok()) return absl::InvalidArgumentError(absl::StrCat("--int8-weight-bits: ", parsed.status().message()));
         c->int8_weight_bits = *parsed;
         return absl::OkStatus();
       },
       [](const ServerConfig& c) { return std::string(Int8WeightBitsName(c.int8_weight_bits)); }),
      BoolFlag("log-shape-times",
               "log the host time of forwards and their attention calls per (thread, batch, length): the first two "
               "of each shape on each worker and any much slower than its mean, so that cold shapes show",
               Field(&C::log_shape_times)),
      StringFlag("gpu-batch-sizes", "MODE",
                 "on a GPU, rounded: batch sizes rounded up to 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, ... (a few "
                 "shapes, all warmed up); exact: as formed",
                 Field(&C::gpu_batch_sizes), {"rounded", "exact"}),
      BoolFlag("warmup-workers",
               "with --warmup, on a GPU also warm every batch size and length up on each worker's own thread before "
               "reporting SERVING (per-thread library caches)",
               Field(&C::warmup_workers)),
      BoolFlag("auto-truncate",
               "cut over-long inputs to the maximum length instead of refusing them, in requests that do not say "
               "(a request's own truncate wins); true by default, as TEI 1.9's; false refuses them",
               Field(&C::auto_truncate)),
      BoolFlag("whole-input",
               "embed texts longer than the model's maximum whole, in windows whose pooled vectors are averaged, in "
               "Embed requests that do not say (a request's own whole_input wins)",
               Field(&C::whole_input)),
      IntFlag("window-overlap", "tokens each window of a text embedded whole repeats from the one before",
              Field(&C::window_overlap), 0),
      IntFlag("max-windows-per-request",
              "windows the texts of one Embed request (whole_input), or the documents of one chunked Rerank, may be "
              "split into",
              Field(&C::max_windows_per_request), 1),
      BoolFlag("rerank-chunking",
               "score a cross-encoder's documents that do not fit beside the query in windows (query + a run of the "
               "document), each document by its best window, in Rerank requests that do not say (a request's own "
               "chunk_documents wins)",
               Field(&C::rerank_chunking)),
      IntFlag("max-chunks-per-doc", "windows one document of a chunked Rerank may take at most (the rest is not scored)",
              Field(&C::max_chunks_per_doc), 1),
      IntFlag("rerank-chunk-overlap", "tokens each window of a chunked Rerank document repeats from the one before",
              Field(&C::rerank_chunk_overlap), 0),
      IntFlag("max-message-bytes", "largest request message", Field(&C::max_message_bytes), 1024),
      IntFlag("max-response-bytes",
              "largest response message: EmbedTokens requests whose answer would be larger are refused "
              "(INVALID_ARGUMENT) before computing; clients must accept messages this large",
              Field(&C::max_response_bytes), 1024),
      NumberFlag("shutdown-grace-seconds", "S", "on SIGTERM/SIGINT, how long in-flight calls may take to finish",
                 Field(&C::shutdown_grace_seconds), 0, std::numeric_limits<double>::infinity(), "a number >= 0"),
      NumberFlag("max-connection-age-seconds", "S",
                 "close client connections after about S seconds (GOAWAY; calls under way finish first), so "
                 "clients re-resolve and spread over new replicas (0: never)",
                 Field(&C::max_connection_age_seconds), 0, 1e6, "a number in [0, 1000000]"),
      BoolFlag("warmup", "run every model over its length buckets before reporting SERVING", Field(&C::warmup)),
      StringFlag("pooling", "MODE", "override every model's pooling: mean, cls, max, ... (empty: the model's)",
                 Field(&C::pooling)),
      StringFlag("sentencepiece-module", "FILE",
                 "the SentencePiece module (librelserve_sentencepiece.so) the tokenizers load (empty: beside the "
                 "binary, in ../lib, ../lib/relserve or its folder, else the build tree's)",
                 Field(&C::sentencepiece_module)),
      StringFlag("tls-cert", "FILE", "PEM certificate chain: serve gRPC over TLS only (needs --tls-key; empty: plaintext)",
                 Field(&C::tls_cert)),
      StringFlag("tls-key", "FILE", "PEM private key of --tls-cert", Field(&C::tls_key)),
      StringFlag("tls-client-ca", "FILE",
                 "PEM CA certificates: require client certificates signed by them (mutual TLS; needs --tls-cert)",
                 Field(&C::tls_client_ca)),
      CustomFlag<C>("api-key", "KEY",
       "clients must send \"authorization: Bearer KEY\" on every API call (gRPC and HTTP; not health checks); "
       "prefer RELSERVE_API_KEY or --api-key-file: a command line is visible to every user of the machine",
       [](const std::string& v, ServerConfig* c) {
         // Surrounding whitespace is no part of a key (a Secret written from a file ends in a
         // newline). The key is checked here, so that a bad one stops the start, and never quoted.
         const std::string key(absl::StripAsciiWhitespace(v));
         if (auto keys = ApiKeys::Create({key}, "--api-key"); !keys.ok()) return keys.status();
         c->api_key = key;
         return absl::OkStatus();
       },
       [](const ServerConfig&) { return std::string(); }),
      CustomFlag<C>("api-key-file", "FILE",
       "API keys, one per line (blank lines and surrounding whitespace ignored); several keys let clients move "
       "from an old key to a new one",
       [](const std::string& v, ServerConfig* c) {
         // An empty path would quietly leave the API open.
         if (v.empty()) return absl::InvalidArgumentError("--api-key-file: the path is empty");
         c->api_key_file = v;
         return absl::OkStatus();
       },
       [](const ServerConfig&) { return std::string(); }),
      BoolFlag("metrics-api-key-required", "/metrics needs the API key too (/healthz never does)",
               Field(&C::metrics_api_key_required)),
      BoolFlag("offline",
               "Hub models (org/repo) come from the Hugging Face cache only, never over the network (as "
               "HF_HUB_OFFLINE=1)",
               Field(&C::offline)),
  }, "int8-attention", CpuGemmFlags()), ServerFlagOptions());
  return kFlags;
}

}  // namespace

std::string FlagEnvironmentVariable(const std::string& flag) { return FlagVariableName("RELSERVE_", flag); }

std::map<std::string, std::string> RelserveEnvironment() { return EnvironmentWithPrefix("RELSERVE_"); }

std::vector<std::string> UnknownRelserveVariables(const std::map<std::string, std::string>& environment) {
  std::set<std::string> known = Flags().Variables();
  known.insert({"RELSERVE_NO_REEXEC", "RELSERVE_ALLOCATOR", "RELSERVE_MALLOC_DEFAULTS"});
  std::vector<std::string> unknown;
  for (const auto& [name, value] : environment) {
    if (name.rfind("RELSERVE_", 0) == 0 && known.count(name) == 0) unknown.push_back(name);
  }
  return unknown;
}

std::string ServerUsage() {
  return absl::StrCat("usage: relserve --model NAME=DIR|ORG/REPO[@REVISION] [--model ...] [flags]\n\n",
                      Flags().Help(ServerConfig()),
                      "\nEvery flag can also come from the environment as RELSERVE_ and its name in upper case with\n"
                      "dashes as underscores (the $VARIABLE after it above); the command line wins.\n"
                      "RELSERVE_MODEL holds a comma-separated list (embedder=/models/e,reranker=/models/r).\n");
}

absl::StatusOr<ServerConfig> ParseServerFlags(const std::vector<std::string>& args,
                                              const std::map<std::string, std::string>& environment) {
  ServerConfig config;
  ASSIGN_OR_RETURN(ParsedCommandLine parsed, Flags().Parse(args, environment, &config));
  if (parsed.help) return absl::FailedPreconditionError(ServerUsage());
  // Beside the flags, the one setting of the engines the environment alone gives.
  ASSIGN_OR_RETURN(config.allocator, AllocatorModeFromEnvironment(MapEnvironmentReader(environment)));
  // Where each flag given came from, for errors that involve two flags.
  std::map<std::string, std::string>& origin = parsed.origin;
  if (config.models.empty()) return absl::InvalidArgumentError("no --model given (nor RELSERVE_MODEL; see --help)");
  if (!config.served_model_name.empty()) {
    for (size_t i = 1; i < config.models.size(); ++i) {
      if (config.models[i].first == config.served_model_name) {
        return absl::InvalidArgumentError(absl::StrCat(origin["served-model-name"], ": \"", config.served_model_name,
                                                       "\" is the name of another model (--model ",
                                                       config.models[i].first, "=", config.models[i].second, ")"));
      }
    }
    config.models[0].first = config.served_model_name;
  }
  if (!config.tls_cert.empty() && config.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls-cert needs --tls-key (the certificate's private key)");
  }
  if (config.tls_cert.empty() && !config.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls-key needs --tls-cert (the certificate it belongs to)");
  }
  if (config.tls_cert.empty() && !config.tls_client_ca.empty()) {
    return absl::InvalidArgumentError("--tls-client-ca needs --tls-cert and --tls-key (mutual TLS is TLS first)");
  }
  if (!config.api_key.empty() && !config.api_key_file.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(origin["api-key"], " and ", origin["api-key-file"],
                                                   " both give API keys: use one of them"));
  }
  if (config.metrics_api_key_required && config.api_key.empty() && config.api_key_file.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(origin["metrics-api-key-required"],
                                                   " needs an API key (--api-key or --api-key-file)"));
  }
  return config;
}

}  // namespace relserve
