#include "server/main/server_config.h"

#include <cstdlib>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace relserve {
namespace {

using ::testing::HasSubstr;

TEST(ServerConfigTest, DefaultsAndRepeatedModels) {
  auto c = ParseServerFlags({"--model", "a=/m/a", "--model=/m/b/", "--max-batch-tokens", "4096", "--warmup=false"});
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->models.size(), 2u);
  EXPECT_EQ(c->models[0], (std::pair<std::string, std::string>{"a", "/m/a"}));
  EXPECT_EQ(c->models[1], (std::pair<std::string, std::string>{"b", "/m/b"}));  // bare DIR: its folder name
  EXPECT_EQ(c->max_batch_tokens, 4096);
  EXPECT_FALSE(c->warmup);
  EXPECT_EQ(c->grpc_address, "0.0.0.0:50051");
  EXPECT_EQ(c->metrics_port, 9090);
  EXPECT_EQ(c->max_queue_delay_us, 2000);
  EXPECT_EQ(c->batching, "bucketed");
  EXPECT_EQ(c->max_connection_age_seconds, 0);  // connections are not closed unless asked
  EXPECT_EQ(c->device, "cpu");
  // A device list: one copy of each model per item.
  auto listed = ParseServerFlags({"--model", "a=/m/a", "--device", "cuda:0,cuda:1"});
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->device, "cuda:0,cuda:1");
  auto aged = ParseServerFlags({"--model", "a=/m/a", "--max-connection-age-seconds", "300"});
  ASSERT_TRUE(aged.ok()) << aged.status();
  EXPECT_EQ(aged->max_connection_age_seconds, 300);
}

