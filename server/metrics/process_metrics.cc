#include "server/metrics/process_metrics.h"

#include <dirent.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "prometheus/metric_family.h"
#include "prometheus/text_serializer.h"

namespace relserve {
namespace {

// /proc files report a size of 0, so they are read as streams.
absl::StatusOr<std::string> ReadProcFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::ErrnoToStatus(errno, absl::StrCat("cannot read ", path));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::Status Malformed(const std::string& path, const std::string& what) {
  return absl::InternalError(absl::StrCat(path, ": ", what));
}

// The fields of /proc/PID/stat after the command name, which is in parentheses and may itself
// hold spaces and parentheses: fields[0] is field 3 (state) of proc(5).
absl::StatusOr<std::vector<std::string>> StatFields(const std::string& path, const std::string& text) {
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return Malformed(path, "no command name in parentheses");
  return std::vector<std::string>(absl::StrSplit(text.substr(close + 1), ' ', absl::SkipWhitespace()));
}

absl::StatusOr<double> StatField(const std::string& path, const std::vector<std::string>& fields, int number) {
  const size_t index = static_cast<size_t>(number - 3);
  double value = 0;
  if (index >= fields.size() || !absl::SimpleAtod(fields[index], &value)) {
    return Malformed(path, absl::StrCat("field ", number, " missing or not a number"));
  }
  return value;
}

absl::StatusOr<double> BootTime(const std::string& path) {
  auto text = ReadProcFile(path);
  if (!text.ok()) return text.status();
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    if (absl::ConsumePrefix(&line, "btime ")) {
      double btime = 0;
      if (absl::SimpleAtod(line, &btime)) return btime;
    }
  }
  return Malformed(path, "no btime line");
}

// The soft limit of "Max open files" in /proc/PID/limits.
absl::StatusOr<double> MaxOpenFiles(const std::string& path) {
  auto text = ReadProcFile(path);
  if (!text.ok()) return text.status();
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    if (!absl::ConsumePrefix(&line, "Max open files")) continue;
    const std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    if (words.empty()) break;
    if (words[0] == "unlimited") return std::numeric_limits<double>::infinity();
    double limit = 0;
    if (absl::SimpleAtod(words[0], &limit)) return limit;
    break;
  }
  return Malformed(path, "no \"Max open files\" soft limit");
}

absl::StatusOr<double> CountEntries(const std::string& path) {
  DIR* dir = opendir(path.c_str());
  if (dir == nullptr) return absl::ErrnoToStatus(errno, absl::StrCat("cannot list ", path));
  double n = 0;
  while (const dirent* entry = readdir(dir)) {
    if (std::strcmp(entry->d_name, ".") != 0 && std::strcmp(entry->d_name, "..") != 0) ++n;
  }
  closedir(dir);
  return n;  // for /proc/self/fd, the listing's own descriptor included (as other clients count)
}

prometheus::MetricFamily Family(const char* name, const char* help, prometheus::MetricType type, double value) {
  prometheus::ClientMetric metric;
  if (type == prometheus::MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  return prometheus::MetricFamily{name, help, type, {metric}};
}

}  // namespace

absl::StatusOr<ProcessStats> ReadProcessStats(const ProcessSource& source) {
  const std::string stat_path = source.process_dir + "/stat";
  auto stat = ReadProcFile(stat_path);
  if (!stat.ok()) return stat.status();
  auto fields = StatFields(stat_path, *stat);
  if (!fields.ok()) return fields.status();
  // proc(5): utime 14, stime 15 and starttime 22 in clock ticks, vsize 23 in bytes, rss 24 in pages.
  auto utime = StatField(stat_path, *fields, 14);
  auto stime = StatField(stat_path, *fields, 15);
  auto start = StatField(stat_path, *fields, 22);
  auto vsize = StatField(stat_path, *fields, 23);
  auto rss = StatField(stat_path, *fields, 24);
  for (const auto* field : {&utime, &stime, &start, &vsize, &rss}) {
    if (!field->ok()) return field->status();
  }
  auto boot = BootTime(source.system_stat);
  if (!boot.ok()) return boot.status();
  auto max_fds = MaxOpenFiles(source.process_dir + "/limits");
  if (!max_fds.ok()) return max_fds.status();
  auto open_fds = CountEntries(source.process_dir + "/fd");
  if (!open_fds.ok()) return open_fds.status();

  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  ProcessStats s;
  s.resident_memory_bytes = *rss * page;
  s.virtual_memory_bytes = *vsize;
  s.open_fds = *open_fds;
  s.max_fds = *max_fds;
  s.start_time_seconds = *boot + *start / ticks;
  s.cpu_seconds_total = (*utime + *stime) / ticks;
  return s;
}

std::string RenderProcessMetrics(const ProcessStats& s) {
  using prometheus::MetricType;
  const std::vector<prometheus::MetricFamily> families = {
      Family("process_resident_memory_bytes", "Resident memory size in bytes.", MetricType::Gauge,
             s.resident_memory_bytes),
      Family("process_virtual_memory_bytes", "Virtual memory size in bytes.", MetricType::Gauge,
             s.virtual_memory_bytes),
      Family("process_open_fds", "Number of open file descriptors.", MetricType::Gauge, s.open_fds),
      Family("process_max_fds", "Maximum number of open file descriptors.", MetricType::Gauge, s.max_fds),
      Family("process_start_time_seconds", "Start time of the process since unix epoch in seconds.",
             MetricType::Gauge, s.start_time_seconds),
      Family("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", MetricType::Counter,
             s.cpu_seconds_total),
  };
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace relserve
