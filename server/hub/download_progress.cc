#include "server/hub/download_progress.h"

#include <unistd.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/util/log.h"

namespace relserve {
namespace {

constexpr absl::Duration kTerminalInterval = absl::Milliseconds(100);
constexpr absl::Duration kLogInterval = absl::Seconds(10);

}  // namespace

std::string FormatBytes(int64_t bytes) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB"};
  double v = static_cast<double>(bytes);
  int unit = 0;
  while (v >= 1000 && unit < 4) {
    v /= 1000;
    ++unit;
  }
  return unit == 0 ? absl::StrCat(bytes, " B") : absl::StrFormat("%.1f %s", v, units[unit]);
}

DownloadProgress::DownloadProgress(bool terminal, std::function<void(const std::string&)> write,
                                   std::function<absl::Time()> now)
    : terminal_(terminal), write_(std::move(write)), now_(std::move(now)) {}

DownloadProgress DownloadProgress::ForStandardError() {
  if (isatty(STDERR_FILENO)) {
    return DownloadProgress(true, [](const std::string& text) {
      std::fputs(text.c_str(), stderr);
      std::fflush(stderr);
    });
  }
  return DownloadProgress(false, [](const std::string& text) {
    LogInfo(text.substr(0, text.size() - (!text.empty() && text.back() == '\n' ? 1 : 0)));
  });
}

void DownloadProgress::Start(const std::string& label, int64_t resumed_from, std::optional<int64_t> total) {
  label_ = label;
  resumed_from_ = resumed_from;
  done_ = resumed_from;
  total_ = total;
  started_ = now_();
  last_emit_ = started_;
  if (!terminal_) {
    write_(absl::StrCat("downloading ", label_, total_ ? absl::StrCat(" (", FormatBytes(*total_), ")") : "",
                        resumed_from_ > 0 ? absl::StrCat(", resuming after ", FormatBytes(resumed_from_)) : "", "\n"));
  } else {
    Emit(false);
  }
}

void DownloadProgress::Advance(int64_t bytes) {
  done_ += bytes;
  const absl::Time now = now_();
  if (now - last_emit_ >= (terminal_ ? kTerminalInterval : kLogInterval)) {
    last_emit_ = now;
    Emit(false);
  }
}

void DownloadProgress::Finish(bool completed) {
  if (terminal_) {
    Emit(true);
    return;
  }
  const double seconds = absl::ToDoubleSeconds(now_() - started_);
  write_(completed ? absl::StrCat("downloaded ", label_, ": ", FormatBytes(done_ - resumed_from_), " in ",
                                  absl::StrFormat("%.1f", seconds), " s\n")
                   : absl::StrCat("download of ", label_, " stopped after ", FormatBytes(done_),
                                  total_ ? absl::StrCat(" of ", FormatBytes(*total_)) : "", "\n"));
}

std::string DownloadProgress::Line() const {
  std::string line = absl::StrCat(label_, "  ", FormatBytes(done_));
  if (total_ && *total_ > 0) {
    absl::StrAppend(&line, " / ", FormatBytes(*total_),
                    absl::StrFormat("  %3d%%", static_cast<int>(100.0 * static_cast<double>(done_) / *total_)));
  }
  const double seconds = absl::ToDoubleSeconds(now_() - started_);
  if (seconds > 0.5) {
    absl::StrAppend(&line, "  ", FormatBytes(static_cast<int64_t>((done_ - resumed_from_) / seconds)), "/s");
  }
  return line;
}

void DownloadProgress::Emit(bool final_line) {
  if (terminal_) {
    // Clears the rest of the line (ESC [K): a shorter line must not leave the tail of a longer one.
    write_(absl::StrCat("\r", Line(), "\x1b[K", final_line ? "\n" : ""));
  } else {
    write_(absl::StrCat("downloading ", Line(), "\n"));
  }
}

}  // namespace relserve