// A Hub id is kept as it is (resolved at start-up); bare, it is served under its full id
// org/repo without the revision (the repository's name is an alias, see ModelNameAliases).
TEST(ServerConfigTest, HubModelsAndOffline) {
  auto c = ParseServerFlags({"--model", "org/reranker-base@v2", "--model", "emb=BAAI/bge-small", "--offline"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->models[0], (std::pair<std::string, std::string>{"org/reranker-base", "org/reranker-base@v2"}));
  EXPECT_EQ(c->models[1], (std::pair<std::string, std::string>{"emb", "BAAI/bge-small"}));
  EXPECT_TRUE(c->offline);
  EXPECT_FALSE(ParseServerFlags({"--model", "a=/m/a"})->offline);
  auto env = ParseServerFlags({}, {{"RELSERVE_MODEL", "org/a,b=org/b@main"}, {"RELSERVE_OFFLINE", "true"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->models[0].first, "org/a");
  EXPECT_EQ(env->models[1], (std::pair<std::string, std::string>{"b", "org/b@main"}));
  EXPECT_TRUE(env->offline);
}

// --served-model-name (TEI's flag) names the first model, whatever --model says.
TEST(ServerConfigTest, ServedModelName) {
  auto c = ParseServerFlags({"--served-model-name", "embedder", "--model", "BAAI/bge-small", "--model", "r=/m/r"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->served_model_name, "embedder");
  EXPECT_EQ(c->models[0], (std::pair<std::string, std::string>{"embedder", "BAAI/bge-small"}));
  EXPECT_EQ(c->models[1].first, "r");
  auto env = ParseServerFlags({}, {{"RELSERVE_MODEL", "a=/m/a"}, {"RELSERVE_SERVED_MODEL_NAME", "tei"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->models[0].first, "tei");
  auto clash = ParseServerFlags({"--model", "a=/m/a", "--model", "b=/m/b", "--served-model-name", "b"});
  ASSERT_FALSE(clash.ok());
  EXPECT_EQ(clash.status().message(), "--served-model-name: \"b\" is the name of another model (--model b=/m/b)");
}

TEST(ServerConfigTest, AutoTruncateAndHttpRequestTimeout) {
  auto c = ParseServerFlags({"--model", "a=/m/a"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->auto_truncate);  // over-long inputs are cut unless a request says, as in TEI 1.9
  EXPECT_EQ(c->http_request_timeout, absl::Seconds(60));
  auto set = ParseServerFlags({"--model", "a=/m/a", "--auto-truncate", "--http-request-timeout", "1500ms"});
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_TRUE(set->auto_truncate);
  // --auto-truncate false, in either spelling or from the environment: refused as before TEI 1.9.
  for (const std::vector<std::string>& off :
       {std::vector<std::string>{"--model", "a=/m/a", "--auto-truncate", "false"},
        std::vector<std::string>{"--model", "a=/m/a", "--auto-truncate=false"}}) {
    auto refusing = ParseServerFlags(off);
    ASSERT_TRUE(refusing.ok()) << refusing.status();
    EXPECT_FALSE(refusing->auto_truncate);
  }
  auto from_env = ParseServerFlags({"--model", "a=/m/a"}, {{"RELSERVE_AUTO_TRUNCATE", "false"}});
  ASSERT_TRUE(from_env.ok()) << from_env.status();
  EXPECT_FALSE(from_env->auto_truncate);
  EXPECT_EQ(set->http_request_timeout, absl::Milliseconds(1500));
  auto seconds = ParseServerFlags({"--model", "a=/m/a", "--http-request-timeout=0"}, {{"RELSERVE_AUTO_TRUNCATE", "true"}});
  ASSERT_TRUE(seconds.ok()) << seconds.status();
  EXPECT_EQ(seconds->http_request_timeout, absl::ZeroDuration());  // no limit
  EXPECT_TRUE(seconds->auto_truncate);
  for (const char* bad : {"soon", "-1", "10 s"}) {
    auto r = ParseServerFlags({"--model", "a=/m/a", "--http-request-timeout", bad});
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("--http-request-timeout")) << bad;
  }
  EXPECT_THAT(ServerUsage(), HasSubstr("--http-request-timeout DURATION"));
  EXPECT_THAT(ServerUsage(), HasSubstr("(default: 60s)"));
}

TEST(ServerConfigTest, ErrorsNameTheFlag) {
  struct Case {
    std::vector<std::string> args;
    const char* message;
  };
  const std::vector<Case> cases = {
      {{}, "no --model"},
      {{"--model", "a=/x", "--model", "a=/y"}, "given twice"},
      {{"--model", "a=/x", "--max-batch-size", "0"}, "--max-batch-size"},
      {{"--model", "a=/x", "--max-batch-tokens", "lots"}, "--max-batch-tokens"},
      {{"--model", "a=/x", "--batching", "random"}, "--batching"},
      {{"--model", "a=/x", "--dtype", "int4"}, "--dtype"},
      {{"--model", "a=/x", "--device", "cpu,gpu"}, "\"gpu\" is not cpu, cuda or cuda:N"},
      {{"--model", "a=/x", "--device", "cpu,,cpu"}, "\"\" is not cpu, cuda or cuda:N"},
      {{"--model", "a=/x", "--device", "cpu,cuda:1"}, "the CPU and GPUs do not mix"},
      {{"--model", "a=/x", "--length-buckets", "32,16"}, "--length-buckets"},
      {{"--model", "a=/x", "--shutdown-grace-seconds", "-1"}, "--shutdown-grace-seconds"},
      {{"--model", "a=/x", "--max-connection-age-seconds", "-5"}, "--max-connection-age-seconds"},
      {{"--model", "a=/x", "--max-connection-age-seconds", "soon"}, "--max-connection-age-seconds"},
      {{"--model", "a=/x", "--frobnicate", "1"}, "unknown flag --frobnicate"},
      {{"--model"}, "needs a value"},
      {{"--model", "a=/x", "--tls-cert", "/c.pem"}, "--tls-cert needs --tls-key"},
      {{"--model", "a=/x", "--tls-key", "/k.pem"}, "--tls-key needs --tls-cert"},
      {{"--model", "a=/x", "--tls-client-ca", "/ca.pem"}, "--tls-client-ca needs --tls-cert"},
  };
  for (const Case& c : cases) {
    auto r = ParseServerFlags(c.args);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.message));
  }
}

TEST(ServerConfigTest, ApiKeyFlags) {
  auto none = ParseServerFlags({"--model", "a=/x"});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->api_key, "");
  EXPECT_EQ(none->api_key_file, "");
  EXPECT_FALSE(none->metrics_api_key_required);

  auto key = ParseServerFlags({"--model", "a=/x", "--api-key", " the-key\n", "--metrics-api-key-required"});
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(key->api_key, "the-key");  // surrounding whitespace is no part of a key
  EXPECT_TRUE(key->metrics_api_key_required);  // a bare boolean flag is true
  auto file = ParseServerFlags({"--model", "a=/x", "--api-key-file", "/keys", "--metrics-api-key-required", "false"});
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->api_key_file, "/keys");
  EXPECT_FALSE(file->metrics_api_key_required);
  auto last = ParseServerFlags({"--model", "a=/x", "--api-key=k", "--warmup"});  // bare at the end, too
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_TRUE(last->warmup);
}

TEST(ServerConfigTest, ApiKeyErrorsNameTheFlagAndNeverTheKey) {
  struct Case {
    std::vector<std::string> args;
    const char* message;
  };
  const std::vector<Case> cases = {
      {{"--model", "a=/x", "--api-key", "secret", "--api-key-file", "/keys"},
       "--api-key and --api-key-file both give API keys"},
      {{"--model", "a=/x", "--api-key", ""}, "--api-key: the API key is empty"},
      {{"--model", "a=/x", "--api-key", "secret with spaces"}, "--api-key: the API key holds a byte"},
      {{"--model", "a=/x", "--api-key", "secr\xc3\xa9t"}, "--api-key: the API key holds a byte"},
      {{"--model", "a=/x", "--api-key-file", ""}, "--api-key-file: the path is empty"},
      {{"--model", "a=/x", "--metrics-api-key-required"}, "--metrics-api-key-required needs an API key"},
      {{"--model", "a=/x", "--metrics-api-key-required", "maybe"}, "--metrics-api-key-required: \"maybe\" is not true or false"},
  };
  for (const Case& c : cases) {
    auto r = ParseServerFlags(c.args);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.message));
    EXPECT_THAT(std::string(r.status().message()), ::testing::Not(HasSubstr("secr")));
  }
}

