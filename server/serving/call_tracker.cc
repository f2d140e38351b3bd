#include "server/serving/call_tracker.h"

#include <vector>

#include "absl/time/clock.h"

namespace relserve {

bool CallTracker::AddStream(DrainableStream* stream) {
  std::lock_guard<std::mutex> lock(mu_);
  if (draining_.load()) return false;
  streams_.insert(stream);
  return true;
}

void CallTracker::RemoveStream(DrainableStream* stream) {
  std::lock_guard<std::mutex> lock(mu_);
  streams_.erase(stream);
}

void CallTracker::StartDraining() {
  std::vector<DrainableStream*> open;
  {
    // Under the lock with AddStream: a stream either registered before (and is ended below)
    // or sees the drain when it registers.
    std::lock_guard<std::mutex> lock(mu_);
    draining_.store(true);
    for (DrainableStream* s : streams_) {
      s->Ref();
      open.push_back(s);
    }
  }
  // Outside the lock: ending a stream may run its gRPC callbacks, which remove it.
  for (DrainableStream* s : open) {
    s->EndIfIdle();
    s->Unref();
  }
}

bool CallTracker::WaitForIdle(absl::Time deadline) const {
  // Polled: calls end on gRPC and worker threads, and shutdown happens once.
  while (in_flight_.load() > 0) {
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

std::string CallTracker::MetricsModelLabel(const std::string& requested) const {
  auto model = registry_->Find(requested);
  return model.ok() ? (*model)->name : kUnknownModelLabel;
}

}  // namespace relserve
