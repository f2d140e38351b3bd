#ifndef RELSERVE_SERVER_METRICS_PROCESS_METRICS_H_
#define RELSERVE_SERVER_METRICS_PROCESS_METRICS_H_

#include <string>

#include "absl/status/statusor.h"

namespace relserve {

// The standard Prometheus process metrics (the names of the Go and Python clients' process
// collectors, which dashboards and alerts already know), read from /proc when /metrics is
// scraped:
//
// | Series                          | Type    | Meaning
// |---------------------------------|---------|-------------------------------------------------
// | process_resident_memory_bytes   | gauge   | resident set size (VmRSS)
// | process_virtual_memory_bytes    | gauge   | virtual memory size
// | process_open_fds                | gauge   | open file descriptors
// | process_max_fds                 | gauge   | the soft limit on open file descriptors (+Inf if unlimited)
// | process_start_time_seconds      | gauge   | start time, seconds since the Unix epoch
// | process_cpu_seconds_total       | counter | user + system CPU time
struct ProcessStats {
  double resident_memory_bytes = 0;
  double virtual_memory_bytes = 0;
  double open_fds = 0;
  double max_fds = 0;
  double start_time_seconds = 0;
  double cpu_seconds_total = 0;
};

// Where the numbers come from: `process_dir` holds stat, limits and fd/ of one process
// (/proc/self), `system_stat` the kernel's boot time (btime in /proc/stat). A missing or
// malformed file is an error naming it (INTERNAL for a malformed one, the errno's code for an
// unreadable one).
struct ProcessSource {
  std::string process_dir = "/proc/self";
  std::string system_stat = "/proc/stat";
};

absl::StatusOr<ProcessStats> ReadProcessStats(const ProcessSource& source = ProcessSource());

// The series above in Prometheus' text format (version 0.0.4).
std::string RenderProcessMetrics(const ProcessStats& stats);

}  // namespace relserve

#endif  // RELSERVE_SERVER_METRICS_PROCESS_METRICS_H_