TEST(ServerConfigTest, EnvironmentVariableNames) {
  EXPECT_EQ(FlagEnvironmentVariable("api-key"), "RELSERVE_API_KEY");
  EXPECT_EQ(FlagEnvironmentVariable("http-address"), "RELSERVE_HTTP_ADDRESS");
  EXPECT_EQ(FlagEnvironmentVariable("model"), "RELSERVE_MODEL");
  EXPECT_EQ(FlagEnvironmentVariable("max-queue-delay-us"), "RELSERVE_MAX_QUEUE_DELAY_US");
}

// Every flag can come from its variable; the command line wins, flag by flag.
TEST(ServerConfigTest, EnvironmentFillsInWhatTheCommandLineLeavesOut) {
  const std::map<std::string, std::string> env = {
      {"RELSERVE_MODEL", "embedder=/models/e, reranker=/models/r/,/models/plain"},
      {"RELSERVE_API_KEY", "key-from-a-secret\n"},
      {"RELSERVE_HTTP_ADDRESS", "127.0.0.1:0"},
      {"RELSERVE_MAX_BATCH_SIZE", "8"},
      {"RELSERVE_WARMUP", "false"},
      {"RELSERVE_METRICS_API_KEY_REQUIRED", "true"},
      {"RELSERVE_GRPC_ADDRESS", "0.0.0.0:1"},
  };
  auto c = ParseServerFlags({"--grpc-address", "127.0.0.1:7000", "--max-batch-size=16"}, env);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->models.size(), 3u);
  EXPECT_EQ(c->models[0], (std::pair<std::string, std::string>{"embedder", "/models/e"}));
  EXPECT_EQ(c->models[1], (std::pair<std::string, std::string>{"reranker", "/models/r"}));
  EXPECT_EQ(c->models[2], (std::pair<std::string, std::string>{"plain", "/models/plain"}));
  EXPECT_EQ(c->api_key, "key-from-a-secret");
  EXPECT_EQ(c->http_address, "127.0.0.1:0");
  EXPECT_FALSE(c->warmup);
  EXPECT_TRUE(c->metrics_api_key_required);
  EXPECT_EQ(c->grpc_address, "127.0.0.1:7000");  // the command line wins
  EXPECT_EQ(c->max_batch_size, 16);

  // A --model on the command line replaces the variable's whole list.
  auto own = ParseServerFlags({"--model", "only=/m/only"}, env);
  ASSERT_TRUE(own.ok()) << own.status();
  ASSERT_EQ(own->models.size(), 1u);
  EXPECT_EQ(own->models[0].first, "only");

  // An empty value is a value: the HTTP API can be turned off from the environment.
  auto off = ParseServerFlags({"--model", "a=/x"}, {{"RELSERVE_HTTP_ADDRESS", ""}});
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_EQ(off->http_address, "");

  // Other RELSERVE_ variables are no flags: ignored here, reported for a warning.
  const std::map<std::string, std::string> others = {{"RELSERVE_ALLOCATOR", "heap"},
                                                      {"RELSERVE_NO_REEXEC", "1"},
                                                      {"RELSERVE_API_KYE", "typo"},
                                                      {"RELSERVE_MAX_BATCH_SIZE", "4"},
                                                      {"HOME", "/root"}};
  auto ignored = ParseServerFlags({"--model", "a=/x"}, others);
  ASSERT_TRUE(ignored.ok()) << ignored.status();
  EXPECT_EQ(ignored->api_key, "");
  EXPECT_EQ(UnknownRelserveVariables(others), std::vector<std::string>{"RELSERVE_API_KYE"});
}

