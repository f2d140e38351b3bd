#include "client/client_flags.h"

#include <algorithm>
#include <functional>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

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
      {"tokenize", "[TEXT ...]", "Tokenize: ids, token types, offsets and pieces"},
      {"models", "", "ListModels: the served models"},
      {"health", "", "grpc.health.v1 Check: exit 0 when SERVING, 1 otherwise"},
      {"bench", "", "closed-loop load: throughput, latency percentiles, errors, padding ratio"},
  };
  return kSubcommands;
}

constexpr const char* kAll = "*";
constexpr const char* kInputs = "embed,embed-tokens,classify,tokenize";
constexpr const char* kRpcs = "embed,embed-tokens,rerank,classify,zero-shot,tokenize,bench";

struct Flag {
  const char* name;
  const char* value_name;  // "" for a switch (--name, or --name=true|false)
  const char* commands;    // comma-separated subcommands, or "*"
  const char* help;
  std::function<absl::Status(const std::string&, ClientCommand*)> set;
};

absl::Status Invalid(const std::string& flag, const std::string& value, const std::string& expected) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, ": \"", value, "\" is not ", expected));
}

// Setters for a field of one of ClientCommand's option structs.
template <typename Options, typename T>
std::function<absl::Status(const std::string&, ClientCommand*)> Int(const char* name, Options ClientCommand::*part,
                                                                    T Options::*field, int64_t min) {
  return [=](const std::string& v, ClientCommand* c) {
    int64_t x;
    if (!absl::SimpleAtoi(v, &x) || x < min) return Invalid(name, v, absl::StrCat("an integer >= ", min));
    (c->*part).*field = static_cast<T>(x);
    return absl::OkStatus();
  };
}

template <typename Options>
std::function<absl::Status(const std::string&, ClientCommand*)> Seconds(const char* name, Options ClientCommand::*part,
                                                                        double Options::*field) {
  return [=](const std::string& v, ClientCommand* c) {
    double x;
    if (!absl::SimpleAtod(v, &x) || x < 0) return Invalid(name, v, "a number of seconds >= 0");
    (c->*part).*field = x;
    return absl::OkStatus();
  };
}

template <typename Options>
std::function<absl::Status(const std::string&, ClientCommand*)> String(
    const char* name, Options ClientCommand::*part, std::string Options::*field, std::vector<std::string> allowed = {}) {
  return [=](const std::string& v, ClientCommand* c) {
    if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), v) == allowed.end()) {
      return Invalid(name, v, absl::StrCat("one of ", absl::StrJoin(allowed, ", ")));
    }
    (c->*part).*field = v;
    return absl::OkStatus();
  };
}

template <typename Options>
std::function<absl::Status(const std::string&, ClientCommand*)> Switch(const char* name, Options ClientCommand::*part,
                                                                       bool Options::*field) {
  return [=](const std::string& v, ClientCommand* c) {
    if (v != "true" && v != "false") return Invalid(name, v, "true or false");
    (c->*part).*field = v == "true";
    return absl::OkStatus();
  };
}

// A TLS file flag: sets the file and turns TLS on.
std::function<absl::Status(const std::string&, ClientCommand*)> TlsFile(std::string ConnectionOptions::*field) {
  return [=](const std::string& v, ClientCommand* c) {
    c->connection.*field = v;
    c->connection.tls = true;
    return absl::OkStatus();
  };
}

