#include "server/util/cpu_count.h"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace relserve {
namespace {

bool ReadFirstLine(const std::string& path, std::string* line) {
  std::ifstream in(path);
  return in && std::getline(in, *line);
}

// cgroup v2 "cpu.max": "QUOTA PERIOD" or "max PERIOD". 0 when there is no limit.
double QuotaFromCpuMax(const std::string& path) {
  std::string line;
  if (!ReadFirstLine(path, &line)) return 0;
  std::vector<std::string> parts = absl::StrSplit(line, ' ', absl::SkipEmpty());
  double quota, period;
  if (parts.size() != 2 || parts[0] == "max" || !absl::SimpleAtod(parts[0], &quota) ||
      !absl::SimpleAtod(parts[1], &period) || quota <= 0 || period <= 0) {
    return 0;
  }
  return quota / period;
}

// cgroup v1: cpu.cfs_quota_us (-1: none) over cpu.cfs_period_us.
double QuotaFromCfs(const std::string& dir) {
  std::string q, p;
  double quota, period;
  if (!ReadFirstLine(dir + "/cpu.cfs_quota_us", &q) || !ReadFirstLine(dir + "/cpu.cfs_period_us", &p) ||
      !absl::SimpleAtod(q, &quota) || !absl::SimpleAtod(p, &period) || quota <= 0 || period <= 0) {
    return 0;
  }
  return quota / period;
}

double Smallest(double a, double b) {
  if (a <= 0) return b;
  if (b <= 0) return a;
  return std::min(a, b);
}

}  // namespace

double CgroupCpuQuota(const std::string& proc_self_cgroup, const std::string& cgroup_root) {
  double quota = 0;
  std::ifstream in(proc_self_cgroup);
  std::string line;
  while (in && std::getline(in, line)) {
    // "ID:CONTROLLERS:PATH"; cgroup v2 has ID 0 and no controllers.
    std::vector<std::string> f = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (f.size() != 3) continue;
    std::string path(absl::StripSuffix(f[2], "/"));
    if (f[0] == "0" && f[1].empty()) {
      // A limit set on any ancestor applies too. Inside a container's cgroup namespace the
      // path is "/" and the container's own limit is the root's file.
      for (;;) {
        quota = Smallest(quota, QuotaFromCpuMax(cgroup_root + path + "/cpu.max"));
        quota = Smallest(quota, QuotaFromCpuMax(cgroup_root + "/unified" + path + "/cpu.max"));
        if (path.empty()) break;
        path = path.substr(0, path.rfind('/'));
      }
    } else {
      for (absl::string_view c : absl::StrSplit(f[1], ',')) {
        if (c != "cpu") continue;
        for (const std::string& mount : {std::string("/cpu"), std::string("/cpu,cpuacct")}) {
          quota = Smallest(quota, QuotaFromCfs(cgroup_root + mount + path));
          if (!path.empty()) quota = Smallest(quota, QuotaFromCfs(cgroup_root + mount));  // a container's view
        }
      }
    }
  }
  return quota;
}

CpuCount DetectCpuCount(const std::string& proc_self_cgroup, const std::string& cgroup_root) {
  CpuCount c;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) c.affinity = CPU_COUNT(&set);
  c.quota_cpus = CgroupCpuQuota(proc_self_cgroup, cgroup_root);
  int cpus = c.affinity > 0 ? c.affinity : static_cast<int>(std::thread::hardware_concurrency());
  // A quota of 2.5 CPUs lets 3 threads run part of the time; planning for 2 keeps them unthrottled.
  if (c.quota_cpus > 0) cpus = std::min(cpus, static_cast<int>(std::floor(c.quota_cpus)));
  c.cpus = std::max(1, cpus);
  return c;
}

std::string CpuCount::Describe() const {
  std::string out = absl::StrCat(cpus, cpus == 1 ? " CPU" : " CPUs", " (affinity ", affinity);
  if (quota_cpus > 0) {
    absl::StrAppend(&out, ", cgroup quota ", quota_cpus);
  } else {
    absl::StrAppend(&out, ", no cgroup quota");
  }
  return out + ")";
}

}  // namespace relserve
