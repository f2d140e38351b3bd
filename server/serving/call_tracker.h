#ifndef RELSERVE_SERVER_SERVING_CALL_TRACKER_H_
#define RELSERVE_SERVER_SERVING_CALL_TRACKER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>

#include "absl/time/time.h"
#include "server/serving/model_registry.h"

namespace relserve {

// The `model` label of calls that named no served model (or could not be read at all), so
// that clients cannot create label values at will.
inline constexpr char kUnknownModelLabel[] = "unknown";

// An open stream the drain can end. Ref/Unref keep it alive while the drain talks to it.
class DrainableStream {
 public:
  virtual ~DrainableStream() = default;
  // Ends the stream with UNAVAILABLE if it is waiting for the client's next message (it has
  // nothing in flight); a stream at work ends after its answer instead.
  virtual void EndIfIdle() = 0;
  virtual void Ref() = 0;
  virtual void Unref() = 0;
};

// The service's calls in flight and its drain: what graceful shutdown waits on. Thread-safe.
class CallTracker {
 public:
  CallTracker(const ModelRegistry* registry, size_t max_response_bytes)
      : registry_(registry), max_response_bytes_(max_response_bytes) {}

  // +1 when a call (or stream) starts, -1 when gRPC is done with it.
  void CallStarted() { in_flight_.fetch_add(1); }
  void CallDone() { in_flight_.fetch_sub(1); }
  int64_t in_flight() const { return in_flight_.load(); }

  // Open streams register so that the drain can end the idle ones. AddStream returns false
  // when the drain has begun (the stream should end at once).
  bool AddStream(DrainableStream* stream);
  void RemoveStream(DrainableStream* stream);

  // From now on new calls are refused (UNAVAILABLE) and idle streams are ended; calls at
  // work carry on. WaitForIdle returns true once none is left, false at `deadline`.
  void StartDraining();
  bool draining() const { return draining_.load(); }
  bool WaitForIdle(absl::Time deadline) const;

  // The served model's name, or kUnknownModelLabel when `requested` names none served.
  std::string MetricsModelLabel(const std::string& requested) const;
  // The largest response message the server sends.
  size_t max_response_bytes() const { return max_response_bytes_; }

 private:
  const ModelRegistry* registry_;
  const size_t max_response_bytes_;
  std::atomic<int64_t> in_flight_{0};
  std::atomic<bool> draining_{false};
  std::mutex mu_;
  std::set<DrainableStream*> streams_;  // guarded by mu_
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_SERVING_CALL_TRACKER_H_