TEST(ServerConfigTest, EnvironmentErrorsNameTheVariable) {
  struct Case {
    std::map<std::string, std::string> env;
    std::vector<std::string> args;
    const char* message;
  };
  const std::vector<Case> cases = {
      {{{"RELSERVE_MAX_BATCH_SIZE", "lots"}}, {"--model", "a=/x"},
       "RELSERVE_MAX_BATCH_SIZE (environment): --max-batch-size: \"lots\" is not an integer >= 1"},
      {{{"RELSERVE_DTYPE", "int4"}}, {"--model", "a=/x"}, "RELSERVE_DTYPE (environment): --dtype"},
      {{{"RELSERVE_WARMUP", "yes"}}, {"--model", "a=/x"}, "RELSERVE_WARMUP (environment): --warmup: \"yes\" is not true or false"},
      {{{"RELSERVE_MODEL", "a=/x,,b=/y"}}, {}, "RELSERVE_MODEL (environment): item 2 of 3 is empty"},
      {{{"RELSERVE_MODEL", "a=/x,a=/y"}}, {}, "RELSERVE_MODEL (environment): --model: name \"a\" given twice"},
      {{{"RELSERVE_MODEL", ""}}, {}, "RELSERVE_MODEL (environment): item 1 of 1 is empty"},
      // An API key that is set but empty fails the start rather than leave the API open.
      {{{"RELSERVE_API_KEY", " \n"}}, {"--model", "a=/x"}, "RELSERVE_API_KEY (environment): --api-key: the API key is empty"},
      {{{"RELSERVE_API_KEY", "secret key"}}, {"--model", "a=/x"}, "RELSERVE_API_KEY (environment): --api-key: the API key holds"},
      {{{"RELSERVE_API_KEY", "secret"}}, {"--model", "a=/x", "--api-key-file", "/keys"},
       "RELSERVE_API_KEY and --api-key-file both give API keys"},
      {{{"RELSERVE_METRICS_API_KEY_REQUIRED", "true"}}, {"--model", "a=/x"},
       "RELSERVE_METRICS_API_KEY_REQUIRED needs an API key"},
      {{}, {}, "no --model given (nor RELSERVE_MODEL"},
  };
  for (const Case& c : cases) {
    auto r = ParseServerFlags(c.args, c.env);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.message));
    EXPECT_THAT(std::string(r.status().message()), ::testing::Not(HasSubstr("secret")));
  }
}

TEST(ServerConfigTest, RelserveEnvironmentReadsTheProcessEnvironment) {
  ASSERT_EQ(setenv("RELSERVE_MAX_QUEUE_DELAY_US", "123", 1), 0);
  ASSERT_EQ(setenv("NOT_RELSERVE_THING", "x", 1), 0);
  const auto env = RelserveEnvironment();
  unsetenv("RELSERVE_MAX_QUEUE_DELAY_US");
  unsetenv("NOT_RELSERVE_THING");
  EXPECT_EQ(env.count("NOT_RELSERVE_THING"), 0u);
  ASSERT_EQ(env.count("RELSERVE_MAX_QUEUE_DELAY_US"), 1u);
  auto c = ParseServerFlags({"--model", "a=/x"}, env);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->max_queue_delay_us, 123);
}

