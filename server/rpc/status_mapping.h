#ifndef RELSERVE_SERVER_RPC_STATUS_MAPPING_H_
#define RELSERVE_SERVER_RPC_STATUS_MAPPING_H_

#include <cstddef>
#include <string>

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace relserve {

// The one place internal statuses become gRPC statuses. absl and gRPC share their code
// numbering (both follow google.rpc.Code), so the code carries over; INTERNAL details from
// the model are kept, since they name the failing batch, not server internals. Messages are
// cut to kMaxStatusMessageBytes: the message travels percent-encoded in a trailer, and one
// over the client's metadata limit (8 KB by default) would reach it as RESOURCE_EXHAUSTED.
inline constexpr size_t kMaxStatusMessageBytes = 2048;
grpc::Status ToGrpcStatus(const absl::Status& status);

// "OK", "INVALID_ARGUMENT", ...: the code label of metrics.
std::string CodeName(absl::StatusCode code);

}  // namespace relserve

#endif  // RELSERVE_SERVER_RPC_STATUS_MAPPING_H_
