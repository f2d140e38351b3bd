#include "client/metrics_scrape.h"

#include "gtest/gtest.h"

namespace relserve::client {
namespace {

constexpr const char* kExposition = R"(# HELP relserve_tokens_total Real tokens computed.
# TYPE relserve_tokens_total counter
relserve_tokens_total{model="a"} 1000
relserve_tokens_total{model="b"} 24.5
# TYPE relserve_tokens_total_extra counter
relserve_tokens_total_extra 99
relserve_padded_tokens_total{model="a"} 1250 1700000000000
relserve_batch_size_sum{model="a"} 30
relserve_batch_size_count{model="a"} 10
relserve_batch_size_bucket{model="a",le="1"} 4
relserve_requests_total{model="a",rpc="Embed",code="OK"} 7
relserve_requests_total{model="a",rpc="Embed",code="NOT_FOUND"} 1
)";

TEST(MetricsScrapeTest, SumsEveryLabelSetOfExactlyThatSeries) {
  EXPECT_DOUBLE_EQ(SumSamples(kExposition, "relserve_tokens_total"), 1024.5);
  EXPECT_DOUBLE_EQ(SumSamples(kExposition, "relserve_tokens_total_extra"), 99);
  EXPECT_DOUBLE_EQ(SumSamples(kExposition, "relserve_padded_tokens_total"), 1250);  // timestamp ignored
  EXPECT_DOUBLE_EQ(SumSamples(kExposition, "relserve_missing"), 0);
  EXPECT_DOUBLE_EQ(SumSamples("", "relserve_tokens_total"), 0);
}

TEST(MetricsScrapeTest, BatchingCounters) {
  const BatchingCounters c = ReadBatchingCounters(kExposition);
  EXPECT_DOUBLE_EQ(c.tokens, 1024.5);
  EXPECT_DOUBLE_EQ(c.padded_tokens, 1250);
  EXPECT_DOUBLE_EQ(c.batch_size_sum, 30);
  EXPECT_DOUBLE_EQ(c.batch_size_count, 10);
  EXPECT_DOUBLE_EQ(c.requests, 8);
}

TEST(MetricsScrapeTest, HttpUrls) {
  auto u = ParseHttpUrl("http://relserve-0.relserve:9090/metrics");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->host, "relserve-0.relserve");
  EXPECT_EQ(u->port, 9090);
  EXPECT_EQ(u->path, "/metrics");
  auto bare = ParseHttpUrl("http://localhost");
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_EQ(bare->port, 80);
  EXPECT_EQ(bare->path, "/");
  auto v6 = ParseHttpUrl("http://[::1]:9090/metrics");
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 9090);
  for (const char* bad : {"https://x/metrics", "http://:9090/metrics", "http://x:port/", "http://x:0/", "http://[::1"}) {
    EXPECT_EQ(ParseHttpUrl(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(MetricsScrapeTest, UnreachableServerIsAnError) {
  HttpUrl url;
  url.host = "127.0.0.1";
  url.port = 1;  // nothing listens on port 1 in a test sandbox
  url.path = "/metrics";
  EXPECT_EQ(HttpGet(url, 1000).status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace relserve::client