TEST(ServerConfigTest, HelpListsEveryFlagWithItsDefault) {
  auto r = ParseServerFlags({"--help"});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string usage(r.status().message());
  for (const char* flag : {"--model", "--grpc-address", "--metrics-port", "--workers-per-device", "--threads-per-worker",
                           "--max-batch-tokens", "--max-queue-delay-us", "--max-queue-sequences",
                           "--max-inputs-per-request", "--max-input-length", "--max-message-bytes", "--dtype",
                           "--shutdown-grace-seconds", "--length-buckets", "--tls-cert", "--tls-key",
                           "--tls-client-ca", "--max-connection-age-seconds", "--api-key", "--api-key-file",
                           "--metrics-api-key-required", "RELSERVE_API_KEY", "RELSERVE_MODEL"}) {
    EXPECT_THAT(usage, HasSubstr(flag));
  }
  EXPECT_THAT(usage, HasSubstr("(default: 0.0.0.0:50051)"));
  // Each flag with the variable it may come from instead.
  EXPECT_THAT(usage, HasSubstr("  --max-batch-size N  $RELSERVE_MAX_BATCH_SIZE\n"));
  // --help wins over whatever else is on the line.
  auto help = ParseServerFlags({"--frobnicate", "--max-batch-size", "x", "--help"});
  EXPECT_EQ(help.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(ServerConfigTest, TlsFlagsAreParsedAndOffByDefault) {
  auto plain = ParseServerFlags({"--model", "a=/x"});
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->tls_cert, "");
  EXPECT_EQ(plain->tls_client_ca, "");
  auto tls = ParseServerFlags(
      {"--model", "a=/x", "--tls-cert", "/c.pem", "--tls-key=/k.pem", "--tls-client-ca", "/ca.pem"});
  ASSERT_TRUE(tls.ok()) << tls.status();
  EXPECT_EQ(tls->tls_cert, "/c.pem");
  EXPECT_EQ(tls->tls_key, "/k.pem");
  EXPECT_EQ(tls->tls_client_ca, "/ca.pem");
}

// Workers and threads default to the automatic choice (server/batching/worker_count.h).
TEST(ServerConfigTest, WorkersAndThreadsAreAutomaticByDefault) {
  auto d = ParseServerFlags({"--model", "a=/x"});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->workers_per_device, 0);
  EXPECT_EQ(d->threads_per_worker, 0);
}

// --int8-attention: auto by default; each word, and a refusal naming the flag and the words.
TEST(ServerConfigTest, Int8AttentionFlag) {
  auto d = ParseServerFlags({"--model", "a=/x"});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->int8_attention, Int8Attention::kAuto);
  auto f = ParseServerFlags({"--model", "a=/x", "--dtype", "int8", "--int8-attention", "float32"});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->int8_attention, Int8Attention::kFloat32);
  auto b = ParseServerFlags({"--model", "a=/x", "--int8-attention=bfloat16"});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->int8_attention, Int8Attention::kBfloat16);
  auto bad = ParseServerFlags({"--model", "a=/x", "--int8-attention", "int4"});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("--int8-attention"));
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("auto, float32, bfloat16"));
}

// --int8-weight-bits: auto by default; each word, and a refusal naming the flag and the words.
TEST(ServerConfigTest, Int8WeightBitsFlag) {
  auto d = ParseServerFlags({"--model", "a=/x"});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->int8_weight_bits, Int8WeightBits::kAuto);
  auto eight = ParseServerFlags({"--model", "a=/x", "--dtype", "int8", "--int8-weight-bits", "8"});
  ASSERT_TRUE(eight.ok()) << eight.status();
  EXPECT_EQ(eight->int8_weight_bits, Int8WeightBits::kEight);
  auto seven = ParseServerFlags({"--model", "a=/x", "--int8-weight-bits=7"});
  ASSERT_TRUE(seven.ok()) << seven.status();
  EXPECT_EQ(seven->int8_weight_bits, Int8WeightBits::kSeven);
  auto bad = ParseServerFlags({"--model", "a=/x", "--int8-weight-bits", "4"});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("--int8-weight-bits"));
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("auto, 7, 8"));
}

