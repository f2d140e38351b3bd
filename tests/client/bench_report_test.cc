#include "client/bench_report.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace relserve::client {
namespace {

using ::testing::HasSubstr;

BenchResult TwoSecondRun() {
  BenchResult r;
  r.rpc = "embed";
  r.lengths = "uniform:10:20";
  r.concurrency = 4;
  r.inputs_per_request = 2;
  r.duration_s = 2.0;
  for (int i = 1; i <= 100; ++i) r.latencies_ms.push_back(i);
  r.sequences = 200;
  r.tokens = 3000;
  r.min_sequence_tokens = 10;
  r.max_sequence_tokens = 20;
  r.errors["UNAVAILABLE"] = 3;
  return r;
}

TEST(BenchReportTest, ThroughputLatencyAndErrors) {
  const nlohmann::ordered_json j = BenchReport(TwoSecondRun());
  EXPECT_EQ(j["rpc"], "embed");
  EXPECT_EQ(j["concurrency"], 4);
  EXPECT_EQ(j["requests"], 100);
  EXPECT_EQ(j["failed_requests"], 3);
  EXPECT_EQ(j["sequences"], 200);
  EXPECT_EQ(j["tokens"], 3000);
  EXPECT_DOUBLE_EQ(j["requests_per_second"].get<double>(), 50);
  EXPECT_DOUBLE_EQ(j["sequences_per_second"].get<double>(), 100);
  EXPECT_DOUBLE_EQ(j["tokens_per_second"].get<double>(), 1500);
  EXPECT_DOUBLE_EQ(j["p50_ms"].get<double>(), 50);
  EXPECT_DOUBLE_EQ(j["p90_ms"].get<double>(), 90);
  EXPECT_DOUBLE_EQ(j["p99_ms"].get<double>(), 99);
  EXPECT_DOUBLE_EQ(j["max_ms"].get<double>(), 100);
  EXPECT_EQ(j["sequence_tokens"]["min"], 10);
  EXPECT_EQ(j["sequence_tokens"]["max"], 20);
  EXPECT_DOUBLE_EQ(j["sequence_tokens"]["mean"].get<double>(), 15);
  EXPECT_EQ(j["errors"], (nlohmann::ordered_json{{"UNAVAILABLE", 3}}));
  EXPECT_FALSE(j.contains("padding_ratio"));  // no metrics scraped
}

TEST(BenchReportTest, ServerCountersOverTheWindow) {
  BenchResult r = TwoSecondRun();
  r.server_before = BatchingCounters{1000, 1100, 50, 20, 10};
  r.server_after = BatchingCounters{4000, 4850, 250, 60, 110};
  const nlohmann::ordered_json j = BenchReport(r);
  EXPECT_DOUBLE_EQ(j["padding_ratio"].get<double>(), 1.25);  // 3750 padded / 3000 real
  EXPECT_DOUBLE_EQ(j["mean_batch_size"].get<double>(), 5);   // 200 sequences / 40 batches
  EXPECT_EQ(j["server_batches"], 40);
  EXPECT_EQ(j["server_requests"], 100);
}

TEST(BenchReportTest, OpenLoopFieldsOnlyForAnOpenLoopRun) {
  BenchResult r = TwoSecondRun();
  EXPECT_FALSE(BenchReport(r).contains("rate"));  // closed loop
  r.rate = 40;
  r.arrivals = "poisson";
  r.late_starts = 2;
  r.max_start_lag_ms = 12.3456;
  const nlohmann::ordered_json j = BenchReport(r);
  EXPECT_DOUBLE_EQ(j["rate"].get<double>(), 40);
  EXPECT_EQ(j["arrivals"], "poisson");
  EXPECT_EQ(j["late_starts"], 2);
  EXPECT_DOUBLE_EQ(j["max_start_lag_ms"].get<double>(), 12.346);
}

TEST(BenchReportTest, EmptyRunHasZerosNotNaNs) {
  BenchResult r;
  r.rpc = "embed";
  const std::string text = BenchReport(r).dump();
  EXPECT_THAT(text, HasSubstr("\"requests\":0"));
  EXPECT_THAT(text, HasSubstr("\"errors\":{}"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("null")));
}

TEST(BenchReportTest, ConnectionFailuresApartFromServerErrors) {
  BenchResult r = TwoSecondRun();
  nlohmann::ordered_json j = BenchReport(r);
  EXPECT_EQ(j["connection_failures"], 0);
  EXPECT_FALSE(j.contains("connection_error"));
  r.connection_failures = 40;
  r.last_connection_error = "failed to connect to all addresses";
  j = BenchReport(r);
  EXPECT_EQ(j["connection_failures"], 40);
  EXPECT_EQ(j["connection_error"], "failed to connect to all addresses");
  EXPECT_EQ(j["errors"], (nlohmann::ordered_json{{"UNAVAILABLE", 3}}));  // the server's own answers only
  EXPECT_EQ(j["failed_requests"], 43);
}

TEST(BenchReportTest, ProgressLine) {
  EXPECT_EQ(ProgressLine(2.0, 100, 3000, 1, 7),
            "bench: 2 s, 100 requests, 50.0 req/s, 1500 tokens/s, 1 errors, 7 connection failures");
}

}  // namespace
}  // namespace relserve::client
