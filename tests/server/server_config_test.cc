#include "server/main/server_config.h"

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
      {{"--model", "a=/x", "--frobnicate", "1"}, "unknown flag --frobnicate"},
      {{"--model"}, "needs a value"},
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
                           "--shutdown-grace-seconds", "--length-buckets"}) {
    EXPECT_THAT(usage, HasSubstr(flag));
  }
  EXPECT_THAT(usage, HasSubstr("(default: 0.0.0.0:50051)"));
}

TEST(ServerConfigTest, DefaultLengthBucketsAreAboutTwelvePercentApart) {
  EXPECT_EQ(DefaultLengthBuckets(512), (std::vector<int32_t>{8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160,
                                                             192, 224, 256, 320, 384, 448, 512}));
  EXPECT_EQ(DefaultLengthBuckets(20), (std::vector<int32_t>{8, 16, 20}));
}

}  // namespace
}  // namespace relserve
