#ifndef RELSERVE_SERVER_SERVING_METRICS_BATCH_OBSERVER_H_
#define RELSERVE_SERVER_SERVING_METRICS_BATCH_OBSERVER_H_

#include <string>

#include "server/batching/batch_observer.h"
#include "server/metrics/server_metrics.h"

namespace relserve {

// Feeds one model's batcher events into the server's metrics.
class MetricsBatchObserver : public BatchObserver {
 public:
  MetricsBatchObserver(ServerMetrics* metrics, std::string model) : metrics_(metrics), model_(std::move(model)) {}

  void OnBatch(const BatchStats& stats) override;
  void OnDropped(DropReason reason) override;
  void OnQueueDepth(size_t sequences) override;
  void OnInFlight(int64_t delta) override;

 private:
  ServerMetrics* metrics_;
  std::string model_;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_SERVING_METRICS_BATCH_OBSERVER_H_
