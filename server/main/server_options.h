#ifndef RELSERVE_SERVER_MAIN_SERVER_OPTIONS_H_
#define RELSERVE_SERVER_MAIN_SERVER_OPTIONS_H_

#include "absl/status/statusor.h"
#include "server/hosting/host_options.h"
#include "server/http_api/http_routes.h"
#include "server/http_api/http_server.h"
#include "server/main/server_config.h"
#include "server/rpc/grpc_server.h"
#include "server/serving/encoder_serving.h"

namespace relserve {

// The typed options of each part relserve composes, from its flags: the one place where a flag
// of the server becomes a field of the part it configures.

// The model host's: --device's items (ExpandDeviceList's errors), --dtype and the engine's
// options, the workers, the batch policy (--batching, --length-buckets: empty gives the host's
// default, DefaultLengthBuckets), the queue, --warmup and --warmup-workers, --offline.
absl::StatusOr<HostOptions> HostOptionsFromFlags(const ServerConfig& config);
// The serving layer's limits (requests, responses, truncation, windows, chunked rerank).
ServingLimits ServingLimitsFromFlags(const ServerConfig& config);
// The gRPC port's: address, TLS files, message sizes, connection age (its grace the shutdown's).
GrpcServerOptions GrpcOptionsFromFlags(const ServerConfig& config);
// The HTTP port's (INVALID_ARGUMENT for a bad --http-address), without API keys.
absl::StatusOr<HttpServerConfig> HttpOptionsFromFlags(const ServerConfig& config);
// What /info says of the server's limits.
ServerLimitsInfo HttpLimitsFromFlags(const ServerConfig& config);

}  // namespace relserve

#endif  // RELSERVE_SERVER_MAIN_SERVER_OPTIONS_H_
