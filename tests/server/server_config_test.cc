#include "server/main/server_config.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/main/server_credentials.h"

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
  auto aged = ParseServerFlags({"--model", "a=/m/a", "--max-connection-age-seconds", "300"});
  ASSERT_TRUE(aged.ok()) << aged.status();
  EXPECT_EQ(aged->max_connection_age_seconds, 300);
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
      {{"--model", "a=/x", "--dtype", "int8"}, "--dtype"},
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

TEST(ServerConfigTest, HelpListsEveryFlagWithItsDefault) {
  auto r = ParseServerFlags({"--help"});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string usage(r.status().message());
  for (const char* flag : {"--model", "--grpc-address", "--metrics-port", "--workers-per-device", "--threads-per-worker",
                           "--max-batch-tokens", "--max-queue-delay-us", "--max-queue-sequences",
                           "--max-inputs-per-request", "--max-input-length", "--max-message-bytes", "--dtype",
                           "--shutdown-grace-seconds", "--length-buckets", "--tls-cert", "--tls-key",
                           "--tls-client-ca", "--max-connection-age-seconds"}) {
    EXPECT_THAT(usage, HasSubstr(flag));
  }
  EXPECT_THAT(usage, HasSubstr("(default: 0.0.0.0:50051)"));
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

// PEM files for MakeServerCredentials: only their framing is read here (gRPC parses them).
class ServerConfigCredentialsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "relserve-credentials-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    Write("cert.pem", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n");
    Write("key.pem", "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n");
    Write("empty.pem", "");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Write(const std::string& name, const std::string& text) { std::ofstream(path(name)) << text; }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  ServerConfig Config(const std::string& cert, const std::string& key, const std::string& ca = "") {
    ServerConfig c;
    c.tls_cert = cert.empty() ? "" : path(cert);
    c.tls_key = key.empty() ? "" : path(key);
    c.tls_client_ca = ca.empty() ? "" : path(ca);
    return c;
  }

  std::string dir_;
};

TEST_F(ServerConfigCredentialsTest, PlaintextWithoutCertificate) {
  auto c = MakeServerCredentials(ServerConfig{});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_NE(*c, nullptr);
}

TEST_F(ServerConfigCredentialsTest, ReadablePemFilesGiveCredentials) {
  auto tls = MakeServerCredentials(Config("cert.pem", "key.pem"));
  ASSERT_TRUE(tls.ok()) << tls.status();
  EXPECT_NE(*tls, nullptr);
  auto mutual = MakeServerCredentials(Config("cert.pem", "key.pem", "cert.pem"));
  ASSERT_TRUE(mutual.ok()) << mutual.status();
}

TEST_F(ServerConfigCredentialsTest, BadFilesNameTheirFlag) {
  struct Case {
    ServerConfig config;
    const char* message;
  };
  const std::vector<Case> cases = {
      {Config("missing.pem", "key.pem"), "--tls-cert: cannot read"},
      {Config("cert.pem", "missing.pem"), "--tls-key: cannot read"},
      {Config("cert.pem", "key.pem", "missing.pem"), "--tls-client-ca: cannot read"},
      {Config("empty.pem", "key.pem"), "--tls-cert: "},
      {Config("cert.pem", "cert.pem"), "--tls-key: "},  // a certificate where the key belongs
      {Config("cert.pem", "key.pem", "key.pem"), "--tls-client-ca: "},
  };
  for (const Case& c : cases) {
    auto r = MakeServerCredentials(c.config);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.message));
  }
}

TEST(ServerConfigTest, WorkersAndThreadsShareOutTheCpus) {
  auto d = ParseServerFlags({"--model", "a=/x"});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->workers_per_device, 0);  // automatic
  EXPECT_EQ(d->threads_per_worker, 0);
  struct Case {
    int cpus, workers, threads;
    int want_workers, want_threads;
  };
  for (const Case& c : std::vector<Case>{
           {1, 0, 0, 1, 1},    // both automatic: a single-threaded worker per CPU...
           {2, 0, 0, 2, 1},
           {4, 0, 0, 4, 1},
           {16, 0, 0, 4, 4},   // ...at most 4, sharing the CPUs
           {6, 0, 0, 4, 1},
           {8, 2, 0, 2, 4},    // workers given: the threads divide the CPUs
           {3, 4, 0, 4, 1},    // never below one thread
           {8, 0, 2, 4, 2},    // threads given: the workers divide the CPUs
           {2, 0, 4, 1, 4},
           {2, 3, 3, 3, 3},    // both given: as they are, even oversubscribed
           {0, 0, 0, 1, 1},    // an unknown CPU count counts as one
       }) {
    const auto r = ResolveCpuWorkers(c.cpus, c.workers, c.threads, "float32");
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->workers, c.want_workers) << c.cpus << " " << c.workers << " " << c.threads;
    EXPECT_EQ(r->threads, c.want_threads) << c.cpus << " " << c.workers << " " << c.threads;
  }
}

// Reduced precision runs one worker over every CPU (its oneDNN kernels are not safe to run
// concurrently); asking for more workers is refused, naming the flags.
TEST(ServerConfigTest, ReducedPrecisionRunsOneWorker) {
  for (const char* dtype : {"bfloat16", "float16"}) {
    auto a = ResolveCpuWorkers(8, 0, 0, dtype);
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->workers, 1);
    EXPECT_EQ(a->threads, 8);
    auto t = ResolveCpuWorkers(8, 1, 4, dtype);
    ASSERT_TRUE(t.ok());
    EXPECT_EQ(t->threads, 4);
    auto bad = ResolveCpuWorkers(8, 2, 0, dtype);
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(bad.status().message()), HasSubstr("--workers-per-device 2 with --dtype"));
  }
}

TEST(ServerConfigTest, DefaultLengthBucketsAreAboutTwelvePercentApart) {
  EXPECT_EQ(DefaultLengthBuckets(512), (std::vector<int32_t>{8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160,
                                                             192, 224, 256, 320, 384, 448, 512}));
  EXPECT_EQ(DefaultLengthBuckets(20), (std::vector<int32_t>{8, 16, 20}));
}

}  // namespace
}  // namespace relserve
