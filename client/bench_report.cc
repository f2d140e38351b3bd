#include "client/bench_report.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "client/latency_summary.h"

namespace relserve::client {
namespace {

// Rounds to `decimals` places for reading (latencies to µs, rates to 0.1); dividing by the
// power of ten gives the double nearest the decimal, which prints short.
double Round(double x, int decimals) {
  const double scale = std::pow(10.0, decimals);
  return std::round(x * scale) / scale;
}

}  // namespace

nlohmann::ordered_json BenchReport(const BenchResult& r) {
  const LatencySummary latency = Summarize(r.latencies_ms);
  const double seconds = std::max(r.duration_s, 1e-9);
  const int64_t requests = static_cast<int64_t>(r.latencies_ms.size());
  int64_t failed = r.connection_failures;
  for (const auto& [code, n] : r.errors) failed += n;
  nlohmann::ordered_json out = {
      {"rpc", r.rpc},
      {"lengths", r.lengths},
      {"concurrency", r.concurrency},
      {"inputs_per_request", r.inputs_per_request},
      {"duration_s", Round(r.duration_s, 3)},
      {"requests", requests},
      {"failed_requests", failed},
      {"connection_failures", r.connection_failures},
      {"sequences", r.sequences},
      {"tokens", r.tokens},
      {"requests_per_second", Round(static_cast<double>(requests) / seconds, 1)},
      {"sequences_per_second", Round(static_cast<double>(r.sequences) / seconds, 1)},
      {"tokens_per_second", Round(static_cast<double>(r.tokens) / seconds, 1)},
      {"p50_ms", Round(latency.p50, 3)},
      {"p90_ms", Round(latency.p90, 3)},
      {"p99_ms", Round(latency.p99, 3)},
      {"max_ms", Round(latency.max, 3)},
      {"mean_ms", Round(latency.mean, 3)},
      {"sequence_tokens",
       {{"min", r.min_sequence_tokens},
        {"max", r.max_sequence_tokens},
        {"mean", r.sequences > 0 ? Round(static_cast<double>(r.tokens) / static_cast<double>(r.sequences), 2) : 0}}},
      {"errors", nlohmann::ordered_json::object()},
  };
  for (const auto& [code, n] : r.errors) out["errors"][code] = n;
  if (r.connection_failures > 0) out["connection_error"] = r.last_connection_error;
  if (r.rate > 0) {
    out["rate"] = r.rate;
    out["arrivals"] = r.arrivals;
    out["late_starts"] = r.late_starts;
    out["max_start_lag_ms"] = Round(r.max_start_lag_ms, 3);
  }
  if (r.server_before && r.server_after) {
    const BatchingCounters& a = *r.server_before;
    const BatchingCounters& b = *r.server_after;
    const double real = b.tokens - a.tokens;
    const double batches = b.batch_size_count - a.batch_size_count;
    out["padding_ratio"] = real > 0 ? Round((b.padded_tokens - a.padded_tokens) / real, 3) : 0.0;
    out["mean_batch_size"] = batches > 0 ? Round((b.batch_size_sum - a.batch_size_sum) / batches, 2) : 0.0;
    out["server_batches"] = static_cast<int64_t>(batches);
    out["server_requests"] = static_cast<int64_t>(b.requests - a.requests);
  }
  return out;
}

std::string ProgressLine(double elapsed_s, int64_t requests, int64_t tokens, int64_t errors,
                         int64_t connection_failures) {
  const double s = std::max(elapsed_s, 1e-9);
  return absl::StrFormat("bench: %.0f s, %d requests, %.1f req/s, %.0f tokens/s, %d errors, %d connection failures",
                         elapsed_s, requests, static_cast<double>(requests) / s, static_cast<double>(tokens) / s,
                         errors, connection_failures);
}

}  // namespace relserve::client
