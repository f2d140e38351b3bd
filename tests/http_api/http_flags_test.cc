// relserve's HTTP flags: --http-address (HOST:PORT, -1 or empty for none) and --http-threads.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/http_api/http_server.h"
#include "server/main/server_config.h"

namespace relserve {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<ServerConfig> Parse(std::vector<std::string> args) {
  args.insert(args.begin(), {"--model", "m=/models/m"});
  return ParseServerFlags(args);
}

TEST(HttpFlagsTest, DefaultsAndValues) {
  auto d = Parse({});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->http_address, "0.0.0.0:8080");
  EXPECT_EQ(d->http_threads, 64);
  auto set = Parse({"--http-address", "127.0.0.1:0", "--http-threads", "8"});
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->http_address, "127.0.0.1:0");
  EXPECT_EQ(set->http_threads, 8);
  for (const char* none : {"-1", ""}) {
    auto off = Parse({"--http-address", none});
    ASSERT_TRUE(off.ok()) << off.status();
    EXPECT_EQ(off->http_address, "") << none;
  }
  EXPECT_THAT(ServerUsage(), HasSubstr("--http-address HOST:PORT"));
  EXPECT_THAT(ServerUsage(), HasSubstr("--http-threads N"));
}

TEST(HttpFlagsTest, BadValuesNameTheFlag) {
  for (const char* bad : {"8080", "host:", "host:99999", "host:-3", ":8080", "host:port"}) {
    auto r = Parse({"--http-address", bad});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("--http-address")) << bad;
  }
  auto threads = Parse({"--http-threads", "0"});
  ASSERT_FALSE(threads.ok());
  EXPECT_THAT(std::string(threads.status().message()), HasSubstr("--http-threads"));
}

TEST(HttpFlagsTest, AddressesParse) {
  HttpServerConfig c;
  ASSERT_TRUE(ParseHttpAddress("[::1]:9000", &c).ok());
  EXPECT_EQ(c.host, "::1");
  EXPECT_EQ(c.port, 9000);
  ASSERT_TRUE(ParseHttpAddress("0.0.0.0:0", &c).ok());
  EXPECT_EQ(c.host, "0.0.0.0");
  EXPECT_EQ(c.port, 0);
}

}  // namespace
}  // namespace relserve
