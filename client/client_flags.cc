#include "client/client_flags.h"

#include <limits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "server/util/flag_table.h"
#include "server/util/status_macros.h"

namespace relserve::client {
namespace {

struct Subcommand {
  const char* name;
  const char* args;  // what the positional arguments are
  const char* help;
};

const std::vector<Subcommand>& Subcommands() {
  static const std::vector<Subcommand> kSubcommands = {
      {"embed", "[TEXT ...]", "Embed: one pooled vector per input"},
      {"embed-tokens", "[TEXT ...]", "EmbedTokens: per-token hidden states with ids and byte offsets"},
      {"rerank", "[--query Q DOC ...]", "Rerank: documents against a query through a cross-encoder, best first"},
      {"classify", "[TEXT ...]", "Classify: labels and scores per input (--pairs for text pairs)"},
      {"zero-shot", "--labels A,B,... [TEXT ...]",
       "ZeroShotClassify: each text against the candidate labels through an NLI model, best first"},
      {"ner", "[TEXT ...]", "ClassifyTokens: named entities (token classification), as transformers' pipeline"},
      {"tokenize", "[TEXT ...]", "Tokenize: ids, token types, offsets and pieces"},
      {"models", "", "ListModels: the served models"},
      {"health", "", "grpc.health.v1 Check: exit 0 when SERVING, 1 otherwise"},
      {"bench", "", "closed-loop load: throughput, latency percentiles, errors, padding ratio"},
  };
  return kSubcommands;
}

const std::vector<std::string> kInputs = {"embed", "embed-tokens", "classify", "tokenize"};
const std::vector<std::string> kRpcs = {"embed", "embed-tokens", "rerank", "classify", "zero-shot", "ner", "tokenize", "bench"};

using C = ClientCommand;
constexpr double kNoLimit = std::numeric_limits<double>::infinity();

// A switch: a bare --name, or --name=true|false; the help says its default.
Flag<C> Switch(const std::string& name, const std::string& help, FlagField<C, bool> field) {
  return BoolFlag<C>(name, help, std::move(field)).ValueName("").NoDefault();
}

// A switch whose absence leaves the choice to the server.
Flag<C> OptionalSwitch(const std::string& name, const std::string& help, std::optional<bool> RequestOptions::*field) {
  return CustomFlag<C>(name, "", help,
                       [name, field](const std::string& v, ClientCommand* c) {
                         bool x = false;
                         if (absl::Status s = ParseFlagBool(name, v, &x); !s.ok()) return s;
                         c->request.*field = x;
                         return absl::OkStatus();
                       })
      .Boolean();
}

// A TLS file flag: sets the file and turns TLS on.
Flag<C> TlsFile(const std::string& name, const std::string& value_name, const std::string& help,
                std::string ConnectionOptions::*field) {
  return CustomFlag<C>(name, value_name, help, [field](const std::string& v, ClientCommand* c) {
    c->connection.*field = v;
    c->connection.tls = true;
    return absl::OkStatus();
  });
}

FlagTableOptions ClientFlagOptions() {
  FlagTableOptions options;
  options.environment_prefix = "RELSERVE_";  // for the flags marked FromEnvironment: --api-key
  for (const Subcommand& s : Subcommands()) options.subcommands.push_back(s.name);
  return options;
}

// The flags in the order --help lists them. Those of every subcommand are the connection flags;
// the help of each says its default.
const FlagTable<ClientCommand>& Flags() {
  static const FlagTable<ClientCommand> kFlags(
      [] {
        std::vector<Flag<C>> connection = {
            StringFlag<C>("target", "HOST:PORT",
                          "the server (default 127.0.0.1:50051); any gRPC target: dns:///NAME:PORT, ipv4:A:P,B:P, "
                          "unix:PATH",
                          Field(&C::connection, &ConnectionOptions::target)),
            IntFlag<C, int64_t>("deadline-ms",
                                "deadline of each call (default: 5000 for health, 60000 for bench, else 30000)",
                                Field(&C::connection, &ConnectionOptions::deadline_ms), 1),
            Switch("tls", "connect with TLS (the system's root certificates unless --ca-cert)",
                   Field(&C::connection, &ConnectionOptions::tls)),
            TlsFile("ca-cert", "FILE", "PEM root certificates to verify the server with (implies --tls)",
                    &ConnectionOptions::ca_cert),
            TlsFile("client-cert", "FILE",
                    "PEM client certificate chain for mutual TLS (needs --client-key; implies --tls)",
                    &ConnectionOptions::client_cert),
            TlsFile("client-key", "FILE", "PEM private key of --client-cert", &ConnectionOptions::client_key),
            TlsFile("tls-server-name", "NAME",
                    "the name the server certificate must carry, when it is not the target's host (implies --tls)",
                    &ConnectionOptions::tls_server_name),
            StringFlag<C>("load-balancing", "POLICY",
                          "auto (round_robin for dns:/// and multi-address targets, else pick_first), pick_first or "
                          "round_robin",
                          Field(&C::connection, &ConnectionOptions::load_balancing),
                          {"auto", "pick_first", "round_robin"}),
            CustomFlag<C>("api-key", "KEY",
                          "send \"authorization: Bearer KEY\" with every call, for a server started with an API key "
                          "(default: $RELSERVE_API_KEY)",
                          [](const std::string& v, ClientCommand* c) {
                            c->connection.api_key = std::string(absl::StripAsciiWhitespace(v));
                            if (c->connection.api_key.empty()) {
                              return absl::InvalidArgumentError("--api-key: the key is empty");
                            }
                            return absl::OkStatus();
                          })
                .FromEnvironment(),
        };
        std::vector<Flag<C>> own = {
            // Requests.
            StringFlag<C>("model", "NAME", "the model to call (default: the server's default model)",
                          Field(&C::request, &RequestOptions::model))
                .For(kRpcs),
            Switch("normalize", "L2-normalise the embeddings", Field(&C::request, &RequestOptions::normalize))
                .For({"embed", "bench"}),
            OptionalSwitch("truncate",
                           "cut over-long inputs to the model's maximum instead of failing (--truncate=false: refuse "
                           "them even on a server with --auto-truncate; default: the server's choice)",
                           &RequestOptions::truncate)
                .For(kRpcs),
            StringFlag<C>("truncation-direction", "DIR", "which end of an over-long text is cut: right (default) or left",
                          Field(&C::request, &RequestOptions::truncation_direction), {"right", "left"})
                .For(kRpcs),
            IntFlag<C, int>("dimensions", "keep the first N values of each embedding, renormalised (Matryoshka)",
                            Field(&C::request, &RequestOptions::dimensions), 0)
                .For({"embed", "bench"}),
            StringFlag<C>("request-id", "ID", "echoed back in the response", Field(&C::request, &RequestOptions::request_id))
                .For({"embed"}),
            StringFlag<C>("query", "TEXT", "the query the documents (the arguments) are ranked against",
                          Field(&C::request, &RequestOptions::query))
                .For({"rerank"}),
            IntFlag<C, int>("top-n", "return only the best N documents", Field(&C::request, &RequestOptions::top_n), 0)
                .For({"rerank"}),
            Switch("return-documents", "echo each document's text in its result",
                   Field(&C::request, &RequestOptions::return_documents))
                .For({"rerank"}),
            Switch("raw-scores", "logits instead of sigmoid/softmax scores", Field(&C::request, &RequestOptions::raw_scores))
                .For({"rerank", "classify"}),
            IntFlag<C, int>("top-k", "only the K best labels per input", Field(&C::request, &RequestOptions::top_k), 0)
                .For({"classify"}),
            OptionalSwitch("whole-input",
                           "embed texts longer than the model whole, in windows averaged (--whole-input=false: cut or "
                           "refuse them; default: the server's choice)",
                           &RequestOptions::whole_input)
                .For({"embed"}),
            Switch("sparse", "also the model's sparse vector (SPLADE, bge-m3)", Field(&C::request, &RequestOptions::sparse))
                .For({"embed"}),
            Switch("multi-vector", "also the model's ColBERT token vectors (bge-m3)",
                   Field(&C::request, &RequestOptions::multi_vector))
                .For({"embed"}),
            CustomFlag<C>("labels", "A,B,...", "the candidate labels, comma-separated",
                          [](const std::string& v, ClientCommand* c) {
                            c->request.labels.clear();
                            for (std::string& l : SplitFlagListValue(v)) {
                              if (!l.empty()) c->request.labels.push_back(std::move(l));
                            }
                            if (c->request.labels.empty()) {
                              return absl::InvalidArgumentError(
                                  absl::StrCat("--labels: \"", v, "\" is not a comma-separated list of labels"));
                            }
                            return absl::OkStatus();
                          })
                .For({"zero-shot"}),
            StringFlag<C>("template", "TEXT", "the hypothesis, {} where the label goes (default \"This example is {}.\")",
                          Field(&C::request, &RequestOptions::hypothesis_template))
                .For({"zero-shot"}),
            Switch("multi-label", "score each label on its own (entailment against contradiction)",
                   Field(&C::request, &RequestOptions::multi_label))
                .For({"zero-shot"}),
            StringFlag<C>("aggregation-strategy", "S",
                          "how tokens become entities: none (one entry per token, the default), simple, first, "
                          "average or max",
                          Field(&C::request, &RequestOptions::aggregation_strategy),
                          {"none", "simple", "first", "average", "max"})
                .For({"ner"}),
            CustomFlag<C>("ignore-labels", "A,B,...", "labels left out, comma-separated (\"\" for none; default: O)",
                          [](const std::string& v, ClientCommand* c) {
                            std::vector<std::string> labels;
                            for (std::string& l : SplitFlagListValue(v)) {
                              if (!l.empty()) labels.push_back(std::move(l));
                            }
                            c->request.ignore_labels = std::move(labels);
                            return absl::OkStatus();
                          })
                .For({"ner"}),
            CustomFlag<C>("stride", "N",
                          "classify texts longer than the model in windows sharing N tokens (default: refuse them)",
                          [](const std::string& v, ClientCommand* c) {
                            int stride = 0;
                            if (!absl::SimpleAtoi(v, &stride) || stride < 0) {
                              return absl::InvalidArgumentError(
                                  absl::StrCat("--stride: \"", v, "\" is not an integer >= 0"));
                            }
                            c->request.stride = stride;
                            return absl::OkStatus();
                          })
                .For({"ner"}),
            Switch("pairs", "the arguments are text pairs: TEXT TEXT_PAIR TEXT TEXT_PAIR ...",
                   Field(&C::request, &RequestOptions::pairs))
                .For(kInputs),
            Switch("ids", "the arguments are token id lists (special tokens included), e.g. \"1,334,2\"",
                   Field(&C::request, &RequestOptions::ids))
                .For(kInputs),
            IntFlag<C, int>("batch-size", "standard-input lines per request (default 32)",
                            Field(&C::request, &RequestOptions::batch_size), 1)
                .For(kInputs),
            // Health.
            StringFlag<C>("service", "NAME", "a model name to check instead of the server as a whole",
                          Field(&C::health, &HealthOptions::service))
                .For({"health"}),
            Switch("quiet", "health: print nothing, only the exit code; bench: no progress lines", Field(&C::quiet))
                .For({"health", "bench"}),
            // Bench.
            StringFlag<C>("rpc", "RPC", "the RPC to load: embed (default), rerank or classify",
                          Field(&C::bench, &BenchOptions::rpc), {"embed", "rerank", "classify"})
                .For({"bench"}),
            IntFlag<C, int>("concurrency",
                            "callers, each with one request in flight (default 8; with --rate: the most in flight)",
                            Field(&C::bench, &BenchOptions::concurrency), 1)
                .For({"bench"}),
            NumberFlag<C>("duration", "S", "seconds to measure (default 20 unless --requests)",
                          Field(&C::bench, &BenchOptions::duration_s), 0, kNoLimit, "a number of seconds >= 0")
                .For({"bench"}),
            IntFlag<C, int64_t>("requests", "measure this many requests (with --duration: whichever ends first)",
                                Field(&C::bench, &BenchOptions::requests), 1)
                .For({"bench"}),
            NumberFlag<C>("warmup", "S", "seconds of load before measuring (default 2)",
                          Field(&C::bench, &BenchOptions::warmup_s), 0, kNoLimit, "a number of seconds >= 0")
                .For({"bench"}),
            NumberFlag<C>("rate", "R",
                          "open loop: start R requests a second whether or not earlier ones have finished (at most "
                          "--concurrency in flight); latency counts from each scheduled start (default 0: closed loop)",
                          Field(&C::bench, &BenchOptions::rate), 0, 1e6,
                          "a rate in requests per second within [0, 1000000]")
                .For({"bench"}),
            StringFlag<C>("arrivals", "KIND",
                          "with --rate: poisson (default; random gaps, as independent callers) or constant",
                          Field(&C::bench, &BenchOptions::arrivals), {"poisson", "constant"})
                .For({"bench"}),
            IntFlag<C, int>("inputs-per-request", "sequences per request (Rerank: documents) (default 1)",
                            Field(&C::bench, &BenchOptions::inputs_per_request), 1)
                .For({"bench"}),
            StringFlag<C>("lengths", "DIST",
                          "sequence lengths in tokens: fixed:N, uniform:A:B, log-uniform:A:B or file:PATH (default "
                          "log-uniform:8:512)",
                          Field(&C::bench, &BenchOptions::lengths))
                .For({"bench"}),
            StringFlag<C>("input", "KIND",
                          "tokens: token ids of the drawn lengths (default; embed, classify); text: that many words",
                          Field(&C::bench, &BenchOptions::input), {"tokens", "text"})
                .For({"bench"}),
            IntFlag<C, int>("vocab", "token ids are drawn from [5, N) (default 1000)", Field(&C::bench, &BenchOptions::vocab),
                            6)
                .For({"bench"}),
            IntFlag<C, uint64_t>("seed", "seed of the length and token draws (default 1)",
                                 Field(&C::bench, &BenchOptions::seed), 0)
                .For({"bench"}),
            StringFlag<C>("metrics-url", "URL", "the server's metrics (http://HOST:PORT/metrics), for its padding ratio",
                          Field(&C::bench, &BenchOptions::metrics_url))
                .For({"bench"}),
            CustomFlag<C>("metrics-port", "N", "short for --metrics-url http://127.0.0.1:N/metrics",
                          [](const std::string& v, ClientCommand* c) {
                            int port;
                            if (!absl::SimpleAtoi(v, &port) || port < 1 || port > 65535) {
                              return absl::InvalidArgumentError(absl::StrCat("--metrics-port: \"", v, "\" is not a port"));
                            }
                            c->bench.metrics_url = absl::StrCat("http://127.0.0.1:", port, "/metrics");
                            return absl::OkStatus();
                          })
                .For({"bench"}),
        };
        for (Flag<C>& f : connection) f.In("connection flags").NoDefault();
        for (Flag<C>& f : own) f.NoDefault();
        connection.insert(connection.end(), own.begin(), own.end());
        return connection;
      }(),
      ClientFlagOptions());
  return kFlags;
}

const Subcommand* FindSubcommand(const std::string& name) {
  for (const Subcommand& s : Subcommands()) {
    if (name == s.name) return &s;
  }
  return nullptr;
}

absl::Status Validate(ClientCommand& c) {
  const ConnectionOptions& conn = c.connection;
  if (conn.client_cert.empty() != conn.client_key.empty()) {
    return absl::InvalidArgumentError("--client-cert and --client-key go together (mutual TLS needs both)");
  }
  const RequestOptions& r = c.request;
  if (r.pairs && r.ids) return absl::InvalidArgumentError("--pairs and --ids exclude each other");
  if (r.pairs && c.args.size() % 2 != 0) {
    return absl::InvalidArgumentError("--pairs: expected an even number of arguments (TEXT TEXT_PAIR ...)");
  }
  if (c.name == "rerank" && !c.args.empty() && r.query.empty()) {
    return absl::InvalidArgumentError("rerank: documents given without --query");
  }
  if (c.name == "rerank" && c.args.empty() && !r.query.empty()) {
    return absl::InvalidArgumentError("rerank: --query given without documents");
  }
  if ((c.name == "models" || c.name == "health" || c.name == "bench") && !c.args.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(c.name, ": unexpected argument \"", c.args[0], "\""));
  }
  if (c.name == "bench") {
    BenchOptions& b = c.bench;
    if (b.duration_s == 0 && b.requests == 0) b.duration_s = 20;
    if (b.rpc == "rerank" && b.input == "tokens") b.input = "text";  // Rerank takes text only
    if (b.metrics_url.rfind("http://", 0) != 0 && !b.metrics_url.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("--metrics-url: \"", b.metrics_url, "\" is not an http:// URL"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

int64_t DefaultDeadlineMs(const std::string& subcommand) {
  if (subcommand == "health") return 5000;
  if (subcommand == "bench") return 60000;
  return 30000;
}

absl::StatusOr<ClientCommand> ParseClientArgs(const std::vector<std::string>& args,
                                              const std::map<std::string, std::string>& environment) {
  ClientCommand c;
  ASSIGN_OR_RETURN(ParsedCommandLine parsed, Flags().Parse(args, environment, &c));
  c.name = parsed.command;
  c.args = std::move(parsed.arguments);
  c.help = parsed.help;
  if (c.help) return c;
  if (absl::Status s = Validate(c); !s.ok()) return s;
  return c;
}

std::map<std::string, std::string> ClientEnvironment(const char* relserve_api_key) {
  std::map<std::string, std::string> out;
  if (relserve_api_key != nullptr && !absl::StripAsciiWhitespace(relserve_api_key).empty()) {
    out.emplace("RELSERVE_API_KEY", relserve_api_key);
  }
  return out;
}

std::string Usage(const std::string& subcommand) {
  std::string out;
  const Subcommand* only = FindSubcommand(subcommand);
  if (only == nullptr) {
    out = "usage: relserve-client SUBCOMMAND [flags] [arguments]\n\nsubcommands:\n";
    for (const Subcommand& s : Subcommands()) {
      absl::StrAppend(&out, "  ", s.name, std::string(14 - std::string(s.name).size(), ' '), s.help, "\n");
    }
    absl::StrAppend(&out,
                    "\nWithout arguments, embed, embed-tokens, classify and tokenize read JSON lines from standard\n"
                    "input ({\"text\": ...}, {\"text\": ..., \"text_pair\": ...} or {\"tokens\": [...]}), and\n"
                    "rerank reads {\"query\": ..., \"documents\": [...]}. Output is JSON, one object per line.\n"
                    "Exit codes: 0 success, 1 an RPC failed (health: not SERVING), 2 bad usage or input.\n"
                    "\n`relserve-client SUBCOMMAND --help` lists its flags.\n");
  } else {
    absl::StrAppend(&out, "usage: relserve-client ", only->name, " [flags]", *only->args ? " " : "", only->args, "\n  ",
                    only->help, "\n");
  }
  absl::StrAppend(&out, "\n", Flags().Help(ClientCommand(), only == nullptr ? "" : only->name));
  return out;
}

}  // namespace relserve::client
