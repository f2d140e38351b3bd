#include "server/model/shape_time_log.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/util/log.h"

namespace relserve {

std::string ShapeTimeLog::Record(int64_t batch, int64_t length, absl::Duration forward, absl::Duration attention,
                                 bool replayed) {
  int thread = 0;
  int64_t n = 0;
  absl::Duration mean_before;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto [it, added] = thread_numbers_.try_emplace(std::this_thread::get_id(), static_cast<int>(thread_numbers_.size()));
    thread = it->second;
    Shape& shape = shapes_[{thread, batch, length}];
    if (shape.forwards > 0) mean_before = shape.total / shape.forwards;
    n = ++shape.forwards;
    shape.total += forward;
  }
  const bool slow = n > 2 && forward > 4 * mean_before;
  if (n > 2 && !slow) return "";
  const std::string line = absl::StrFormat(
      "model %s: forward %d x %d on thread %d (%s %d): %.3f ms, attention %.3f ms (host)%s%s", model_, batch, length,
      thread, n <= 2 ? "call" : "slow call", n, absl::ToDoubleMilliseconds(forward),
      absl::ToDoubleMilliseconds(attention), replayed ? ", a graph replay" : "",
      slow ? absl::StrFormat(", shape mean %.3f ms", absl::ToDoubleMilliseconds(mean_before)) : "");
  LogInfo(line);
  return line;
}

}  // namespace relserve
