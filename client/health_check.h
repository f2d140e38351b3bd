#ifndef RELSERVE_CLIENT_HEALTH_CHECK_H_
#define RELSERVE_CLIENT_HEALTH_CHECK_H_

#include <iosfwd>
#include <memory>

#include <grpcpp/channel.h>

#include "client/client_flags.h"

namespace relserve::client {

// grpc.health.v1.Health/Check for the server ("") or one model (--service). Prints
// {"service": ..., "status": "SERVING"} (or the failure as ErrorJson on `err`) unless --quiet,
// and returns 0 only for SERVING: NOT_SERVING, an unknown service (NOT_FOUND) and an
// unreachable server all give 1, which is what a container HEALTHCHECK wants.
int RunHealthCheck(const ClientCommand& command, const std::shared_ptr<grpc::Channel>& channel, std::ostream& out,
                   std::ostream& err);

}  // namespace relserve::client

#endif  // RELSERVE_CLIENT_HEALTH_CHECK_H_
