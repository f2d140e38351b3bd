#ifndef RELSERVE_CLIENT_BENCH_RUNNER_H_
#define RELSERVE_CLIENT_BENCH_RUNNER_H_

#include <iosfwd>
#include <memory>

#include <grpcpp/channel.h>

#include "absl/status/statusor.h"
#include "client/bench_report.h"
#include "client/client_flags.h"

namespace relserve::client {

// A closed-loop load: --concurrency callers on one channel, each sending its next request as
// soon as the last one is answered, for --warmup seconds unmeasured and then for --duration
// seconds or --requests requests. Requests that finish inside the measured window count;
// with --requests, the first N started after the warm-up. Prints ProgressLine to `progress`
// about once a second unless --quiet. A caller whose request reached no server backs off
// (client/connect_backoff.h) before its next attempt. INVALID_ARGUMENT for a bad workload
// (--lengths).
absl::StatusOr<BenchResult> RunBench(const ClientCommand& command, const std::shared_ptr<grpc::Channel>& channel,
                                     std::ostream& progress);

}  // namespace relserve::client

#endif  // RELSERVE_CLIENT_BENCH_RUNNER_H_
