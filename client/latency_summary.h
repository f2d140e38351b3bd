#ifndef RELSERVE_CLIENT_LATENCY_SUMMARY_H_
#define RELSERVE_CLIENT_LATENCY_SUMMARY_H_

#include <cstddef>
#include <vector>

namespace relserve::client {

// Percentiles of a sample, nearest-rank on the sorted values (p in [0, 1]; 0 for no values).
double Percentile(const std::vector<double>& sorted, double p);

struct LatencySummary {
  size_t count = 0;
  double mean = 0;
  double p50 = 0;
  double p90 = 0;
  double p99 = 0;
  double max = 0;
};

// Summarises request latencies (any unit; bench uses milliseconds).
LatencySummary Summarize(std::vector<double> latencies);

}  // namespace relserve::client

#endif  // RELSERVE_CLIENT_LATENCY_SUMMARY_H_
