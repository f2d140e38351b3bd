#ifndef RELSERVE_SERVER_RPC_STATUS_MAPPING_H_
#define RELSERVE_SERVER_RPC_STATUS_MAPPING_H_

#include <cstddef>
#include <string>

#include <grpcpp/support/status.h>

#include "absl/status/status.h"
#include "server/serving/status_labels.h"

namespace relserve {

// The one place internal statuses become gRPC statuses. absl and gRPC share their code
// numbering (both follow google.rpc.Code), so the code carries over; INTERNAL details from
// the model are kept, since they name the failing batch, not server internals. Messages are
// cut to kMaxStatusMessageBytes (status_labels.h).
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace relserve

#endif  // RELSERVE_SERVER_RPC_STATUS_MAPPING_H_