const std::vector<Flag>& Flags() {
  using C = ClientCommand;
  static const std::vector<Flag> kFlags = {
      // Connection.
      {"target", "HOST:PORT", kAll,
       "the server (default 127.0.0.1:50051); any gRPC target: dns:///NAME:PORT, ipv4:A:P,B:P, unix:PATH",
       String("target", &C::connection, &ConnectionOptions::target)},
      {"deadline-ms", "N", kAll, "deadline of each call (default: 5000 for health, 60000 for bench, else 30000)",
       Int("deadline-ms", &C::connection, &ConnectionOptions::deadline_ms, 1)},
      {"tls", "", kAll, "connect with TLS (the system's root certificates unless --ca-cert)",
       Switch("tls", &C::connection, &ConnectionOptions::tls)},
      {"ca-cert", "FILE", kAll, "PEM root certificates to verify the server with (implies --tls)",
       TlsFile(&ConnectionOptions::ca_cert)},
      {"client-cert", "FILE", kAll, "PEM client certificate chain for mutual TLS (needs --client-key; implies --tls)",
       TlsFile(&ConnectionOptions::client_cert)},
      {"client-key", "FILE", kAll, "PEM private key of --client-cert", TlsFile(&ConnectionOptions::client_key)},
      {"tls-server-name", "NAME", kAll,
       "the name the server certificate must carry, when it is not the target's host (implies --tls)",
       TlsFile(&ConnectionOptions::tls_server_name)},
      {"load-balancing", "POLICY", kAll,
       "auto (round_robin for dns:/// and multi-address targets, else pick_first), pick_first or round_robin",
       String("load-balancing", &C::connection, &ConnectionOptions::load_balancing,
              {"auto", "pick_first", "round_robin"})},
      {"api-key", "KEY", kAll,
       "send \"authorization: Bearer KEY\" with every call, for a server started with an API key "
       "(default: $RELSERVE_API_KEY)",
       [](const std::string& v, ClientCommand* c) {
         c->connection.api_key = std::string(absl::StripAsciiWhitespace(v));
         if (c->connection.api_key.empty()) return absl::InvalidArgumentError("--api-key: the key is empty");
         return absl::OkStatus();
       }},
      // Requests.
      {"model", "NAME", kRpcs, "the model to call (default: the server's default model)",
       String("model", &C::request, &RequestOptions::model)},
      {"normalize", "", "embed,bench", "L2-normalise the embeddings",
       Switch("normalize", &C::request, &RequestOptions::normalize)},
      {"truncate", "", kRpcs,
       "cut over-long inputs to the model's maximum instead of failing (--truncate=false: refuse them even on a "
       "server with --auto-truncate; default: the server's choice)",
       [](const std::string& v, ClientCommand* c) {
         if (v != "true" && v != "false") return Invalid("truncate", v, "true or false");
         c->request.truncate = v == "true";
         return absl::OkStatus();
       }},
      {"truncation-direction", "DIR", kRpcs, "which end of an over-long text is cut: right (default) or left",
       String("truncation-direction", &C::request, &RequestOptions::truncation_direction, {"right", "left"})},
      {"dimensions", "N", "embed,bench", "keep the first N values of each embedding, renormalised (Matryoshka)",
       Int("dimensions", &C::request, &RequestOptions::dimensions, 0)},
      {"request-id", "ID", "embed", "echoed back in the response",
       String("request-id", &C::request, &RequestOptions::request_id)},
      {"query", "TEXT", "rerank", "the query the documents (the arguments) are ranked against",
       String("query", &C::request, &RequestOptions::query)},
      {"top-n", "N", "rerank", "return only the best N documents", Int("top-n", &C::request, &RequestOptions::top_n, 0)},
      {"return-documents", "", "rerank", "echo each document's text in its result",
       Switch("return-documents", &C::request, &RequestOptions::return_documents)},
      {"raw-scores", "", "rerank,classify", "logits instead of sigmoid/softmax scores",
       Switch("raw-scores", &C::request, &RequestOptions::raw_scores)},
      {"top-k", "N", "classify", "only the K best labels per input", Int("top-k", &C::request, &RequestOptions::top_k, 0)},
      {"whole-input", "", "embed",
       "embed texts longer than the model whole, in windows averaged (--whole-input=false: cut or refuse them; "
       "default: the server's choice)",
       [](const std::string& v, ClientCommand* c) {
         if (v != "true" && v != "false") return Invalid("whole-input", v, "true or false");
         c->request.whole_input = v == "true";
         return absl::OkStatus();
       }},
      {"sparse", "", "embed", "also the model's sparse vector (SPLADE, bge-m3)",
       Switch("sparse", &C::request, &RequestOptions::sparse)},
      {"multi-vector", "", "embed", "also the model's ColBERT token vectors (bge-m3)",
       Switch("multi-vector", &C::request, &RequestOptions::multi_vector)},
      {"labels", "A,B,...", "zero-shot", "the candidate labels, comma-separated",
       [](const std::string& v, ClientCommand* c) {
         c->request.labels.clear();
         for (absl::string_view l : absl::StrSplit(v, ',')) {
           absl::string_view stripped = absl::StripAsciiWhitespace(l);
           if (!stripped.empty()) c->request.labels.emplace_back(stripped);
         }
         if (c->request.labels.empty()) return Invalid("labels", v, "a comma-separated list of labels");
         return absl::OkStatus();
       }},
      {"template", "TEXT", "zero-shot", "the hypothesis, {} where the label goes (default \"This example is {}.\")",
       String("template", &C::request, &RequestOptions::hypothesis_template)},
      {"multi-label", "", "zero-shot", "score each label on its own (entailment against contradiction)",
       Switch("multi-label", &C::request, &RequestOptions::multi_label)},
      {"pairs", "", kInputs, "the arguments are text pairs: TEXT TEXT_PAIR TEXT TEXT_PAIR ...",
       Switch("pairs", &C::request, &RequestOptions::pairs)},
      {"ids", "", kInputs, "the arguments are token id lists (special tokens included), e.g. \"1,334,2\"",
       Switch("ids", &C::request, &RequestOptions::ids)},
      {"batch-size", "N", kInputs, "standard-input lines per request (default 32)",
       Int("batch-size", &C::request, &RequestOptions::batch_size, 1)},
      // Health.
      {"service", "NAME", "health", "a model name to check instead of the server as a whole",
       String("service", &C::health, &HealthOptions::service)},
      {"quiet", "", "health,bench", "health: print nothing, only the exit code; bench: no progress lines",
       [](const std::string& v, ClientCommand* c) {
         if (v != "true" && v != "false") return Invalid("quiet", v, "true or false");
         c->quiet = v == "true";
         return absl::OkStatus();
       }},
      // Bench.
      {"rpc", "RPC", "bench", "the RPC to load: embed (default), rerank or classify",
       String("rpc", &C::bench, &BenchOptions::rpc, {"embed", "rerank", "classify"})},
      {"concurrency", "N", "bench", "callers, each with one request in flight (default 8; with --rate: the most in flight)",
       Int("concurrency", &C::bench, &BenchOptions::concurrency, 1)},
      {"duration", "S", "bench", "seconds to measure (default 20 unless --requests)",
       Seconds("duration", &C::bench, &BenchOptions::duration_s)},
      {"requests", "N", "bench", "measure this many requests (with --duration: whichever ends first)",
       Int("requests", &C::bench, &BenchOptions::requests, 1)},
      {"warmup", "S", "bench", "seconds of load before measuring (default 2)",
       Seconds("warmup", &C::bench, &BenchOptions::warmup_s)},
      {"rate", "R", "bench",
       "open loop: start R requests a second whether or not earlier ones have finished (at most --concurrency "
       "in flight); latency counts from each scheduled start (default 0: closed loop)",
       [](const std::string& v, ClientCommand* c) {
         double x;
         if (!absl::SimpleAtod(v, &x) || !(x >= 0) || x > 1e6) return Invalid("rate", v, "a rate in requests per second within [0, 1000000]");
         c->bench.rate = x;
         return absl::OkStatus();
       }},
      {"arrivals", "KIND", "bench", "with --rate: poisson (default; random gaps, as independent callers) or constant",
       String("arrivals", &C::bench, &BenchOptions::arrivals, {"poisson", "constant"})},
      {"inputs-per-request", "N", "bench", "sequences per request (Rerank: documents) (default 1)",
       Int("inputs-per-request", &C::bench, &BenchOptions::inputs_per_request, 1)},
      {"lengths", "DIST", "bench",
       "sequence lengths in tokens: fixed:N, uniform:A:B, log-uniform:A:B or file:PATH (default log-uniform:8:512)",
       String("lengths", &C::bench, &BenchOptions::lengths)},
      {"input", "KIND", "bench",
       "tokens: token ids of the drawn lengths (default; embed, classify); text: that many words",
       String("input", &C::bench, &BenchOptions::input, {"tokens", "text"})},
      {"vocab", "N", "bench", "token ids are drawn from [5, N) (default 1000)",
       Int("vocab", &C::bench, &BenchOptions::vocab, 6)},
      {"seed", "N", "bench", "seed of the length and token draws (default 1)",
       Int("seed", &C::bench, &BenchOptions::seed, 0)},
      {"metrics-url", "URL", "bench", "the server's metrics (http://HOST:PORT/metrics), for its padding ratio",
       String("metrics-url", &C::bench, &BenchOptions::metrics_url)},
      {"metrics-port", "N", "bench", "short for --metrics-url http://127.0.0.1:N/metrics",
       [](const std::string& v, ClientCommand* c) {
         int port;
         if (!absl::SimpleAtoi(v, &port) || port < 1 || port > 65535) return Invalid("metrics-port", v, "a port");
         c->bench.metrics_url = absl::StrCat("http://127.0.0.1:", port, "/metrics");
         return absl::OkStatus();
       }},
  };
  return kFlags;
}

