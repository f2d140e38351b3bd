#include "client/client_flags.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace relserve::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ClientFlagsTest, EmbedWithOptionsAndTexts) {
  auto c = ParseClientArgs({"embed", "--model", "m", "--normalize", "--dimensions=64", "text one", "text two"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->name, "embed");
  EXPECT_EQ(c->request.model, "m");
  EXPECT_TRUE(c->request.normalize);
  EXPECT_FALSE(c->request.truncate.has_value());  // not sent: the server decides
  EXPECT_EQ(c->request.truncation_direction, "");
  EXPECT_EQ(c->request.dimensions, 64);
  EXPECT_THAT(c->args, ElementsAre("text one", "text two"));
  EXPECT_EQ(c->connection.target, "127.0.0.1:50051");
  EXPECT_FALSE(c->connection.tls);
}

TEST(ClientFlagsTest, ConnectionFlagsMayComeBeforeTheSubcommand) {
  auto c = ParseClientArgs({"--target", "dns:///relserve:50051", "--deadline-ms", "250", "models"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->name, "models");
  EXPECT_EQ(c->connection.target, "dns:///relserve:50051");
  EXPECT_EQ(c->connection.deadline_ms, 250);
}

TEST(ClientFlagsTest, TlsFilesImplyTls) {
  auto c = ParseClientArgs({"health", "--ca-cert", "ca.pem", "--client-cert", "c.pem", "--client-key", "k.pem",
                            "--tls-server-name", "relserve.internal"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->connection.tls);
  EXPECT_EQ(c->connection.ca_cert, "ca.pem");
  EXPECT_EQ(c->connection.client_cert, "c.pem");
  EXPECT_EQ(c->connection.client_key, "k.pem");
  EXPECT_EQ(c->connection.tls_server_name, "relserve.internal");
  auto plain_tls = ParseClientArgs({"--tls", "health"});
  ASSERT_TRUE(plain_tls.ok());
  EXPECT_TRUE(plain_tls->connection.tls);
  EXPECT_EQ(plain_tls->connection.ca_cert, "");
}

TEST(ClientFlagsTest, RerankQueryAndDocuments) {
  auto c = ParseClientArgs({"rerank", "--query", "q", "--top-n", "2", "--return-documents", "d1", "d2", "d3"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->request.query, "q");
  EXPECT_EQ(c->request.top_n, 2);
  EXPECT_TRUE(c->request.return_documents);
  EXPECT_THAT(c->args, ElementsAre("d1", "d2", "d3"));
  auto from_stdin = ParseClientArgs({"rerank"});
  ASSERT_TRUE(from_stdin.ok()) << from_stdin.status();
  EXPECT_TRUE(from_stdin->args.empty());
}

TEST(ClientFlagsTest, HealthServiceAndQuiet) {
  auto c = ParseClientArgs({"health", "--service", "reranker", "--quiet"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->health.service, "reranker");
  EXPECT_TRUE(c->quiet);
  EXPECT_EQ(DefaultDeadlineMs("health"), 5000);
  EXPECT_EQ(DefaultDeadlineMs("embed"), 30000);
}

TEST(ClientFlagsTest, BenchDefaultsAndOptions) {
  auto d = ParseClientArgs({"bench"});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->bench.rpc, "embed");
  EXPECT_EQ(d->bench.concurrency, 8);
  EXPECT_EQ(d->bench.duration_s, 20);  // no --requests: 20 s
  EXPECT_EQ(d->bench.lengths, "log-uniform:8:512");
  EXPECT_EQ(d->bench.input, "tokens");
  EXPECT_EQ(d->bench.metrics_url, "");

  auto c = ParseClientArgs({"bench", "--rpc", "classify", "--concurrency", "3", "--requests", "50", "--warmup", "0.5",
                            "--inputs-per-request", "4", "--lengths", "uniform:10:20", "--seed", "9",
                            "--metrics-port", "9090", "--input", "text"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->bench.rpc, "classify");
  EXPECT_EQ(c->bench.concurrency, 3);
  EXPECT_EQ(c->bench.requests, 50);
  EXPECT_EQ(c->bench.duration_s, 0);  // --requests alone: no time limit
  EXPECT_DOUBLE_EQ(c->bench.warmup_s, 0.5);
  EXPECT_EQ(c->bench.inputs_per_request, 4);
  EXPECT_EQ(c->bench.lengths, "uniform:10:20");
  EXPECT_EQ(c->bench.seed, 9u);
  EXPECT_EQ(c->bench.input, "text");
  EXPECT_EQ(c->bench.metrics_url, "http://127.0.0.1:9090/metrics");

  EXPECT_EQ(c->bench.rate, 0);  // closed loop unless --rate
  auto open = ParseClientArgs({"bench", "--rate", "12.5", "--arrivals", "constant"});
  ASSERT_TRUE(open.ok()) << open.status();
  EXPECT_DOUBLE_EQ(open->bench.rate, 12.5);
  EXPECT_EQ(open->bench.arrivals, "constant");
  EXPECT_EQ(ParseClientArgs({"bench", "--rate", "5"})->bench.arrivals, "poisson");

  auto rerank = ParseClientArgs({"bench", "--rpc", "rerank"});
  ASSERT_TRUE(rerank.ok());
  EXPECT_EQ(rerank->bench.input, "text");  // Rerank takes text only
}

TEST(ClientFlagsTest, SwitchesTakeExplicitValues) {
  auto c = ParseClientArgs({"embed", "--normalize=false", "--truncate=true", "x"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->request.normalize);
  EXPECT_EQ(c->request.truncate, std::optional<bool>(true));
  auto refuse = ParseClientArgs({"embed", "--truncate=false", "--truncation-direction", "left", "x"});
  ASSERT_TRUE(refuse.ok()) << refuse.status();
  EXPECT_EQ(refuse->request.truncate, std::optional<bool>(false));
  EXPECT_EQ(refuse->request.truncation_direction, "left");
  auto bad = ParseClientArgs({"embed", "--truncation-direction", "Left", "x"});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ClientFlagsTest, DoubleDashEndsFlags) {
  auto c = ParseClientArgs({"embed", "--", "--not-a-flag", "text"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->args, ElementsAre("--not-a-flag", "text"));
}

TEST(ClientFlagsTest, LoadBalancingPolicyChoices) {
  auto c = ParseClientArgs({"models", "--load-balancing", "round_robin"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->connection.load_balancing, "round_robin");
  EXPECT_EQ(ParseClientArgs({"models"})->connection.load_balancing, "auto");
}

TEST(ClientFlagsTest, ApiKeyFromTheFlagElseTheEnvironment) {
  auto flag = ParseClientArgs({"models", "--api-key", " flag-key\n"}, ClientEnvironment("env-key"));
  ASSERT_TRUE(flag.ok()) << flag.status();
  EXPECT_EQ(flag->connection.api_key, "flag-key");  // the flag wins

  auto none = ParseClientArgs({"bench"}, ClientEnvironment(nullptr));
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->connection.api_key, "");
  auto env = ParseClientArgs({"bench"}, ClientEnvironment("env-key\n"));
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->connection.api_key, "env-key");
  auto blank = ParseClientArgs({"bench"}, ClientEnvironment(" \n"));  // a blank variable is no key
  ASSERT_TRUE(blank.ok()) << blank.status();
  EXPECT_EQ(blank->connection.api_key, "");

  auto empty = ParseClientArgs({"models", "--api-key", ""});
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(empty.status().message()), HasSubstr("--api-key"));
  EXPECT_THAT(Usage("embed"), HasSubstr("--api-key KEY  $RELSERVE_API_KEY\n"));
}

TEST(ClientFlagsTest, HelpWithAndWithoutSubcommand) {
  auto top = ParseClientArgs({"--help"});
  ASSERT_TRUE(top.ok()) << top.status();
  EXPECT_TRUE(top->help);
  const std::string usage = Usage();
  for (const char* s : {"embed", "embed-tokens", "rerank", "classify", "zero-shot", "tokenize", "models", "health", "bench",
                        "--target", "--deadline-ms", "--tls", "--ca-cert", "--client-cert", "--client-key",
                        "--tls-server-name", "--lengths", "--metrics-url", "--requests"}) {
    EXPECT_THAT(usage, HasSubstr(s));
  }
  auto bench = ParseClientArgs({"bench", "--help"});
  ASSERT_TRUE(bench.ok()) << bench.status();
  EXPECT_TRUE(bench->help);
  const std::string bench_usage = Usage("bench");
  EXPECT_THAT(bench_usage, HasSubstr("--concurrency"));
  EXPECT_THAT(bench_usage, HasSubstr("--target"));
  EXPECT_THAT(bench_usage, ::testing::Not(HasSubstr("--top-n")));
}

TEST(ClientFlagsTest, UsageErrorsNameTheProblem) {
  struct Case {
    std::vector<std::string> args;
    const char* message;
  };
  const std::vector<Case> cases = {
      {{}, "no subcommand"},
      {{"frobnicate"}, "unknown subcommand \"frobnicate\""},
      {{"embed", "--frobnicate", "x"}, "unknown flag --frobnicate"},
      {{"embed", "--model"}, "--model needs a value"},
      {{"embed", "--dimensions", "-3", "x"}, "--dimensions"},
      {{"embed", "--normalize=maybe", "x"}, "--normalize"},
      {{"embed", "--top-n", "3", "x"}, "--top-n does not apply to embed"},
      {{"rerank", "--normalize", "--query", "q", "d"}, "--normalize does not apply to rerank"},
      {{"rerank", "d1", "d2"}, "without --query"},
      {{"rerank", "--query", "q"}, "without documents"},
      {{"classify", "--pairs", "a", "b", "c"}, "even number"},
      {{"embed", "--pairs", "--ids", "1"}, "exclude each other"},
      {{"models", "extra"}, "unexpected argument"},
      {{"health", "--client-cert", "c.pem"}, "--client-cert and --client-key"},
      {{"bench", "--rpc", "tokenize"}, "--rpc"},
      {{"bench", "--concurrency", "0"}, "--concurrency"},
      {{"bench", "--duration", "soon"}, "--duration"},
      {{"bench", "--metrics-port", "70000"}, "--metrics-port"},
      {{"bench", "--metrics-url", "ftp://x/metrics"}, "--metrics-url"},
      {{"bench", "--load-balancing", "random"}, "--load-balancing"},
      {{"bench", "--rate", "-1"}, "--rate"},
      {{"bench", "--rate", "fast"}, "--rate"},
      {{"bench", "--rate", "5", "--arrivals", "bursty"}, "--arrivals"},
  };
  for (const Case& c : cases) {
    auto r = ParseClientArgs(c.args);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.message));
  }
}

}  // namespace
}  // namespace relserve::client
