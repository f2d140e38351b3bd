#ifndef RELSERVE_CLIENT_CLIENT_FLAGS_H_
#define RELSERVE_CLIENT_CLIENT_FLAGS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace relserve::client {

// How to reach the server; common to every subcommand.
struct ConnectionOptions {
  std::string target = "127.0.0.1:50051";
  int64_t deadline_ms = 0;  // 0: the subcommand's default (DefaultDeadlineMs)
  bool tls = false;         // set by --tls and implied by every other TLS flag
  std::string ca_cert;      // PEM roots; empty with TLS: the system's roots
  std::string client_cert;  // mutual TLS: PEM certificate chain ...
  std::string client_key;   // ... and its private key
  std::string tls_server_name;  // the name the server's certificate must carry, if not the target's host
  std::string load_balancing = "auto";  // auto, pick_first, round_robin
  // Sent as "authorization: Bearer KEY" with every call; "" sends none. --api-key, else the
  // environment's RELSERVE_API_KEY (ClientEnvironment).
  std::string api_key;
};

// The options of the request messages (proto/relserve/v1/encoder.proto) and of where inputs
// come from.
struct RequestOptions {
  std::string model;  // "": the server's default model
  bool normalize = false;
  std::optional<bool> truncate;  // unset: not sent, so the server's --auto-truncate decides
  std::string truncation_direction;  // "", "right" or "left"
  int dimensions = 0;
  std::string request_id;
  int top_n = 0;
  bool return_documents = false;
  bool raw_scores = false;
  int top_k = 0;
  std::string query;     // rerank: with documents as arguments
  bool pairs = false;    // arguments are TEXT TEXT_PAIR, two at a time
  bool ids = false;      // arguments are token id lists
  int batch_size = 32;   // standard-input lines per request
  // embed: texts longer than the model embedded whole (unset: the server's --whole-input), and
  // the sparse and multi-vector outputs too.
  std::optional<bool> whole_input;
  bool sparse = false;
  bool multi_vector = false;
  // zero-shot: the candidate labels, the hypothesis template ("": the server's default) and
  // whether the labels are scored each on its own.
  std::vector<std::string> labels;
  std::string hypothesis_template;
  bool multi_label = false;
  // ner: the pipeline's aggregation_strategy ("": the RPC's default, none), the labels left out
  // (unset: the server's ["O"]) and the stride of windows over texts longer than the model.
  std::string aggregation_strategy;
  std::optional<std::vector<std::string>> ignore_labels;
  std::optional<int> stride;
};

struct HealthOptions {
  std::string service;  // "": the server as a whole
};

struct BenchOptions {
  std::string rpc = "embed";  // embed, rerank, classify
  int concurrency = 8;
  double duration_s = 0;  // 0 with requests == 0: 20 s
  int64_t requests = 0;   // > 0: stop after this many measured requests
  double warmup_s = 2;
  int inputs_per_request = 1;
  std::string lengths = "log-uniform:8:512";
  std::string input = "tokens";  // tokens (ids of the drawn lengths) or text (words)
  int vocab = 1000;              // token ids are drawn from [5, vocab)
  uint64_t seed = 1;
  std::string metrics_url;  // the server's /metrics, scraped before and after the run
  // > 0: open loop. Requests start at this rate (per second) on the `arrivals` schedule
  // (poisson or constant), with at most `concurrency` in flight; latency counts from each
  // request's scheduled start. 0: closed loop.
  double rate = 0;
  std::string arrivals = "poisson";
};

// One command line of relserve-client, parsed: `relserve-client SUBCOMMAND [flags] [args]`
// (flags may also come before the subcommand).
struct ClientCommand {
  std::string name;  // embed, embed-tokens, rerank, classify, tokenize, models, health, bench
  ConnectionOptions connection;
  RequestOptions request;
  HealthOptions health;
  BenchOptions bench;
  bool quiet = false;              // health: print nothing; bench: no progress lines
  std::vector<std::string> args;   // the positional arguments after the subcommand
  bool help = false;               // --help: print Usage(name) and exit 0
};

// Parses argv after the program name (server/util/flag_table.h), then `environment` for the
// flags that read it: --api-key from RELSERVE_API_KEY. Errors are INVALID_ARGUMENT naming the
// flag (and the variable, for a value from the environment).
absl::StatusOr<ClientCommand> ParseClientArgs(const std::vector<std::string>& args,
                                              const std::map<std::string, std::string>& environment = {});

// The environment ParseClientArgs reads, from `relserve_api_key` (the process's
// RELSERVE_API_KEY, null when unset). A key is taken as the server takes it: surrounding
// whitespace (a Secret's trailing newline) is dropped, and a blank one counts as unset.
std::map<std::string, std::string> ClientEnvironment(const char* relserve_api_key);

// The usage text: every subcommand with its flags, or (for a subcommand) its own flags.
std::string Usage(const std::string& subcommand = "");

// The deadline a command gets without --deadline-ms: 5 s for health (a health check must be
// quick), 60 s per request for bench (as the serving benchmark always had), 30 s otherwise.
int64_t DefaultDeadlineMs(const std::string& subcommand);

}  // namespace relserve::client

#endif  // RELSERVE_CLIENT_CLIENT_FLAGS_H_