// --float32-gemm: auto (packed where the CPU has AVX-512F) by default, blas, and a refusal naming
// the flag and the words.
TEST(ServerConfigTest, Float32GemmFlag) {
  auto d = ParseServerFlags({"--model", "a=/x"});
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->kernels.packed_float32_gemm);
  auto b = ParseServerFlags({"--model", "a=/x", "--float32-gemm", "blas"});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_FALSE(b->kernels.packed_float32_gemm);
  auto a = ParseServerFlags({"--model", "a=/x", "--float32-gemm=auto"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->kernels.packed_float32_gemm);
  auto bad = ParseServerFlags({"--model", "a=/x", "--float32-gemm", "mkl"});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("--float32-gemm"));
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("auto or blas"));
}

// --bfloat16-gemm: auto (packed in AMX tiles where the CPU has AMX-BF16) by default, onednn, and a
// refusal naming the flag and the words.
TEST(ServerConfigTest, BFloat16GemmFlag) {
  auto d = ParseServerFlags({"--model", "a=/x"});
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->kernels.packed_bfloat16_gemm);
  auto o = ParseServerFlags({"--model", "a=/x", "--bfloat16-gemm", "onednn"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_FALSE(o->kernels.packed_bfloat16_gemm);
  EXPECT_TRUE(o->kernels.packed_float32_gemm);  // the other precision's choice stays
  auto bad = ParseServerFlags({"--model", "a=/x", "--bfloat16-gemm", "blas"});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("--bfloat16-gemm"));
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("auto or onednn"));
}

// --int8-gemm: auto (relserve's AMX int8 GEMM where the CPU has AMX-INT8) by default, onednn, and a
// refusal naming the flag and the words.
TEST(ServerConfigTest, Int8GemmFlag) {
  auto d = ParseServerFlags({"--model", "a=/x"});
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->kernels.packed_int8_gemm);
  auto o = ParseServerFlags({"--model", "a=/x", "--int8-gemm", "onednn"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_FALSE(o->kernels.packed_int8_gemm);
  EXPECT_TRUE(o->kernels.packed_bfloat16_gemm);  // the other precisions' choices stay
  EXPECT_TRUE(o->kernels.packed_float32_gemm);
  auto bad = ParseServerFlags({"--model", "a=/x", "--int8-gemm", "fbgemm"});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("--int8-gemm"));
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("auto or onednn"));
}

// The SentencePiece module is a flag (so RELSERVE_SENTENCEPIECE_MODULE is its variable, no longer
// read inside the tokenizer); RELSERVE_ALLOCATOR, no flag, reaches the engines from the same
// environment, typed.
TEST(ServerConfigTest, SentencePieceModuleAndAllocatorFromTheEnvironment) {
  auto d = ParseServerFlags({"--model", "a=/x"}, {});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->sentencepiece_module, "");
  EXPECT_EQ(d->allocator, AllocatorMode::kCache);
  const std::map<std::string, std::string> env = {{"RELSERVE_SENTENCEPIECE_MODULE", "/opt/spm.so"},
                                                  {"RELSERVE_ALLOCATOR", "heap"}};
  auto e = ParseServerFlags({"--model", "a=/x"}, env);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->sentencepiece_module, "/opt/spm.so");
  EXPECT_EQ(e->allocator, AllocatorMode::kHeap);
  EXPECT_TRUE(UnknownRelserveVariables(env).empty());
  auto flag = ParseServerFlags({"--model", "a=/x", "--sentencepiece-module", "/lib/m.so"}, env);
  ASSERT_TRUE(flag.ok()) << flag.status();
  EXPECT_EQ(flag->sentencepiece_module, "/lib/m.so");
  auto old = ParseServerFlags({"--model", "a=/x"}, {{"RELSERVE_MALLOC_DEFAULTS", "1"}});
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->allocator, AllocatorMode::kSystem);
  auto bad = ParseServerFlags({"--model", "a=/x"}, {{"RELSERVE_ALLOCATOR", "jemalloc"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("RELSERVE_ALLOCATOR=\"jemalloc\""));
}

}  // namespace
}  // namespace relserve
