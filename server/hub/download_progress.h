#ifndef RELSERVE_SERVER_HUB_DOWNLOAD_PROGRESS_H_
#define RELSERVE_SERVER_HUB_DOWNLOAD_PROGRESS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace relserve {

// Reports one file's download at a time. On a terminal, one line redrawn in place at most
// every 100 ms ("model.safetensors  12.5 MB / 45.0 MB  27%  8.1 MB/s"); elsewhere (a log
// file, a container's output), a log line when the file starts, every 10 s while it runs and
// when it ends. Not thread-safe: one download at a time.
class DownloadProgress {
 public:
  // `write` receives the text (lines end in '\n'; terminal updates start with '\r').
  DownloadProgress(bool terminal, std::function<void(const std::string&)> write,
                   std::function<absl::Time()> now = absl::Now);
  // Standard error: a terminal when isatty(2); otherwise lines through LogInfo.
  static DownloadProgress ForStandardError();

  // `label` names the file ("org/repo: model.safetensors"); `resumed_from` bytes were already
  // there; `total` is the file's size when known.
  void Start(const std::string& label, int64_t resumed_from, std::optional<int64_t> total);
  void Advance(int64_t bytes);
  // The download ended: completed (and checked), or failed (the line says where it stopped).
  void Finish(bool completed);

 private:
  std::string Line() const;
  void Emit(bool final_line);

  bool terminal_;
  std::function<void(const std::string&)> write_;
  std::function<absl::Time()> now_;
  std::string label_;
  int64_t resumed_from_ = 0;
  int64_t done_ = 0;
  std::optional<int64_t> total_;
  absl::Time started_;
  absl::Time last_emit_;
};

// 1234567 -> "1.2 MB" (decimal units, as the Hub shows sizes).
std::string FormatBytes(int64_t bytes);

}  // namespace relserve

#endif  // RELSERVE_SERVER_HUB_DOWNLOAD_PROGRESS_H_
