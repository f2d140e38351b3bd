#include "server/serving/metrics_batch_observer.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "server/util/log.h"

namespace relserve {

void MetricsBatchObserver::OnBatch(const BatchStats& stats) {
  absl::Duration max_queue;
  for (const absl::Duration& q : stats.queue_times) {
    max_queue = std::max(max_queue, q);
    metrics_->RecordQueueTime(model_, absl::ToDoubleSeconds(q));
  }
  metrics_->RecordBatch(model_, stats.batch_size, stats.real_tokens, stats.padded_tokens,
                        absl::ToDoubleSeconds(max_queue), absl::ToDoubleSeconds(stats.inference),
                        stats.status == absl::StatusCode::kOk);
  if (stats.status == absl::StatusCode::kOk && stats.stages.prepare + stats.stages.forward + stats.stages.results > absl::ZeroDuration()) {
    metrics_->RecordBatchStages(model_, absl::ToDoubleSeconds(stats.stages.prepare),
                                absl::ToDoubleSeconds(stats.stages.forward), absl::ToDoubleSeconds(stats.stages.results));
  }
  if (stats.status != absl::StatusCode::kOk) {
    // Out of memory is followed by a retry in halves; anything else fails the batch's requests.
    LogWarning(absl::StrCat("model ", model_, ": batch of ", stats.batch_size, " sequences (", stats.padded_tokens,
                            " padded tokens) failed with ", absl::StatusCodeToString(stats.status), ": ",
                            stats.error));
  }
}

void MetricsBatchObserver::OnDropped(DropReason reason) {
  switch (reason) {
    case DropReason::kDeadlineExceeded: metrics_->RecordRejection(model_, "deadline_exceeded"); break;
    case DropReason::kCancelled: metrics_->RecordRejection(model_, "cancelled"); break;
    case DropReason::kQueueFull: metrics_->RecordRejection(model_, "queue_full"); break;
    case DropReason::kShutdown: metrics_->RecordRejection(model_, "shutdown"); break;
  }
}

void MetricsBatchObserver::OnQueueDepth(size_t sequences) {
  metrics_->SetQueueDepth(model_, static_cast<int64_t>(sequences));
}

void MetricsBatchObserver::OnInFlight(int64_t delta) { metrics_->AddInFlightSequences(model_, delta); }

}  // namespace relserve
