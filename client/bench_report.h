#ifndef RELSERVE_CLIENT_BENCH_REPORT_H_
#define RELSERVE_CLIENT_BENCH_REPORT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "client/metrics_scrape.h"

namespace relserve::client {

// An open-loop request that starts this much after its scheduled time counts as a late start.
inline constexpr double kLateStartMs = 10;

// What one bench run measured: requests that finished inside the measured window (after the
// warm-up) and the server's counters over the same window.
struct BenchResult {
  std::string rpc;
  std::string lengths;  // the --lengths spec
  int concurrency = 0;
  int inputs_per_request = 0;
  double duration_s = 0;                 // the measured window
  std::vector<double> latencies_ms;      // successful requests
  int64_t sequences = 0;                 // of successful requests
  int64_t tokens = 0;                    // the server's usage.tokens of successful requests
  int64_t min_sequence_tokens = 0;       // per request: usage.tokens / usage.sequences
  int64_t max_sequence_tokens = 0;
  std::map<std::string, int64_t> errors;  // requests a server failed, by status code name
  // Requests that reached no server (client/connect_backoff.h: IsConnectionFailure), and the
  // message of the last one.
  int64_t connection_failures = 0;
  std::string last_connection_error;
  // Open loop (--rate): the offered rate, the arrival kind, and how far behind schedule
  // requests started because every caller was busy.
  double rate = 0;
  std::string arrivals;
  int64_t late_starts = 0;  // measured requests that started over kLateStartMs late
  double max_start_lag_ms = 0;
  // Server counters at the start and end of the window (--metrics-url).
  std::optional<BatchingCounters> server_before, server_after;
};

// The final JSON object, on one line. Field names are those the serving benchmark has always
// recorded (requests, sequences_per_second, tokens_per_second, p50_ms, p90_ms, p99_ms, max_ms,
// padding_ratio, mean_batch_size, errors, ...) plus requests_per_second, mean_ms and the
// sequence lengths the server saw; errors are keyed by status code name and hold the requests a
// server answered with an error, connection_failures counts those that reached no server
// (failed_requests is the sum of both; connection_error, the last failure's message, appears
// only when there was one). padding_ratio and
// mean_batch_size appear only when the server's metrics were scraped; rate, arrivals,
// late_starts and max_start_lag_ms only for an open-loop run.
nlohmann::ordered_json BenchReport(const BenchResult& result);

// The line printed to stderr about once a second while the run goes on: successful requests,
// server errors, connection failures.
std::string ProgressLine(double elapsed_s, int64_t requests, int64_t tokens, int64_t errors,
                         int64_t connection_failures);

}  // namespace relserve::client

#endif  // RELSERVE_CLIENT_BENCH_REPORT_H_
