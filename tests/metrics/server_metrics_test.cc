#include "server/metrics/server_metrics.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "tests/metrics/metrics_test_util.h"

namespace relserve {
namespace {

using metrics_test::Exposition;
using metrics_test::ParseExposition;
using metrics_test::Sample;
using Labels = std::map<std::string, std::string>;

Exposition Scrape(const ServerMetrics& m) {
  Exposition e = ParseExposition(m.Render());
  EXPECT_TRUE(e.errors.empty()) << "unparsable lines, first: " << e.errors.front();
  return e;
}

// The le label values of a histogram series, in output order.
std::vector<std::string> BucketBounds(const Exposition& e, const std::string& family,
                                      const Labels& labels) {
  std::vector<std::string> les;
  for (const Sample& s : e.Find(family + "_bucket", labels)) les.push_back(s.labels.at("le"));
  return les;
}

double Bucket(const Exposition& e, const std::string& family, Labels labels,
              const std::string& le) {
  labels["le"] = le;
  auto v = e.Value(family + "_bucket", labels);
  EXPECT_TRUE(v.has_value()) << family << " has no bucket le=" << le;
  return v.value_or(-1);
}

TEST(ServerMetricsTest, NothingBeforeFirstUse) {
  ServerMetrics m;
  // Families without series are not exposed; the process series (process_metrics_test) always are.
  EXPECT_EQ(m.Render().find("relserve_"), std::string::npos);
}

TEST(ServerMetricsTest, EveryFamilyHasHelpAndType) {
  ServerMetrics m;
  m.RecordRequest("m", "Encode", "OK", 0.01);
  m.RecordTokenize("m", 0.001);
  m.RecordRejection("m", "queue_full");
  m.AddInFlightSequences("m", 1);
  m.SetQueueDepth("m", 1);
  m.RecordBatch("m", 2, 10, 16, 0.001, 0.01, true);
  m.RecordQueueTime("m", 0.001);
  m.SetModelInfo("m", {{"architecture", "t5"}});
  m.SetServing("m", true);
  m.RecordUnauthenticated("grpc");
  const Exposition e = Scrape(m);
  const std::map<std::string, std::string> expected = {
      {"relserve_requests_total", "counter"},
      {"relserve_request_duration_seconds", "histogram"},
      {"relserve_tokenize_duration_seconds", "histogram"},
      {"relserve_queue_duration_seconds", "histogram"},
      {"relserve_batch_max_queue_duration_seconds", "histogram"},
      {"relserve_inference_duration_seconds", "histogram"},
      {"relserve_batch_size", "histogram"},
      {"relserve_batch_tokens", "histogram"},
      {"relserve_padding_ratio", "histogram"},
      {"relserve_tokens_total", "counter"},
      {"relserve_padded_tokens_total", "counter"},
      {"relserve_batches_total", "counter"},
      {"relserve_queue_depth", "gauge"},
      {"relserve_in_flight_sequences", "gauge"},
      {"relserve_rejections_total", "counter"},
      {"relserve_model_info", "gauge"},
      {"relserve_model_serving", "gauge"},
      {"relserve_unauthenticated_requests_total", "counter"},
  };
  for (const auto& [family, type] : expected) {
    ASSERT_TRUE(e.type.count(family)) << family;
    EXPECT_EQ(e.type.at(family), type) << family;
    ASSERT_TRUE(e.help.count(family)) << family;
    EXPECT_FALSE(e.help.at(family).empty()) << family;
  }
  size_t relserve_families = 0;
  for (const auto& [family, type] : e.type) relserve_families += family.rfind("relserve_", 0) == 0;
  EXPECT_EQ(relserve_families, expected.size());
}

TEST(ServerMetricsTest, RequestsCounterAndLatencyHistogram) {
  ServerMetrics m;
  m.RecordRequest("m1", "Encode", "OK", 0.003);
  m.RecordRequest("m1", "Encode", "OK", 0.0005);
  m.RecordRequest("m1", "Encode", "INVALID_ARGUMENT", 0.0002);
  m.RecordRequest("m1", "Tokenize", "OK", 45.0);
  const Exposition e = Scrape(m);

  EXPECT_EQ(e.Value("relserve_requests_total", {{"model", "m1"}, {"rpc", "Encode"}, {"code", "OK"}}),
            2.0);
  EXPECT_EQ(e.Value("relserve_requests_total",
                    {{"model", "m1"}, {"rpc", "Encode"}, {"code", "INVALID_ARGUMENT"}}),
            1.0);
  EXPECT_EQ(e.Value("relserve_requests_total", {{"model", "m1"}, {"rpc", "Tokenize"}, {"code", "OK"}}),
            1.0);

  const std::string h = "relserve_request_duration_seconds";
  const Labels encode = {{"model", "m1"}, {"rpc", "Encode"}};
  EXPECT_EQ(BucketBounds(e, h, encode),
            (std::vector<std::string>{"0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1",
                                      "0.25", "0.5", "1", "2.5", "5", "10", "30", "+Inf"}));
  EXPECT_EQ(Bucket(e, h, encode, "0.001"), 2);  // cumulative
  EXPECT_EQ(Bucket(e, h, encode, "0.0025"), 2);
  EXPECT_EQ(Bucket(e, h, encode, "0.005"), 3);
  EXPECT_EQ(Bucket(e, h, encode, "+Inf"), 3);
  EXPECT_EQ(e.Value(h + "_count", encode), 3.0);
  EXPECT_NEAR(e.Value(h + "_sum", encode).value_or(-1), 0.0037, 1e-12);

  const Labels tokenize = {{"model", "m1"}, {"rpc", "Tokenize"}};
  EXPECT_EQ(Bucket(e, h, tokenize, "30"), 0);  // 45 s lands only in +Inf
  EXPECT_EQ(Bucket(e, h, tokenize, "+Inf"), 1);
}

TEST(ServerMetricsTest, TokenizeQueueRejectionsAndGauges) {
  ServerMetrics m;
  m.RecordTokenize("m", 0.00007);
  m.RecordQueueTime("m", 0.0002);
  m.RecordQueueTime("m", 0.02);
  m.RecordRejection("m", "queue_full");
  m.RecordRejection("m", "queue_full");
  m.RecordRejection("m", "too_long");
  m.AddInFlightSequences("m", 5);
  m.AddInFlightSequences("m", -2);
  m.SetQueueDepth("m", 17);
  m.SetQueueDepth("m", 9);
  m.SetServing("m", true);
  const Exposition e = Scrape(m);
  const Labels model = {{"model", "m"}};

  EXPECT_EQ(BucketBounds(e, "relserve_tokenize_duration_seconds", model).front(), "5e-05");
  EXPECT_EQ(Bucket(e, "relserve_tokenize_duration_seconds", model, "5e-05"), 0);
  EXPECT_EQ(Bucket(e, "relserve_tokenize_duration_seconds", model, "0.0001"), 1);
  EXPECT_EQ(e.Value("relserve_tokenize_duration_seconds_count", model), 1.0);

  const std::vector<std::string> queue_bounds =
      BucketBounds(e, "relserve_queue_duration_seconds", model);
  ASSERT_EQ(queue_bounds.size(), 18u);
  EXPECT_EQ(queue_bounds.front(), "0.0001");
  EXPECT_EQ(queue_bounds[16], "30");
  EXPECT_EQ(Bucket(e, "relserve_queue_duration_seconds", model, "0.00025"), 1);
  EXPECT_EQ(Bucket(e, "relserve_queue_duration_seconds", model, "0.01"), 1);
  EXPECT_EQ(Bucket(e, "relserve_queue_duration_seconds", model, "0.025"), 2);

  EXPECT_EQ(e.Value("relserve_rejections_total", {{"model", "m"}, {"reason", "queue_full"}}), 2.0);
  EXPECT_EQ(e.Value("relserve_rejections_total", {{"model", "m"}, {"reason", "too_long"}}), 1.0);
  EXPECT_EQ(e.Value("relserve_in_flight_sequences", model), 3.0);
  EXPECT_EQ(e.Value("relserve_queue_depth", model), 9.0);
  EXPECT_EQ(e.Value("relserve_model_serving", model), 1.0);

  m.SetServing("m", false);
  EXPECT_EQ(Scrape(m).Value("relserve_model_serving", model), 0.0);
}

TEST(ServerMetricsTest, UnauthenticatedRequestsByTransport) {
  ServerMetrics m;
  m.RecordUnauthenticated("http");
  m.RecordUnauthenticated("grpc");
  m.RecordUnauthenticated("http");
  m.RecordUnauthenticated("metrics");
  const Exposition e = Scrape(m);
  EXPECT_EQ(e.Value("relserve_unauthenticated_requests_total", {{"transport", "http"}}), 2.0);
  EXPECT_EQ(e.Value("relserve_unauthenticated_requests_total", {{"transport", "grpc"}}), 1.0);
  EXPECT_EQ(e.Value("relserve_unauthenticated_requests_total", {{"transport", "metrics"}}), 1.0);
}

TEST(ServerMetricsTest, BatchStageSeries) {
  ServerMetrics m;
  m.RecordBatchStages("m", 0.001, 0.03, 0.2);
  m.RecordBatchStages("m", 0.002, 0.01, 0.1);
  const Exposition e = Scrape(m);
  auto stage = [](const char* name) { return Labels{{"model", "m"}, {"stage", name}}; };
  EXPECT_EQ(e.Value("relserve_batch_stage_duration_seconds_count", stage("prepare")), 2.0);
  EXPECT_NEAR(e.Value("relserve_batch_stage_duration_seconds_sum", stage("prepare")).value_or(-1), 0.003, 1e-12);
  EXPECT_NEAR(e.Value("relserve_batch_stage_duration_seconds_sum", stage("forward")).value_or(-1), 0.04, 1e-12);
  EXPECT_NEAR(e.Value("relserve_batch_stage_duration_seconds_sum", stage("results")).value_or(-1), 0.3, 1e-12);
  EXPECT_EQ(Bucket(e, "relserve_batch_stage_duration_seconds", stage("results"), "0.1"), 1);
  EXPECT_EQ(Bucket(e, "relserve_batch_stage_duration_seconds", stage("results"), "0.25"), 2);
}

TEST(ServerMetricsTest, BatchSeries) {
  ServerMetrics m;
  // 3 sequences padded to 128: 384 tokens, 300 real -> ratio 1.28.
  m.RecordBatch("m", 3, 300, 384, 0.004, 0.2, /*ok=*/true);
  // A failed batch counts only in batches_total{status="error"} (and its queue wait).
  m.RecordBatch("m", 200, 1000, 60000, 0.5, 3.0, /*ok=*/false);
  const Exposition e = Scrape(m);
  const Labels model = {{"model", "m"}};

  EXPECT_EQ(e.Value("relserve_batches_total", {{"model", "m"}, {"status", "ok"}}), 1.0);
  EXPECT_EQ(e.Value("relserve_batches_total", {{"model", "m"}, {"status", "error"}}), 1.0);

  EXPECT_EQ(BucketBounds(e, "relserve_batch_size", model),
            (std::vector<std::string>{"1", "2", "4", "8", "16", "32", "64", "128", "256", "+Inf"}));
  EXPECT_EQ(Bucket(e, "relserve_batch_size", model, "2"), 0);
  EXPECT_EQ(Bucket(e, "relserve_batch_size", model, "4"), 1);
  EXPECT_EQ(e.Value("relserve_batch_size_count", model), 1.0);
  EXPECT_EQ(e.Value("relserve_batch_size_sum", model), 3.0);

  EXPECT_EQ(BucketBounds(e, "relserve_batch_tokens", model),
            (std::vector<std::string>{"64", "128", "256", "512", "1024", "2048", "4096", "8192",
                                      "16384", "32768", "65536", "+Inf"}));
  EXPECT_EQ(Bucket(e, "relserve_batch_tokens", model, "256"), 0);
  EXPECT_EQ(Bucket(e, "relserve_batch_tokens", model, "512"), 1);

  EXPECT_EQ(BucketBounds(e, "relserve_padding_ratio", model),
            (std::vector<std::string>{"1", "1.05", "1.1", "1.2", "1.3", "1.5", "2", "3", "5",
                                      "+Inf"}));
  EXPECT_EQ(Bucket(e, "relserve_padding_ratio", model, "1.2"), 0);
  EXPECT_EQ(Bucket(e, "relserve_padding_ratio", model, "1.3"), 1);
  EXPECT_NEAR(e.Value("relserve_padding_ratio_sum", model).value_or(-1), 1.28, 1e-12);

  EXPECT_EQ(e.Value("relserve_tokens_total", model), 300.0);
  EXPECT_EQ(e.Value("relserve_padded_tokens_total", model), 384.0);

  EXPECT_EQ(Bucket(e, "relserve_inference_duration_seconds", model, "0.1"), 0);
  EXPECT_EQ(Bucket(e, "relserve_inference_duration_seconds", model, "0.25"), 1);
  EXPECT_EQ(e.Value("relserve_inference_duration_seconds_count", model), 1.0);

  EXPECT_EQ(e.Value("relserve_batch_max_queue_duration_seconds_count", model), 2.0);
  EXPECT_EQ(Bucket(e, "relserve_batch_max_queue_duration_seconds", model, "0.005"), 1);
}

TEST(ServerMetricsTest, ZeroRealTokensSkipsPaddingRatio) {
  ServerMetrics m;
  m.RecordBatch("m", 1, 0, 64, 0, 0.01, true);
  const Exposition e = Scrape(m);
  EXPECT_TRUE(e.Find("relserve_padding_ratio_count").empty());
  EXPECT_EQ(e.Value("relserve_batch_size_count", {{"model", "m"}}), 1.0);
}

TEST(ServerMetricsTest, ModelLabelSeparatesSeries) {
  ServerMetrics m;
  m.RecordRequest("deberta", "Encode", "OK", 0.01);
  m.RecordRequest("t5", "Encode", "OK", 0.01);
  m.RecordRequest("t5", "Encode", "OK", 0.01);
  m.RecordBatch("deberta", 4, 100, 128, 0.001, 0.01, true);
  m.SetQueueDepth("t5", 3);
  const Exposition e = Scrape(m);
  EXPECT_EQ(e.Value("relserve_requests_total", {{"model", "deberta"}, {"rpc", "Encode"}, {"code", "OK"}}),
            1.0);
  EXPECT_EQ(e.Value("relserve_requests_total", {{"model", "t5"}, {"rpc", "Encode"}, {"code", "OK"}}),
            2.0);
  EXPECT_EQ(e.Value("relserve_tokens_total", {{"model", "deberta"}}), 100.0);
  EXPECT_FALSE(e.Value("relserve_tokens_total", {{"model", "t5"}}).has_value());
  EXPECT_EQ(e.Value("relserve_queue_depth", {{"model", "t5"}}), 3.0);
  EXPECT_FALSE(e.Value("relserve_queue_depth", {{"model", "deberta"}}).has_value());
}

TEST(ServerMetricsTest, LabelValuesAreEscaped) {
  ServerMetrics m;
  const std::string odd = "we\"ird\\mo\ndel";
  m.RecordRejection(odd, "queue_full");
  const Exposition e = Scrape(m);
  EXPECT_EQ(e.Value("relserve_rejections_total", {{"model", odd}, {"reason", "queue_full"}}), 1.0);
}

TEST(ServerMetricsTest, ModelInfoLabelsSanitizedAndReplaced) {
  ServerMetrics m;
  m.SetModelInfo("m", {{"architecture", "deberta-v2"},
                       {"dtype", "float32"},
                       {"max-length", "512"},
                       {"model", "ignored"},
                       {"__reserved", "x"},
                       {"9lives", "y"}});
  Exposition e = Scrape(m);
  auto info = e.Find("relserve_model_info");
  ASSERT_EQ(info.size(), 1u);
  EXPECT_EQ(info[0].labels, (Labels{{"model", "m"},
                                    {"architecture", "deberta-v2"},
                                    {"dtype", "float32"},
                                    {"max_length", "512"},
                                    {"_reserved", "x"},
                                    {"_9lives", "y"}}));
  EXPECT_EQ(info[0].value, 1.0);

  m.SetModelInfo("m", {{"architecture", "t5"}});
  m.SetModelInfo("other", {{"architecture", "t5"}});
  m.SetModelInfo("other", {{"architecture", "t5"}});  // same labels again: no duplicate
  e = Scrape(m);
  info = e.Find("relserve_model_info");
  ASSERT_EQ(info.size(), 2u);
  EXPECT_EQ(e.Value("relserve_model_info", {{"model", "m"}, {"architecture", "t5"}}), 1.0);
  EXPECT_EQ(e.Value("relserve_model_info", {{"model", "other"}, {"architecture", "t5"}}), 1.0);
}

TEST(ServerMetricsTest, ConcurrentRecordingIsExact) {
  ServerMetrics m;
  constexpr int kThreads = 8;
  constexpr int kIterations = 5000;
  std::atomic<bool> stop_render{false};
  std::atomic<int> renders{0};
  std::thread renderer([&] {  // scrapes race with recording
    while (!stop_render.load()) {
      EXPECT_TRUE(ParseExposition(m.Render()).errors.empty());
      ++renders;
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&m, t] {
      const std::string model = t % 2 == 0 ? "even" : "odd";
      for (int i = 0; i < kIterations; ++i) {
        m.RecordRequest(model, "Encode", i % 10 == 0 ? "INTERNAL" : "OK", 0.002);
        m.RecordRequest("shared", "Encode", "OK", 0.002);
        m.AddInFlightSequences("shared", 1);
        m.RecordBatch("shared", 2, 10, 16, 0.001, 0.01, true);
        m.RecordQueueTime("shared", 0.001);
        m.RecordRejection("shared", "queue_full");
        m.AddInFlightSequences("shared", -1);
        m.AddInFlightSequences(model, 1);
      }
    });
  }
  for (auto& th : threads) th.join();
  stop_render.store(true);
  renderer.join();
  EXPECT_GT(renders.load(), 0);

  const Exposition e = Scrape(m);
  constexpr double kPerModel = kThreads / 2 * kIterations;
  constexpr double kAll = kThreads * kIterations;
  for (const std::string model : {"even", "odd"}) {
    EXPECT_EQ(e.Value("relserve_requests_total", {{"model", model}, {"rpc", "Encode"}, {"code", "OK"}}),
              kPerModel * 0.9);
    EXPECT_EQ(
        e.Value("relserve_requests_total", {{"model", model}, {"rpc", "Encode"}, {"code", "INTERNAL"}}),
        kPerModel * 0.1);
    EXPECT_EQ(e.Value("relserve_in_flight_sequences", {{"model", model}}), kPerModel);
  }
  EXPECT_EQ(e.Value("relserve_requests_total", {{"model", "shared"}, {"rpc", "Encode"}, {"code", "OK"}}),
            kAll);
  EXPECT_EQ(e.Value("relserve_request_duration_seconds_count", {{"model", "shared"}, {"rpc", "Encode"}}),
            kAll);
  EXPECT_EQ(e.Value("relserve_in_flight_sequences", {{"model", "shared"}}), 0.0);
  EXPECT_EQ(e.Value("relserve_batches_total", {{"model", "shared"}, {"status", "ok"}}), kAll);
  EXPECT_EQ(e.Value("relserve_tokens_total", {{"model", "shared"}}), kAll * 10);
  EXPECT_EQ(e.Value("relserve_padded_tokens_total", {{"model", "shared"}}), kAll * 16);
  EXPECT_EQ(e.Value("relserve_batch_size_count", {{"model", "shared"}}), kAll);
  EXPECT_EQ(e.Value("relserve_batch_size_sum", {{"model", "shared"}}), kAll * 2);
  EXPECT_EQ(e.Value("relserve_queue_duration_seconds_count", {{"model", "shared"}}), kAll);
  EXPECT_EQ(e.Value("relserve_rejections_total", {{"model", "shared"}, {"reason", "queue_full"}}),
            kAll);
}

TEST(ServerMetricsTest, HttpConnectionCountsAdvanceByTheirDifferences) {
  ServerMetrics m;
  WebServerStats c;
  c.open_connections = 7;
  c.connections_accepted = 10;
  c.connections_evicted = 2;
  c.head_timeouts = 3;
  m.SetHttpConnections("api", c);
  c.open_connections = 4;
  c.connections_accepted = 15;
  c.connections_evicted = 5;
  c.write_timeouts = 1;
  m.SetHttpConnections("api", c);
  m.SetHttpConnections("api", c);  // the same totals again: nothing moves
  WebServerStats metrics_port;
  metrics_port.connections_accepted = 1;
  m.SetHttpConnections("metrics", metrics_port);
  const Exposition e = ParseExposition(m.Render());
  EXPECT_TRUE(e.errors.empty());
  EXPECT_EQ(e.Value("relserve_http_connections", {{"port", "api"}}), 4);
  EXPECT_EQ(e.Value("relserve_http_connections_accepted_total", {{"port", "api"}}), 15);
  EXPECT_EQ(e.Value("relserve_http_connections_accepted_total", {{"port", "metrics"}}), 1);
  EXPECT_EQ(e.Value("relserve_http_connections_closed_total", {{"port", "api"}, {"reason", "evicted"}}), 5);
  EXPECT_EQ(e.Value("relserve_http_connections_closed_total", {{"port", "api"}, {"reason", "head_timeout"}}), 3);
  EXPECT_EQ(e.Value("relserve_http_connections_closed_total", {{"port", "api"}, {"reason", "write_timeout"}}), 1);
  EXPECT_EQ(e.Value("relserve_http_connections_closed_total", {{"port", "api"}, {"reason", "refused"}}), 0);
}


}  // namespace
}  // namespace relserve
