#ifndef RELSERVE_CLIENT_METRICS_SCRAPE_H_
#define RELSERVE_CLIENT_METRICS_SCRAPE_H_

#include <string>

#include "absl/status/statusor.h"

namespace relserve::client {

struct HttpUrl {
  std::string host;
  int port = 80;
  std::string path = "/";
};

// http://HOST[:PORT][/PATH] (IPv6 hosts in brackets).
absl::StatusOr<HttpUrl> ParseHttpUrl(const std::string& url);

// GET over plain HTTP/1.1; the body of a 200 answer.
absl::StatusOr<std::string> HttpGet(const HttpUrl& url, int timeout_ms = 5000);

// The sum of every sample of one series in Prometheus' text format (`name{labels} value` or
// `name value`), over all label sets; 0 when absent.
double SumSamples(const std::string& exposition, const std::string& name);

// The server-side batching counters bench reports on, from one scrape.
struct BatchingCounters {
  double tokens = 0;         // relserve_tokens_total: real tokens computed
  double padded_tokens = 0;  // relserve_padded_tokens_total
  double batch_size_sum = 0;
  double batch_size_count = 0;  // batches
  double requests = 0;       // relserve_requests_total, every code
};
BatchingCounters ReadBatchingCounters(const std::string& exposition);

}  // namespace relserve::client

#endif  // RELSERVE_CLIENT_METRICS_SCRAPE_H_
