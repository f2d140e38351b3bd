#ifndef RELSERVE_SERVER_UTIL_CPU_COUNT_H_
#define RELSERVE_SERVER_UTIL_CPU_COUNT_H_

#include <string>

namespace relserve {

// How many CPUs this process may really use, and why: the CPUs its affinity mask allows
// (taskset, cpusets, Kubernetes' static CPU manager) and its cgroup's CPU quota (a container's
// CPU limit), whichever is smaller. std::thread::hardware_concurrency() counts every core of
// the machine, so a container limited to 4 CPUs on a 64-core node would start 64 threads and
// be throttled.
struct CpuCount {
  int cpus = 1;            // what the process should plan for (>= 1)
  int affinity = 0;        // CPUs in the affinity mask (0: unknown)
  double quota_cpus = 0;   // the cgroup quota in CPUs (0: none)
  std::string Describe() const;  // e.g. "4 CPUs (affinity 16, cgroup quota 4)"
};

// Reads the affinity mask, /proc/self/cgroup and the cgroup files under `cgroup_root`
// (cgroup v2 cpu.max at the process's cgroup and its ancestors, or v1 cpu.cfs_quota_us and
// cpu.cfs_period_us).
CpuCount DetectCpuCount(const std::string& proc_self_cgroup = "/proc/self/cgroup",
                        const std::string& cgroup_root = "/sys/fs/cgroup");

// The smallest CPU quota that applies, in CPUs (0: none), from the same files; exposed for tests.
double CgroupCpuQuota(const std::string& proc_self_cgroup, const std::string& cgroup_root);

}  // namespace relserve

#endif  // RELSERVE_SERVER_UTIL_CPU_COUNT_H_
