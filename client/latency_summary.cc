#include "client/latency_summary.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace relserve::client {

double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  // The value at rank ceil(p * n) (1-based): the smallest value with at least p of the
  // sample at or below it.
  const double n = static_cast<double>(sorted.size());
  const size_t rank = static_cast<size_t>(std::ceil(std::clamp(p, 0.0, 1.0) * n - 1e-9));  // 0.99 * 100 is not 99 exactly
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

LatencySummary Summarize(std::vector<double> latencies) {
  LatencySummary s;
  if (latencies.empty()) return s;
  std::sort(latencies.begin(), latencies.end());
  s.count = latencies.size();
  s.mean = std::accumulate(latencies.begin(), latencies.end(), 0.0) / static_cast<double>(s.count);
  s.p50 = Percentile(latencies, 0.50);
  s.p90 = Percentile(latencies, 0.90);
  s.p99 = Percentile(latencies, 0.99);
  s.max = latencies.back();
  return s;
}

}  // namespace relserve::client
