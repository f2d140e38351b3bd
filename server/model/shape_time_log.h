#ifndef RELSERVE_SERVER_MODEL_SHAPE_TIME_LOG_H_
#define RELSERVE_SERVER_MODEL_SHAPE_TIME_LOG_H_

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>

#include "absl/time/time.h"

namespace relserve {

// The host time of forwards per (thread, batch, length), for --log-shape-times: a shape that is
// cold on a thread (a library's first-call work, such as cuDNN building an execution plan in its
// per-thread cache) shows in the log without a profiler. Logged: the first two forwards of every
// (thread, batch, length), and any later one that takes more than four times that shape's mean
// on its thread. Threads are numbered in the order they first ran a forward. Thread-safe.
class ShapeTimeLog {
 public:
  explicit ShapeTimeLog(std::string model) : model_(std::move(model)) {}

  // One forward of `batch` x `length` on the calling thread: its host time, the host time of
  // its attention calls, and whether it replayed a CUDA graph. Returns the line it logged
  // (LogInfo), or "" when it logged none.
  std::string Record(int64_t batch, int64_t length, absl::Duration forward, absl::Duration attention, bool replayed);

 private:
  struct Shape {
    int64_t forwards = 0;
    absl::Duration total;
  };
  const std::string model_;
  std::mutex mu_;
  std::map<std::thread::id, int> thread_numbers_;            // guarded by mu_
  std::map<std::tuple<int, int64_t, int64_t>, Shape> shapes_;  // (thread, batch, length); guarded by mu_
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_SHAPE_TIME_LOG_H_