bool Applies(const Flag& f, const std::string& command) {
  if (std::string(f.commands) == kAll) return true;
  for (absl::string_view c : absl::StrSplit(f.commands, ',')) {
    if (c == command) return true;
  }
  return false;
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

absl::StatusOr<ClientCommand> ParseClientArgs(const std::vector<std::string>& args) {
  ClientCommand c;
  // The subcommand is the first argument that is neither a flag nor a flag's value; flags
  // before it are checked once it is known.
  std::vector<std::pair<const Flag*, std::string>> given;
  bool flags_done = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (!flags_done && (a == "--help" || a == "-h")) {
      c.help = true;
      continue;
    }
    if (!flags_done && a == "--") {
      flags_done = true;
      continue;
    }
    if (flags_done || a.rfind("--", 0) != 0 || a == "-") {
      if (c.name.empty()) {
        if (FindSubcommand(a) == nullptr) {
          return absl::InvalidArgumentError(absl::StrCat("unknown subcommand \"", a, "\" (see --help)"));
        }
        c.name = a;
      } else {
        c.args.push_back(a);
      }
      continue;
    }
    std::string name = a.substr(2), value;
    bool has_value = false;
    if (const auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    const Flag* flag = nullptr;
    for (const Flag& f : Flags()) {
      if (name == f.name) flag = &f;
    }
    if (flag == nullptr) return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name, " (see --help)"));
    if (!has_value) {
      if (*flag->value_name == '\0') {
        value = "true";
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
      }
    }
    given.emplace_back(flag, value);
  }
  if (c.name.empty()) {
    if (c.help) return c;
    return absl::InvalidArgumentError("no subcommand given (see --help)");
  }
  for (const auto& [flag, value] : given) {
    if (!Applies(*flag, c.name)) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag->name, " does not apply to ", c.name));
    }
    if (absl::Status s = flag->set(value, &c); !s.ok()) return s;
  }
  if (c.help) return c;
  if (absl::Status s = Validate(c); !s.ok()) return s;
  return c;
}

void ApplyApiKeyFromEnvironment(const char* relserve_api_key, ClientCommand* command) {
  if (!command->connection.api_key.empty() || relserve_api_key == nullptr) return;
  command->connection.api_key = std::string(absl::StripAsciiWhitespace(relserve_api_key));
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
  for (const char* section : {"connection", "subcommand"}) {
    const bool connection = std::string(section) == "connection";
    std::string lines;
    for (const Flag& f : Flags()) {
      const bool common = std::string(f.commands) == kAll;
      if (common != connection) continue;
      if (only != nullptr && !Applies(f, only->name)) continue;
      absl::StrAppend(&lines, "  --", f.name, *f.value_name ? " " : "", f.value_name, "\n      ", f.help,
                      only == nullptr && !common ? absl::StrCat(" [", f.commands, "]") : "", "\n");
    }
    if (!lines.empty()) absl::StrAppend(&out, "\n", connection ? "connection flags" : "flags", ":\n", lines);
  }
  return out;
}

}  // namespace relserve::client
